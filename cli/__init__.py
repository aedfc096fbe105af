"""The ``mnemo`` command line: a thin Typer layer over the ``mnemosyne`` API."""

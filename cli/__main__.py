"""``python -m mnemo_cli``: the same as the ``mnemo`` script."""

from .app import main

main()

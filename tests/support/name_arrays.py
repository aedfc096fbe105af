"""Search without the arrays of names: the reference a screened search is compared with."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from mnemosyne.recall import names


@contextmanager
def no_arrays() -> Iterator[None]:
    """No handle reads the maps of names whole: every name is read from the store or remembered
    one by one, so no screen turns a candidate away."""
    before = names.LIMIT
    names.LIMIT = -1
    try:
        yield
    finally:
        names.LIMIT = before

"""Keyword arguments of :class:`~mnemosyne.api.repo.Repo` that were renamed: the old name still works.

A method that renamed ``ref=`` to ``at=`` takes both, ``ref`` defaulting to
:data:`UNSET`, and asks :func:`renamed` which value holds: the old name warns
with a ``DeprecationWarning`` pointing at the caller; both at once is an error.
"""

from __future__ import annotations

import warnings
from typing import Any

from mnemosyne.errors import InvalidInput

UNSET: Any = object()
"""The default of a renamed keyword's old name: the caller did not give it."""


def renamed(old: str, new: str, old_value: Any, new_value: Any) -> Any:
    """The value of a renamed keyword argument, warning when the old name was used."""
    if old_value is UNSET:
        return new_value
    if new_value is not None:
        raise InvalidInput(f"give {new}= alone ({old}= is its old name)")
    warnings.warn(f"{old}= is deprecated; use {new}=", DeprecationWarning, stacklevel=3)
    return old_value

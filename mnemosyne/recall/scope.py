"""Use and sensitivity scoping: which memories may serve a use, at most how sensitive.

A memory's ``meta["allowed_for"]`` lists the uses it may serve; one without the
list serves any use unless the store requires the list. Its
``meta["sensitivity"]`` is a level on the store's ordered scale; an unlabeled
memory counts as the store's default level (not public, by default) and a label
off the scale as the most sensitive, so a mistake never widens what is shown.
Both are judged from the node alone, before ranking.
"""

from __future__ import annotations

from typing import Any

import msgspec

from mnemosyne.errors import InvalidInput
from mnemosyne.store import settings
from mnemosyne.store.kv.base import ReadTxn


class Scoping(msgspec.Struct, frozen=True, kw_only=True):
    """The use and sensitivity a read is scoped to, with the store's settings resolved.

    Attributes:
        allowed_for: the use asked for; None for any.
        require_allowed_for: leave out memories without an ``allowed_for`` list
            (when a use is asked for).
        max_level: the most sensitive level allowed, an index into ``levels``; None for any.
        levels: the sensitivity scale, least sensitive first.
        unlabeled_level: the level of a memory without ``meta["sensitivity"]``.
    """

    allowed_for: str | None = None
    require_allowed_for: bool = False
    max_level: int | None = None
    levels: tuple[str, ...] = ()
    unlabeled_level: int = 0

    @property
    def active(self) -> bool:
        """Whether it leaves anything out."""
        return self.allowed_for is not None or self.max_level is not None


def scoping(txn: ReadTxn, allowed_for: str | None, max_sensitivity: str | None) -> Scoping:
    """The :class:`Scoping` of a use and a level, read against the store's settings.

    Raises:
        InvalidInput: ``max_sensitivity`` is not on the store's scale (the message lists it).
    """
    require = allowed_for is not None and settings.get(txn, "recall.require_allowed_for") == "true"
    if max_sensitivity is None:
        return Scoping(allowed_for=allowed_for, require_allowed_for=require)
    levels = tuple(settings.get(txn, "recall.sensitivity_levels").split(","))
    if max_sensitivity not in levels:
        raise InvalidInput(
            f"max_sensitivity {max_sensitivity!r} is not on the scale: {', '.join(levels)} "
            "(recall.sensitivity_levels)"
        )
    unlabeled = settings.get(txn, "recall.unlabeled_sensitivity")
    return Scoping(
        allowed_for=allowed_for,
        require_allowed_for=require,
        max_level=levels.index(max_sensitivity),
        levels=levels,
        # A default off the scale (the scale changed since) is judged as an unknown label is.
        unlabeled_level=levels.index(unlabeled) if unlabeled in levels else len(levels) - 1,
    )


def permitted(meta: dict[str, Any] | None, scope: Scoping) -> bool:
    """Whether a memory with ``meta`` may serve ``scope``'s use at its sensitivity."""
    meta = meta or {}
    if scope.allowed_for is not None:
        uses = meta.get("allowed_for")
        if uses is None:
            if scope.require_allowed_for:
                return False
        elif not isinstance(uses, list) or scope.allowed_for not in uses:
            return False  # a malformed list (stored before lists were checked) allows nothing
    if scope.max_level is not None:
        label = meta.get("sensitivity")
        if label is None:
            level = scope.unlabeled_level
        elif isinstance(label, str) and label in scope.levels:
            level = scope.levels.index(label)
        else:
            level = len(scope.levels) - 1
        if level > scope.max_level:
            return False
    return True

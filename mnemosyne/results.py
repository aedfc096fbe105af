"""What history queries return: versions, changes, diffs."""

from __future__ import annotations

from typing import Literal

import msgspec

from mnemosyne.objects import Commit, Node

Status = Literal["current", "superseded", "deleted"]


class Version(msgspec.Struct, frozen=True, kw_only=True):
    """One version of an id in a branch's history.

    Attributes:
        id: the node id.
        hash: the version's content address.
        node: the version itself.
        commit: the commit that wrote it.
        status: ``current`` (in the tree at the tip), ``superseded`` (a later
            version replaced it) or ``deleted`` (the id was removed after it).
        ended_by: id of the commit that superseded or removed it; None while current.
        superseded_by: hash of the version that replaced it, if any.
    """

    id: str
    hash: str
    node: Node
    commit: Commit
    status: Status
    ended_by: str | None = None
    superseded_by: str | None = None


class Change(msgspec.Struct, frozen=True):
    """One id that differs between two snapshots: ``old`` → ``new`` (None for absent)."""

    id: str
    old: Node | None
    new: Node | None


class Diff(msgspec.Struct, frozen=True, kw_only=True):
    """What changed from snapshot ``a`` to snapshot ``b``, each list ordered by id."""

    a: str
    b: str
    added: list[Change]
    removed: list[Change]
    modified: list[Change]

"""What history queries return: versions, changes, diffs."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec

from mnemosyne.model.objects import Commit, Node

Status = Literal["current", "superseded", "deleted", "expired", "redacted"]


class Version(msgspec.Struct, frozen=True, kw_only=True):
    """One version of an id in a branch's history.

    Attributes:
        id: the node id.
        hash: the version's content address.
        node: the version itself; None when it was erased (status ``redacted``).
        commit: the commit that wrote it.
        status: ``current`` (in the tree at the tip), ``expired`` (current, but
            past its ``expires_at``), ``superseded`` (a later version replaced it) or
            ``deleted`` (the id was removed after it). Derived, never stored.
        ended_by: id of the commit that superseded or removed it; None while current.
        superseded_by: hash of the version that replaced it, if any.
    """

    id: str
    hash: str
    node: Node | None
    commit: Commit
    status: Status
    ended_by: str | None = None
    superseded_by: str | None = None


class Change(msgspec.Struct, frozen=True):
    """One id that differs between two snapshots: ``old`` → ``new``.

    A side is None when the id is absent there, or when that version was erased;
    ``old_hash``/``new_hash`` tell the two apart (a hash with no node: erased).
    """

    id: str
    old: Node | None
    new: Node | None
    old_hash: str | None = None
    new_hash: str | None = None

    @property
    def redacted(self) -> bool:
        """Whether a side of the change was erased."""
        return (self.old is None and self.old_hash is not None) or (
            self.new is None and self.new_hash is not None
        )


class Diff(msgspec.Struct, frozen=True, kw_only=True):
    """What changed from snapshot ``a`` to snapshot ``b``, each list ordered by id."""

    a: str
    b: str
    added: list[Change]
    removed: list[Change]
    modified: list[Change]


class Fact(msgspec.Struct, frozen=True, kw_only=True):
    """One claim on a (subject, predicate) timeline, with its effective interval.

    Attributes:
        id: the claim node's id.
        node: the claim node (its provenance says where it came from).
        commit: the commit that recorded this version of the claim.
        effective_from: when it starts to apply (its ``valid_from``).
        effective_to: when it stops applying: the earlier of its own ``valid_to``
            and the next claim's ``valid_from``; None while open-ended.
        supersedes: id of the claim it replaced: the one just before it in valid
            time, recorded earlier, whose interval it cuts short. A delayed claim
            that slots in before existing ones supersedes nothing.
    """

    id: str
    node: Node
    commit: Commit
    effective_from: datetime
    effective_to: datetime | None
    supersedes: str | None = None

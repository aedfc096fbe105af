"""What the API returns: versions, diffs, facts, blame, merges, recall hits, commits.

Every result is a frozen msgspec ``Struct`` of public values (hex hashes, UTC
datetimes, nodes), complete enough that a face renders it without asking the
store again; :mod:`mnemosyne.model.jsonform` gives each its one JSON form.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec

from mnemosyne.model.objects import Commit, Node, Provenance, Redaction

Status = Literal["current", "superseded", "deleted", "expired", "redacted"]
ConflictKind = Literal["edit/edit", "delete/edit", "edit/delete", "add/add"]


class CommitResult(Commit, frozen=True, kw_only=True):
    """What :meth:`Repo.commit` did: the commit, and the ids it wrote and removed.

    A commit whose puts and removals change nothing writes nothing (unless an
    empty commit is allowed): ``created`` is then False and the result is the
    branch's tip as it was, so a write retried after a timeout is harmless.

    Attributes:
        put_ids: the ids of the nodes put, in the order given (generated ids too).
        modified_ids: those of ``put_ids`` that replaced a version the branch
            had (the others were added, or put again unchanged).
        deleted_ids: the ids this commit removed, in the order given (none when
            nothing changed).
        created: whether a new commit was recorded.
    """

    put_ids: tuple[str, ...] = ()
    modified_ids: tuple[str, ...] = ()
    deleted_ids: tuple[str, ...] = ()
    created: bool = True


class Freshness(msgspec.Struct, frozen=True, kw_only=True):
    """What a face that keeps what it read compares to tell whether it still holds, from one read.

    Objects never change, so what was read at one tip stays true while the tip
    stays, unless some of it was erased since: erasure leaves trees and tips as
    they were and moves the count instead.

    Attributes:
        tip: the commit id at the branch's tip, as :meth:`Repo.tip` gives it (None
            when the branch does not exist or has no commits yet).
        erasures: the tenant's erasure count, as :meth:`Repo.erasures` gives it.
    """

    tip: str | None
    erasures: int


class Version(msgspec.Struct, frozen=True, kw_only=True):
    """One version of an id in a branch's history.

    Attributes:
        id: the node id.
        hash: the version's content address.
        node: the version itself; None when it was erased (status ``redacted``).
        commit: the commit that wrote it.
        status: ``current`` (in the tree at the tip), ``expired`` (current, but
            past its ``expires_at``), ``superseded`` (a later version replaced it),
            ``deleted`` (the id was removed after it) or ``redacted`` (erased).
            Derived, never stored.
        ended_by: id of the commit that superseded or removed it; None while current.
        superseded_by: hash of the version that replaced it, if any.
        redaction: for an erased version, its redaction record (who, when, why).
        verified: the last commit that re-confirmed this version without changing
            it (``Repo.verify``: its record time, author and message say when, by
            whom and how), while it stood; None if it never was.
    """

    id: str
    hash: str
    node: Node | None
    commit: Commit
    status: Status
    ended_by: str | None = None
    superseded_by: str | None = None
    redaction: Redaction | None = None
    verified: Commit | None = None


class History(msgspec.Struct, frozen=True, kw_only=True):
    """One id as a snapshot holds it, with its history (``Repo.histories``).

    Attributes:
        id: the node id.
        node: the version in the snapshot, as ``get`` reads it: None when the id
            is not there, its version has expired (unless expired ones were asked
            for) or was erased.
        versions: the id's versions in the snapshot's history, newest first, as
            ``history`` gives them. After a merge that kept this side's value over
            a later one of the other side, the first is that later one: ``node``
            is what the snapshot holds.
    """

    id: str
    node: Node | None
    versions: list[Version]


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
    """What changed from snapshot ``a`` to snapshot ``b``, each list ordered by id.

    Attributes:
        a: the id of the old commit; None for the empty snapshot (what a root
            commit added).
        b: the id of the new commit.
        added: ids present only in ``b``.
        removed: ids present only in ``a``.
        modified: ids whose version differs.
    """

    a: str | None
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
        confirmed_at: when this version was last confirmed in the snapshot read:
            the record time of the commit that wrote it or of a later
            verification of it (``Repo.verify``).
    """

    id: str
    node: Node
    commit: Commit
    effective_from: datetime
    effective_to: datetime | None
    supersedes: str | None = None
    confirmed_at: datetime | None = None


class BlameLine(msgspec.Struct, frozen=True, kw_only=True):
    """One line of text (or one field of a JSON object) and the commit that wrote it.

    Attributes:
        key: the field name for JSON-object content; None for text lines.
        text: the line, or the field's value as compact JSON.
        commit: id of the commit that wrote it.
        author: that commit's author.
        record_time: that commit's record time.
    """

    key: str | None
    text: str
    commit: str
    author: str
    record_time: datetime


class Blame(msgspec.Struct, frozen=True, kw_only=True):
    """The answer to "where did this belief come from".

    Attributes:
        id: the node id.
        hash: the current version's hash (also when it was erased).
        node: the current version (its provenance says which step, observation
            or tool call formed it); None when that version was erased.
        commit: the commit that wrote the current version.
        lines: per-line attribution for text, per-field for JSON objects and
            claims, else one entry for the whole value; empty when erased.
        redacted: the current version was erased (``node`` is None).
        redaction: the erased version's redaction record (who, when, why).
        verified: the last commit that re-confirmed the current version without
            changing it (``Repo.verify``), after ``commit`` wrote it; None if none did.
    """

    id: str
    hash: str
    node: Node | None
    commit: Commit
    lines: list[BlameLine]
    redacted: bool = False
    redaction: Redaction | None = None
    verified: Commit | None = None


class Conflict(msgspec.Struct, frozen=True):
    """An id both sides of a merge changed in ways that cannot both hold.

    Attributes:
        id: the node id.
        kind: ``edit/edit``, ``delete/edit`` (ours deleted, theirs edited),
            ``edit/delete`` or ``add/add``.
        base: the version at the merge base (None if absent or erased).
        ours: our version (None if deleted or erased).
        theirs: their version (None if deleted or erased).
        base_hash: hex hash of the base version (None if absent).
        ours_hash: hex hash of our version (None if deleted).
        theirs_hash: hex hash of their version (None if deleted).

    A side with a hash and no node was erased: its bytes are gone, so it
    cannot be merged key by key; resolve it like any other conflict.
    """

    id: str
    kind: ConflictKind
    base: Node | None
    ours: Node | None
    theirs: Node | None
    base_hash: str | None = None
    ours_hash: str | None = None
    theirs_hash: str | None = None

    @property
    def erased(self) -> tuple[str, ...]:
        """The sides (``base``, ``ours``, ``theirs``) whose version was erased."""
        sides = (
            ("base", self.base, self.base_hash),
            ("ours", self.ours, self.ours_hash),
            ("theirs", self.theirs, self.theirs_hash),
        )
        return tuple(side for side, node, hash_ in sides if node is None and hash_ is not None)


class Contradiction(msgspec.Struct, frozen=True):
    """Two claims on one (subject, predicate) that disagree about overlapping valid time.

    Attributes:
        subject: what the claims are about.
        predicate: which attribute.
        claims: the claim nodes, one from each side of the merge that found them.
        record: hex id of the contradiction record a merge commit keeps (None for
            one a merge stopped by conflicts reported but did not record).
    """

    subject: str
    predicate: str
    claims: tuple[Node, ...]
    record: str | None = None


class TimelineChange(msgspec.Struct, frozen=True, kw_only=True):
    """One commit of a branch's history where a (subject, predicate) timeline changed.

    Attributes:
        commit: the commit on the branch's first-parent line whose claims on the
            attribute differ from its first parent's: one that wrote, corrected
            or removed a claim, or a merge that brought claims in.
        timeline: the timeline there, as ``Repo.timeline(..., at=commit)`` gives it.
        contradictions: the contradictions on the attribute still open there
            (both claims stand, so both are in ``timeline``).
    """

    commit: Commit
    timeline: list[Fact]
    contradictions: list[Contradiction]


class MergeResult(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of :meth:`Repo.merge`.

    Attributes:
        commit: the merge commit, the new tip after a fast-forward, the unchanged
            tip when there was nothing to merge, or None while conflicts are unresolved.
        conflicts: ids both sides changed incompatibly (empty once resolved).
        contradictions: claims that disagree across the two sides; reported and
            recorded in the merge commit, they do not block it.
        fast_forward: the branch just moved to the source's tip.
        up_to_date: the source was already merged; nothing changed.
        previous: the branch's tip before the merge (None for a branch with no commits).
    """

    commit: Commit | None
    conflicts: list[Conflict]
    contradictions: list[Contradiction]
    fast_forward: bool = False
    up_to_date: bool = False
    previous: Commit | None = None


class Hit(msgspec.Struct, frozen=True, kw_only=True):
    """One search result: a node version current in the snapshot searched.

    Attributes:
        id: the node id.
        hash: the version's hash.
        node: the version (its provenance says where it came from).
        score: in hybrid mode, the ranking model's probability that the memory
            holds what the query asks (0 to 1); the BM25 score in lexical mode and
            the cosine in semantic mode. Higher is better.
        lexical_rank: 1-based rank in the BM25 ranking, or None.
        semantic_rank: 1-based rank in the embedding ranking, or None.
        confirmed_at: when this version was last confirmed in the snapshot
            searched: the record time of the commit that wrote it or of a later
            verification of it (``Repo.verify``); how stale it may be.
    """

    id: str
    hash: str
    node: Node
    score: float
    lexical_rank: int | None = None
    semantic_rank: int | None = None
    confirmed_at: datetime | None = None

    @property
    def provenance(self) -> Provenance:
        """The node's provenance."""
        return self.node.provenance


class ContextItem(msgspec.Struct, frozen=True, kw_only=True):
    """One memory placed in a context, with its citation.

    Attributes:
        id: the node id.
        hash: the version's hash.
        text: the text given to the prompt.
        tokens: its estimated token count, citation included.
        score: its search score.
        claim_in_force: a claim in force at the time asked about.
        confirmed_at: when the version was last confirmed (see ``Hit.confirmed_at``).
        event_time: when the agent formed the memory (the node's ``event_time``), if known.
        context_for: the id of the hit this memory was packed beside, when it was
            not a hit itself but the memory before a hit too short to read alone
            (a reply: "Yes, last May!"); None for a hit.
    """

    id: str
    hash: str
    text: str
    tokens: int
    score: float
    claim_in_force: bool = False
    confirmed_at: datetime | None = None
    event_time: datetime | None = None
    context_for: str | None = None

    def cited(self) -> str:
        """The line a prompt gets: ``[id@hash7] (event date) text``."""
        when = f"({self.event_time.date().isoformat()}) " if self.event_time is not None else ""
        return f"[{self.id}@{self.hash[:7]}] {when}{self.text}"


class Context(msgspec.Struct, frozen=True, kw_only=True):
    """The smallest cited context for a query that fits a token budget.

    Attributes:
        query: what was asked.
        budget_tokens: the budget.
        tokens: the estimated tokens used (one token per four characters).
        items: the memories included, best first.
    """

    query: str
    budget_tokens: int
    tokens: int
    items: list[ContextItem]

    def render(self) -> str:
        """The context as text, one memory per line, each cited as ``[id@hash7]``, with its event date."""
        return "\n".join(item.cited() for item in self.items)


class ReadRecord(msgspec.Struct, frozen=True, kw_only=True):
    """What one search or context call returned, kept under a caller's run id.

    Attributes:
        run_id: the caller's run id.
        time: when (the store's clock).
        kind: ``search`` or ``context``.
        query: what was asked.
        ids: the ids returned, in order.
        hashes: their versions' hashes.
    """

    run_id: str
    time: datetime
    kind: str
    query: str
    ids: list[str]
    hashes: list[str]


class PendingRecall(msgspec.Struct, frozen=True, kw_only=True):
    """What the next search or context on a writable handle does before it answers.

    A commit only queues the versions it writes; the first search after catches
    the recall indexes up (see :meth:`Repo.pending_recall`, :meth:`Repo.catch_up_recall`).

    Attributes:
        versions: node versions to index: those written since the indexes last
            caught up, or every stored one when ``rebuild``.
        embeddings: versions whose contents are to be embedded, at most (a content
            embedded already is skipped): those of ``versions``, and every version
            indexed before when the embedder's model is new to the tenant. 0
            without an embedder.
        model: the id of the model that embeds them, or None (no embedder).
        rebuild: the recall index was written by an older version: it is built
            again from every stored version.
    """

    versions: int = 0
    embeddings: int = 0
    model: str | None = None
    rebuild: bool = False

    @property
    def total(self) -> int:
        """How many versions the catch-up goes through: what its progress counts up to."""
        return max(self.versions, self.embeddings)

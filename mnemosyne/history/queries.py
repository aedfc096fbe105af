"""Read-side queries over one snapshot: versions of an id, facts, timelines, contradictions.

Each function takes a :class:`~mnemosyne.index.view.View` and the commit to read, so
the API only resolves revisions and times and hands over.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from itertools import islice

import msgspec

from mnemosyne.errors import CorruptObject, NotFound, Redacted
from mnemosyne.history import walk
from mnemosyne.index.confirmed import confirmed_at, verifications
from mnemosyne.index.view import View
from mnemosyne.model.objects import Claim, Commit, ContradictionObject, Node
from mnemosyne.model.results import Contradiction, Fact, Status, TimelineChange, Version


def expired(node: Node, now: datetime) -> bool:
    """Whether ``node`` is past its ``expires_at`` at ``now``."""
    return node.expires_at is not None and node.expires_at <= now


def _claim(node: Node) -> Claim:
    claim = node.content
    assert isinstance(claim, Claim)
    return claim


def readable(view: View, oid: bytes) -> Node | None:
    """The node version, or None when it was erased."""
    try:
        return view.node(oid)
    except Redacted:
        return None


AHEAD = 8
"""Change-index entries per id whose commits and versions :func:`histories` reads together."""

Entry = tuple[int, bytes, bytes | None, bool]
"""A change-index entry: ``(generation, commit, hash or None, verified)`` (``ChangeIndex.entries_of``)."""


def histories(
    view: View,
    node_ids: list[str],
    tip: bytes,
    now: datetime,
    limit: int | None = None,
    known: dict[bytes, Node | None] | None = None,
) -> dict[str, list[Version]]:
    """:func:`history` of each of ``node_ids``, their reads made together.

    The change-index entries of every id are read at once, then the commit-graph
    entries, commits and versions their newest :data:`AHEAD` name: on PostgreSQL a
    few round trips for any number of ids, where one history costs about four.
    ``known`` holds versions read already (None: erased), by hash; it gains those read here.
    """
    if limit == 0:
        return {node_id: [] for node_id in node_ids}
    txn = view.txn
    top = view.graph.shape(txn, tip).generation
    view.changes.prefetch(txn, node_ids)
    entries = {node_id: list(view.changes.entries_of(txn, node_id, top)) for node_id in node_ids}
    commits: list[bytes] = [tip]
    values: list[bytes] = []
    for found in entries.values():
        for _, commit, value, verified in islice(found, AHEAD):
            commits.append(commit)
            if value is not None and not verified:
                values.append(value)
    view.graph.prefetch(txn, commits)
    view.objects.prefetch(txn, commits)
    known = {} if known is None else known
    unread = [value for value in dict.fromkeys(values) if value not in known]
    try:
        known.update(zip(unread, view.objects.nodes(txn, unread), strict=True))
    except (NotFound, CorruptObject):
        pass  # history() reads them one by one, and says so where it gets to one
    return {node_id: history(view, node_id, tip, now, limit, known, entries[node_id]) for node_id in node_ids}


def history(
    view: View,
    node_id: str,
    tip: bytes,
    now: datetime,
    limit: int | None = None,
    known: Mapping[bytes, Node | None] | None = None,
    entries: list[Entry] | None = None,
) -> list[Version]:
    """Every version of ``node_id`` in ``tip``'s history, newest first, with its status.

    With ``limit``, the newest ``limit`` versions only: the walk stops there.
    ``known`` holds versions read already (None: erased), by hash; ``entries`` the
    id's change-index entries up to ``tip``'s generation, read already.
    """
    out: list[Version] = []
    newer: tuple[bytes, bytes | None] | None = None
    if entries is None:
        top = view.graph.shape(view.txn, tip).generation
        entries = list(view.changes.entries_of(view.txn, node_id, top))
    # Verifications newest first; each belongs to the newest version written before it.
    checks = list(verifications(view, node_id, tip, entries))
    changes = [(generation, commit, value) for generation, commit, value, verified in entries if not verified]
    for oid, value in walk.changes_of(view, node_id, tip, changes):
        if limit is not None and len(out) >= limit:
            break
        if value is not None:
            commit = Commit.from_object(oid, view.commit(oid))
            node = known[value] if known is not None and value in known else readable(view, value)
            status: Status
            ended_by = superseded_by = None
            redaction = None
            if node is None:
                status = "redacted"
                redaction = view.objects.redaction(view.txn, value)
                if newer is not None:
                    ended_by = newer[0].hex()
            elif newer is None:
                status = "expired" if expired(node, now) else "current"
            elif newer[1] is None:
                status, ended_by = "deleted", newer[0].hex()
            else:
                status, ended_by, superseded_by = "superseded", newer[0].hex(), newer[1].hex()
            out.append(
                Version(
                    id=node_id,
                    hash=value.hex(),
                    node=node,
                    commit=commit,
                    status=status,
                    ended_by=ended_by,
                    superseded_by=superseded_by,
                    redaction=redaction,
                    verified=_last_verification(view, checks, oid, value, newer),
                )
            )
        newer = (oid, value)
    return out


def _last_verification(
    view: View,
    checks: list[tuple[int, bytes, bytes]],
    writer: bytes,
    value: bytes,
    newer: tuple[bytes, bytes | None] | None,
) -> Commit | None:
    """The newest of ``checks`` that verified ``value`` after ``writer`` wrote it and before ``newer``."""
    if not checks:
        return None
    low = view.graph.shape(view.txn, writer).generation
    high = view.graph.shape(view.txn, newer[0]).generation if newer is not None else None
    for generation, commit, verified in checks:
        if verified == value and generation > low and (high is None or generation < high):
            return Commit.from_object(commit, view.commit(commit))
    return None


def open_contradictions(view: View, tip: bytes) -> list[Contradiction]:
    """The contradictions still open at ``tip`` (both claims unchanged since the merge)."""
    return _contradictions(view, view.graph.entry(view.txn, tip).open)


def recorded_contradictions(view: View, commit: bytes) -> list[Contradiction]:
    """The contradictions ``commit`` recorded (a merge's), open or resolved since."""
    return _contradictions(view, view.commit(commit).contradictions)


def _contradictions(view: View, records: Iterable[bytes]) -> list[Contradiction]:
    out = []
    for oid in records:
        obj = view.objects.load(view.txn, oid)
        assert isinstance(obj, ContradictionObject)
        nodes = [readable(view, value) for _, value in obj.claims]
        if all(node is not None for node in nodes):
            # An erased claim no longer contradicts anything.
            found = tuple(n for n in nodes if n is not None)
            out.append(Contradiction(obj.subject, obj.predicate, found, oid.hex()))
    return out


def writer(view: View, node_id: str, tip: bytes) -> Commit:
    """The commit that wrote the version of ``node_id`` current at ``tip``.

    Raises:
        CorruptObject: the change index knows no commit that wrote it.
    """
    found = next(walk.changes_of(view, node_id, tip), None)
    if found is None:
        # The snapshot holds the id, so some commit wrote it: the index is behind.
        raise CorruptObject(f"the change index has no commit that wrote {node_id}; run `mnemo fsck --repair`")
    oid = found[0]
    return Commit.from_object(oid, view.commit(oid))


def _supersedes(previous: Fact | None, start: datetime, commit: Commit) -> str | None:
    """The claim a fact starting at ``start`` cut short, if ``previous`` (just before it) is one."""
    if (
        previous is not None
        and previous.effective_to == start
        and _claim(previous.node).valid_to != start
        and previous.commit.record_time < commit.record_time
    ):
        # It cut short a claim that was already recorded: it replaced that value.
        # (One that ended by its own valid_to just where this one begins was not cut short.)
        return previous.id
    return None


def _fact(view: View, tip: bytes, root: bytes, node_id: str, node: Node, now: datetime) -> Fact:
    """The fact of one claim in force, its neighbours on its timeline read by seeks.

    The same answer as :func:`timeline` gives for that claim, for two seeks and
    the writer of at most two versions rather than the whole timeline.
    """
    from mnemosyne.index import claims

    claim = _claim(node)
    start = claim.valid_from
    before, next_start = claims.neighbours(view, root, node_id, claim, now)
    end = (
        claim.valid_to
        if next_start is None or (claim.valid_to and claim.valid_to < next_start)
        else next_start
    )
    commit = writer(view, node_id, tip)
    supersedes = None
    if before is not None:
        previous_id, times = before
        # Just before it, a claim with an earlier start ends at this start (the next
        # one after its own) unless its own valid_to comes first; one that ended by
        # its valid_to just here was not cut short.
        cut_short = times.valid_from < start and (times.valid_to is None or times.valid_to > start)
        if cut_short and writer(view, previous_id, tip).record_time < commit.record_time:
            supersedes = previous_id
    return Fact(
        id=node_id,
        node=node,
        commit=commit,
        effective_from=start,
        effective_to=end,
        supersedes=supersedes,
    )


def facts(
    view: View,
    tip: bytes,
    subject: str,
    predicate: str | None,
    valid_at: datetime,
    now: datetime,
    verified_since: datetime | None = None,
) -> list[Fact]:
    """The claims in force on ``subject`` at ``valid_at`` in ``tip``'s snapshot, as facts.

    Each with when it was last confirmed; with ``verified_since``, those last
    confirmed before it are left out.
    """
    from mnemosyne.index import claims  # the claim index: loaded by the calls that read it

    root = view.graph.entry(view.txn, tip).claims
    names = [predicate] if predicate is not None else list(claims.predicates(view, root, subject))
    found: list[Node] = []
    for name in names:
        found.extend(claims.in_force(view, root, subject, name, valid_at, now))
    # An open contradiction is never settled silently: both claims stand
    # wherever their declared intervals cover the time asked about.
    for record in open_contradictions(view, tip):
        if record.subject != subject or (predicate is not None and record.predicate != predicate):
            continue
        for node in record.claims:
            claim = _claim(node)
            covers = claim.valid_from <= valid_at and (claim.valid_to is None or valid_at < claim.valid_to)
            if covers and not expired(node, now) and all(n.hash != node.hash for n in found):
                found.append(node)
    out = []
    for node in found:
        fact = _fact(view, tip, root, node.id, node, now)
        confirmed = confirmed_at(view, node.id, bytes.fromhex(node.hash), tip)
        if verified_since is not None and (confirmed is None or confirmed < verified_since):
            continue  # not confirmed recently enough to be trusted as current
        out.append(msgspec.structs.replace(fact, confirmed_at=confirmed))
    return out


def timeline(view: View, tip: bytes, subject: str, predicate: str, now: datetime) -> list[Fact]:
    """Every live claim on one attribute, ordered by ``valid_from``, with intervals."""
    from mnemosyne.index import claims

    root = view.graph.entry(view.txn, tip).claims
    entries = claims.attribute(view, root, subject, predicate, now)
    spans = claims.intervals(_claim(node) for _, node in entries)
    out: list[Fact] = []
    previous: Fact | None = None
    for (node_id, node), (start, end) in zip(entries, spans, strict=True):
        commit = writer(view, node_id, tip)
        fact = Fact(
            id=node_id,
            node=node,
            commit=commit,
            effective_from=start,
            effective_to=end,
            supersedes=_supersedes(previous, start, commit),
            confirmed_at=confirmed_at(view, node_id, bytes.fromhex(node.hash), tip),
        )
        out.append(fact)
        previous = fact
    return out


def timeline_history(
    open_view: walk.OpenView, tip: bytes, subject: str, predicate: str, now: datetime, limit: int | None
) -> list[TimelineChange]:
    """The commits of ``tip``'s first-parent line where one attribute's claims changed, oldest first.

    A commit counts when the claims on the attribute (ids and versions, as its
    claim tree holds them) differ from its first parent's, so a merge counts for
    the claims it brought in, and commits that reached the branch by a
    fast-forward or a clone count where they were made. Each comes with its
    timeline (expiry judged at ``now``) and the open contradictions on the
    attribute. With ``limit``, the newest ``limit`` only: the walk stops there.
    The walk reads a batch of commits per short read transaction.
    """
    from mnemosyne.index import claims

    prefix = claims.attribute_prefix(subject, predicate)

    def on_attribute(view: View, root: bytes) -> list[tuple[str, bytes]]:
        return list(view.tree.items(root, prefix=prefix)) if root else []

    changed: list[bytes] = []  # newest first
    oid: bytes | None = tip
    with open_view() as view:
        entry = view.graph.entry(view.txn, tip)
        mine = on_attribute(view, entry.claims)
    while oid is not None and (limit is None or len(changed) < limit):
        with open_view() as view:
            for _ in range(walk.BATCH):
                parent = entry.parents[0] if entry.parents else None
                before = view.graph.entry(view.txn, parent) if parent is not None else None
                root = before.claims if before is not None else b""
                # Most commits leave every claim alone: the same root, nothing to read.
                theirs = mine if root == entry.claims else on_attribute(view, root)
                if theirs != mine:
                    changed.append(oid)
                if parent is None or before is None or (limit is not None and len(changed) >= limit):
                    oid = None
                    break
                oid, entry, mine = parent, before, theirs
    out: list[TimelineChange] = []
    with open_view() as view:
        for commit in reversed(changed):
            found = [
                c
                for c in open_contradictions(view, commit)
                if (c.subject, c.predicate) == (subject, predicate)
            ]
            out.append(
                TimelineChange(
                    commit=Commit.from_object(commit, view.commit(commit)),
                    timeline=timeline(view, commit, subject, predicate, now),
                    contradictions=found,
                )
            )
    return out

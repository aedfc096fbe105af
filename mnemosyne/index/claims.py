r"""The claim index, and valid time read from it.

For every commit, the claims of its snapshot are kept in a second prolly tree
(derived, rebuildable, its root recorded in the commit-graph entry) keyed by
``subject \\0 predicate \\0 valid_from \\0 id``. So the claim in force at a valid
time is one reverse seek: the latest ``valid_from`` not after it, unless that
claim's own ``valid_to`` has passed (then nothing is in force: an explicit end
leaves a gap). Nothing is rewritten: supersession is computed at read time.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from operator import attrgetter, itemgetter
from typing import NamedTuple

import msgspec

from mnemosyne.errors import CorruptObject, Redacted
from mnemosyne.index.view import View, WriteView
from mnemosyne.model.codec import CLAIM_TAG, object_id
from mnemosyne.model.objects import Claim, Node
from mnemosyne.model.times import micros

SEP = "\x00"
_kind_of = attrgetter("kind")
_new_of = itemgetter(2)
_OFFSET = 1 << 62  # keeps times before 1970 sortable as unsigned hex


def time_text(when: datetime) -> str:
    """A fixed-width text that sorts as the time does (microsecond resolution)."""
    return f"{micros(when) + _OFFSET:016x}"


def claim_key(node_id: str, claim: Claim) -> str:
    """The claim index key of one claim node."""
    return f"{claim.subject}{SEP}{claim.predicate}{SEP}{time_text(claim.valid_from)}{SEP}{node_id}"


def split_key(key: str) -> tuple[str, str, str, str]:
    """``(subject, predicate, time text, id)`` of a claim index key."""
    subject, predicate, when, node_id = key.split(SEP, 3)
    return subject, predicate, when, node_id


def attribute_prefix(subject: str, predicate: str) -> str:
    """The key prefix of every claim on one (subject, predicate)."""
    return f"{subject}{SEP}{predicate}{SEP}"


def update(
    view: WriteView,
    root: bytes,
    changes: Sequence[tuple[str, bytes | None, bytes | None]],
    written: dict[bytes, Node],
) -> bytes:
    """The claim tree after a commit's changes; ``root`` is the parent's (b"" for none).

    ``written`` maps hashes of the nodes the commit wrote to the nodes, so only
    replaced versions are read back, and only when the parent has claims.
    """
    # In C (map, filter): an import passes a million nodes through here.
    if not root and "claim" not in map(_kind_of, written.values()):
        if all(map(written.__contains__, filter(None, map(_new_of, changes)))):
            return root  # no claims before, none written: nothing to index
    edits: dict[str, bytes | None] = {}
    for node_id, old, new in changes:
        if old is not None and root:
            old_node = written.get(old) or _readable(view, old)
            if old_node is not None and isinstance(old_node.content, Claim):
                edits[claim_key(node_id, old_node.content)] = None
        if new is not None:
            new_node = written.get(new) or _readable(view, new)
            if new_node is not None and isinstance(new_node.content, Claim):
                edits[claim_key(node_id, new_node.content)] = new
    if not edits:
        return root
    base = root or view.empty_tree()
    result, _ = view.tree.update(base, sorted(edits.items()))
    return b"" if view.chunk(result).keys == () else result


def forget_versions(view: WriteView, erased: dict[str, dict[bytes, str]]) -> int:
    """Drop erased claim versions from the claim tree of every commit whose snapshot holds one.

    ``erased`` maps ids to the claim index keys of their erased claim versions,
    by hash (read before the bytes went). A commit's snapshot holds a version
    when the newest change to its id along first parents set it, and the change
    index has each commit's changes against its first parent: so the commits are
    found from one scan of the commit graph, without reading a claim tree, and
    each of their trees loses the key in one update. The trees being
    history-independent, the result is what a rebuild gives, at a cost in the
    commits that held the version rather than in the whole history. The old
    chunks are gc's to remove.

    Returns:
        How many commit-graph entries now name another claim tree.
    """
    return _retree(view, erased, restore=False)


def restore_versions(view: WriteView, returning: dict[str, dict[bytes, str]]) -> int:
    """Put claim versions whose erased bytes are stored again back in every claim tree that held them.

    The inverse of :func:`forget_versions`, found the same way: once the bytes
    are back, a rebuild indexes the version in every commit whose snapshot names
    it, the commits before the erasure included, so the incremental index must
    too. ``returning`` maps ids to the claim index keys of those versions, by hash.

    Returns:
        How many commit-graph entries now name another claim tree.
    """
    return _retree(view, returning, restore=True)


def restore_rewritten(view: WriteView, written: dict[bytes, Node], storing: Iterable[bytes]) -> int:
    """Before ``storing`` (hashes of ``written``) is stored: index again the claim versions it brings back.

    Writing the exact bytes of an erased version stores them anew (the first
    redaction record stands); the commits that named the hash all along then hold
    a readable claim again. A commit that writes claims reads the tenant's
    erasure count, and the records only when it changed (see
    :meth:`~mnemosyne.store.object_store.ObjectStore.erased_absent`).

    Returns:
        How many commit-graph entries now name another claim tree.
    """
    if "claim" not in map(_kind_of, written.values()):
        return 0  # in C: an import passes a million notes through here
    candidates = [oid for oid in storing if oid in written and isinstance(written[oid].content, Claim)]
    if not candidates:
        return 0
    returning: dict[str, dict[bytes, str]] = {}
    for oid in view.objects.erased_absent(view.txn, candidates):
        node = written[oid]
        assert isinstance(node.content, Claim)
        returning.setdefault(node.id, {})[oid] = claim_key(node.id, node.content)
    return restore_versions(view, returning) if returning else 0


def _retree(view: WriteView, versions: dict[str, dict[bytes, str]], *, restore: bool) -> int:
    """Take ``versions`` (id → hash → claim key) out of, or put them into, the claim trees that hold them."""
    wanted = {node_id: keys for node_id, keys in versions.items() if keys}
    if not wanted:
        return 0
    changed: dict[bytes, list[tuple[str, bytes | None]]] = {}
    first: int | None = None  # the lowest generation of a commit that set one of the versions
    for node_id in wanted:
        for generation, commit, value in view.changes.versions(view.txn, node_id):
            changed.setdefault(commit, []).append((node_id, value))
            if value is not None and value in wanted[node_id] and (first is None or generation < first):
                first = generation
    if first is None:
        return 0
    held: dict[bytes, tuple[tuple[str, bytes], ...]] = {}  # commit → the versions its snapshot holds
    updated: dict[tuple[bytes, tuple[tuple[str, bytes | None], ...]], bytes] = {}  # shared trees, once
    rewritten = 0
    # A parent's generation is below its children's: parents come first, and no commit
    # older than the first that set one of the versions can hold one.
    later = [item for item in view.graph.scan(view.txn) if item[1].generation >= first]
    for oid, entry in sorted(later, key=lambda item: item[1].generation):
        state = held.get(entry.parents[0], ()) if entry.parents else ()
        if oid in changed:
            ids = dict(state)
            for node_id, value in changed[oid]:
                if value is not None and value in wanted[node_id]:
                    ids[node_id] = value
                else:
                    ids.pop(node_id, None)
            state = tuple(sorted(ids.items()))
        if not state:
            continue
        held[oid] = state
        if not entry.claims and not restore:
            continue  # no claims: nothing to drop
        edits = tuple(
            sorted({(wanted[node_id][value], value if restore else None) for node_id, value in state})
        )
        root = updated.get((entry.claims, edits))
        if root is None:
            root, _ = view.tree.update(entry.claims or view.empty_tree(), list(edits))
            if root != entry.claims and view.chunk(root).keys == ():
                root = b""
            updated[entry.claims, edits] = root
        if root != entry.claims:
            view.graph.set_claims(view.txn, oid, entry, root)
            rewritten += 1
    return rewritten


def _readable(view: View, oid: bytes) -> Node | None:
    """The node when it may be a claim; None when it is erased or certainly not a claim.

    An erased claim is in no claim tree. Bytes without the claim tag cannot hold a
    claim, which spares decoding every note (a rare note holding that exact string
    is simply decoded).
    """
    data = view.objects.raw(view.txn, oid)
    if data is not None and CLAIM_TAG not in data:
        return None
    try:
        return view.node(oid)
    except Redacted:
        return None


def same_start(view: View, root: bytes, claim: Claim) -> Iterator[tuple[str, bytes]]:
    """``(id, hash)`` of the claims in ``root`` on the same attribute with the same start."""
    if not root:
        return
    prefix = attribute_prefix(claim.subject, claim.predicate) + time_text(claim.valid_from) + SEP
    for key, value in view.tree.items(root, prefix=prefix):
        yield split_key(key)[3], value


def _live(node: Node, now: datetime) -> bool:
    return node.expires_at is None or node.expires_at > now


def in_force(
    view: View, root: bytes, subject: str, predicate: str, valid_at: datetime, now: datetime
) -> list[Node]:
    """The claim nodes in force on one attribute at ``valid_at``.

    More than one only when claims with the same start disagree (kept on purpose).
    Expired claims (``expires_at`` at or before ``now``) count as absent.
    """
    if not root:
        return []
    prefix = attribute_prefix(subject, predicate)
    bound = prefix + time_text(valid_at) + "\x01"
    start: str | None = None
    found: list[Node] = []
    for key, value in view.tree.items_reverse(root, prefix=prefix, last=bound):
        when = split_key(key)[2]
        if start is not None and when != start:
            break
        node = view.node(value)
        if not _live(node, now):
            continue
        start = when
        found.append(node)
    found.reverse()
    return [n for n in found if _ends_after(n, valid_at)]


def _ends_after(node: Node, valid_at: datetime) -> bool:
    claim = node.content
    assert isinstance(claim, Claim)
    return claim.valid_to is None or claim.valid_to > valid_at


class Times(NamedTuple):
    """A claim's times, read without decoding (nor validating) its whole node."""

    valid_from: datetime
    valid_to: datetime | None
    expires_at: datetime | None


_untyped = msgspec.msgpack.Decoder()


def times_of(view: View, oid: bytes) -> Times | None:
    """The times of the claim version ``oid``; None when it was erased.

    Reads the stored bytes (verified against their hash) as plain msgpack: a
    neighbour on a timeline needs its times, not a validated node.

    Raises:
        CorruptObject: the bytes do not match the hash, or hold no claim.
    """
    data = view.objects.raw(view.txn, oid)
    if data is None:
        return None
    if object_id(data) != oid:
        raise CorruptObject(f"object {oid.hex()} is corrupt: its bytes do not match its hash")
    try:
        raw = _untyped.decode(data)
        claim = raw[2]
        valid_to = claim[5] if len(claim) > 5 else None
        found = Times(claim[4], valid_to, raw[7])
    except (msgspec.DecodeError, IndexError, TypeError) as exc:
        raise CorruptObject(f"object {oid.hex()} should be a claim ({exc})") from None
    if not isinstance(found.valid_from, datetime):
        raise CorruptObject(f"object {oid.hex()} should be a claim")
    return found


def _live_times(times: Times | None, now: datetime) -> bool:
    return times is not None and (times.expires_at is None or times.expires_at > now)


class Head(NamedTuple):
    """What a valid-time filter needs of a node version, read without decoding (nor validating) it."""

    kind: str
    claim: tuple[str, str, Times] | None
    """``(subject, predicate, times)`` of a claim; None for a note."""


def head_of(view: View, oid: bytes) -> Head | None:
    """The kind, and a claim's attribute and times, of the node version ``oid``; None when it was erased.

    Raises:
        CorruptObject: the bytes do not match the hash, or hold no node.
    """
    data = view.objects.raw(view.txn, oid)
    if data is None:
        return None
    if CLAIM_TAG not in data:
        return Head("note", None)  # a claim's bytes hold the tag; kinds are notes and claims
    if object_id(data) != oid:
        raise CorruptObject(f"object {oid.hex()} is corrupt: its bytes do not match its hash")
    try:
        raw = _untyped.decode(data)
        kind, content, expires_at = raw[3], raw[2], raw[7]
        if kind != "claim":
            return Head(kind, None)
        valid_to = content[5] if len(content) > 5 else None
        times = Times(content[4], valid_to, expires_at)
        claim = (content[1], content[2], times)
    except (msgspec.DecodeError, IndexError, TypeError, KeyError) as exc:
        raise CorruptObject(f"object {oid.hex()} should be a node ({exc})") from None
    if not (
        isinstance(times.valid_from, datetime) and isinstance(claim[0], str) and isinstance(claim[1], str)
    ):
        raise CorruptObject(f"object {oid.hex()} should be a claim")
    return Head(kind, claim)


def started(claim: tuple[str, str, Times], valid_at: datetime, now: datetime) -> bool:
    """Whether a claim (a :class:`Head`'s) is live, has started and has not ended by ``valid_at``."""
    times = claim[2]
    if not _live_times(times, now) or times.valid_from > valid_at:
        return False
    return times.valid_to is None or times.valid_to > valid_at


class InForce:
    """Which claims of one snapshot are in force at one valid time, judged a version at a time.

    The answer :func:`in_force` gives, without decoding nodes: a claim is in force
    when it has :func:`started` and its start is the latest live start on its
    attribute by ``valid_at``, which is read once per attribute (one reverse seek,
    the times of the claims it passes read with :func:`times_of`).
    """

    def __init__(self, view: View, root: bytes, valid_at: datetime, now: datetime) -> None:
        self.view, self.root, self.valid_at, self.now = view, root, valid_at, now
        # (subject, predicate) → the time text of its latest live start by valid_at (None: none).
        self.latest: dict[tuple[str, str], str | None] = {}

    def holds(self, claim: tuple[str, str, Times]) -> bool:
        """Whether a claim (a :class:`Head`'s) of the snapshot is in force."""
        if not self.root or not started(claim, self.valid_at, self.now):
            return False
        subject, predicate, times = claim
        attribute = (subject, predicate)
        if attribute not in self.latest:
            self.latest[attribute] = self._latest_start(attribute_prefix(subject, predicate))
        return self.latest[attribute] == time_text(times.valid_from)

    def _latest_start(self, prefix: str) -> str | None:
        bound = prefix + time_text(self.valid_at) + "\x01"  # past every key starting at valid_at
        for key, value in self.view.tree.items_reverse(self.root, prefix=prefix, last=bound):
            if _live_times(times_of(self.view, value), self.now):
                return split_key(key)[2]
        return None


def neighbours(
    view: View, root: bytes, node_id: str, claim: Claim, now: datetime
) -> tuple[tuple[str, Times] | None, datetime | None]:
    """Around one claim on its attribute's timeline: the live claim just before it, and the next start.

    ``(id, times)`` of the live claim whose key comes just before this one's (an
    earlier start, or the same start and a smaller id), and the first
    ``valid_from`` after this claim's among live claims (None for none): two
    seeks, so a claim's effective interval costs nothing like its whole timeline.
    """
    prefix = attribute_prefix(claim.subject, claim.predicate)
    key = claim_key(node_id, claim)
    before: tuple[str, Times] | None = None
    for found, value in view.tree.items_reverse(root, prefix=prefix, last=key):
        if found == key:
            continue
        times = times_of(view, value)
        if times is not None and _live_times(times, now):
            before = (split_key(found)[3], times)
            break
    after: datetime | None = None
    # Keys of the same start continue with SEP ("\x00"): "\x01" is past all of them.
    for _, value in view.tree.items(root, prefix=prefix, start=prefix + time_text(claim.valid_from) + "\x01"):
        times = times_of(view, value)
        if times is not None and _live_times(times, now):
            after = times.valid_from
            break
    return before, after


def predicates(view: View, root: bytes, subject: str) -> Iterator[str]:
    """The predicates with claims on ``subject``, in order (one seek each)."""
    if not root:
        return
    prefix = subject + SEP
    start = prefix
    while True:
        entry = next(iter(view.tree.items(root, prefix=prefix, start=start)), None)
        if entry is None:
            return
        predicate = split_key(entry[0])[1]
        yield predicate
        start = prefix + predicate + "\x01"


def attribute(view: View, root: bytes, subject: str, predicate: str, now: datetime) -> list[tuple[str, Node]]:
    """Every live claim on one attribute as ``(id, node)``, ordered by valid_from."""
    if not root:
        return []
    out = []
    for key, value in view.tree.items(root, prefix=attribute_prefix(subject, predicate)):
        node = view.node(value)
        if _live(node, now):
            out.append((split_key(key)[3], node))
    return out


def intervals(claims: Iterable[Claim]) -> list[tuple[datetime, datetime | None]]:
    """Effective intervals of claims sorted by start.

    Each ends at the earlier of its own ``valid_to`` and the next claim's start
    (claims with the same start share it).
    """
    ordered = list(claims)
    starts = sorted({c.valid_from for c in ordered})
    out = []
    for claim in ordered:
        after = bisect.bisect_right(starts, claim.valid_from)
        end = starts[after] if after < len(starts) else None
        if claim.valid_to is not None and (end is None or claim.valid_to < end):
            end = claim.valid_to
        out.append((claim.valid_from, end))
    return out

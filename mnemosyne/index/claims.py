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

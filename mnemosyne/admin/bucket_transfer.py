"""Moving history to and from a bucket (:mod:`.bucket_remote`): a push writes packs, a fetch reads them.

The steps are those of :mod:`.transfer`, with the bucket's side done here, as
nothing runs there (ADR 0069, ADR 0070):

**Push.** The bucket's branch tips and redaction records are listed; this
store's sender (:class:`~mnemosyne.admin.transfer.LocalSender`) offers the
commits the pushed tip reaches beyond them, and the redaction records the
bucket lacks: those are written first, and every pack holding those versions
is rewritten without them. The commits go in parts of :data:`PART`; each
part's objects (those the commits add to their parents' trees, as a push to
any store plans them) go in packs of about :data:`PACK_BYTES`, several
uploads at a time, and the part is named last. A part the bucket holds is not
sent again, nor any pack (its name says what it holds): a push cut part-way is
resumed by running it again, which writes only what is missing. Then the
branch moves by compare-and-swap (:func:`move_branch`).

**Fetch.** The bucket's branches and redaction records are read; the records
this store lacks are applied first (the versions erased here). The commits the
tips reach that this store has not indexed are found from the parts (which
hold each commit's parents), with the parts they need; of their packs, those
holding objects this store lacks are read, and every object is hashed on
arrival (:class:`~mnemosyne.admin.transfer.LocalDestination`): a damaged or
altered pack is refused. The commits are then indexed and the
remote-tracking refs moved, in one transaction, as any fetch does.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future

from mnemosyne.admin.bucket_remote import BucketTenant, Pack, Part, Precondition, name_of
from mnemosyne.admin.transfer import LocalDestination, LocalSender, Offer, Sent
from mnemosyne.errors import CorruptObject, RefConflict
from mnemosyne.index.view import View

PART = 1024
"""Commits per part: a cut push redoes at most one part's packs."""

PACK_BYTES = 8 << 20
"""Bytes of objects per pack, about (a request each: a bucket charges and waits per request)."""

PACK_OBJECTS = 50_000
"""Objects per pack, at most."""

AHEAD = 8
"""Pack uploads under way at once, at most (their bytes are held here meanwhile)."""


def push(view: View, there: BucketTenant, tip: bytes) -> tuple[Sent, Offer]:
    """Send what the bucket lacks of the history ``tip`` reaches in ``view`` (its refs do not move).

    Returns:
        What was sent (``commits`` counts those named by parts written now) and what
        the sender offered.

    Raises:
        CorruptObject: this store lacks an object its history names.
    """
    sent = Sent()
    branches = there.branches()
    erased = there.erased()
    sender = LocalSender(view)
    offer = sender.offer([tip], [oid for _, oid in branches], frozenset(erased))
    if offer.redactions:
        new = {oid for oid, record in offer.redactions if there.put_redaction(oid, record)}
        sent.redactions = len(new)
        erased |= {oid for oid, _ in offer.redactions}
        there.erase({oid for oid, _ in offer.redactions})
    catalog = there.catalog()
    wanted = {oid for oid, _ in offer.commits}
    # Parts a push of this history wrote before it was cut: their objects are there, and
    # the parts written now leave them out, as a push that ran through would have.
    done = [
        name
        for name, part in catalog.parts.items()
        if part.commits and all(oid in wanted for oid, _ in part.commits)
    ]
    after = sorted(done)
    skip = set(erased)
    for name in done:
        for _, ids in catalog.parts[name].packs:
            skip.update(ids)
    commits = [(oid, parents) for oid, parents in offer.commits if oid not in catalog.commits]
    if not commits:
        return sent, offer
    existing = there.pack_names()
    for start in range(0, len(commits), PART):
        part = commits[start : start + PART]
        ids = [oid for oid in sender.objects([oid for oid, _ in part]) if oid not in skip]
        packs: list[tuple[str, list[bytes]]] = []
        uploads: deque[Future[None]] = deque()
        for pack in _packs(view, ids):
            name = name_of(pack.ids)
            packs.append((name, pack.ids))
            if name not in existing:
                while len(uploads) >= AHEAD:
                    uploads.popleft().result()
                uploads.append(there.bucket.workers.submit(there.put_pack, name, pack))
                sent.objects += len(pack.ids)
                sent.bytes += sum(map(len, pack.data))
        for upload in uploads:
            upload.result()  # every pack is there before the part names them
        named = Part(commits=[(oid, list(ps)) for oid, ps in part], packs=packs, after=after)
        after.append(there.put_part(named))
        after = sorted(after)
        sent.commits += len(part)
    return sent, offer


def _packs(view: View, ids: list[bytes]) -> Iterator[Pack]:
    """The objects of ``ids``, read from ``view``, in packs of about :data:`PACK_BYTES`."""
    held: list[bytes] = []
    data: list[bytes] = []
    size = 0
    for start in range(0, len(ids), 256):
        batch = ids[start : start + 256]
        for oid, raw in zip(batch, view.objects.raw_many(view.txn, batch), strict=True):
            if raw is None:
                raise CorruptObject(f"{oid.hex()} is missing from the sending store (run 'mnemo fsck' there)")
            if held and (size + len(raw) > PACK_BYTES or len(held) >= PACK_OBJECTS):
                yield Pack(ids=held, data=data)
                held, data, size = [], [], 0
            held.append(oid)
            data.append(raw)
            size += len(raw)
    if held:
        yield Pack(ids=held, data=data)


def move_branch(
    there: BucketTenant,
    branch: str,
    tip: bytes,
    force: bool,
    is_ancestor: Callable[[bytes, bytes], bool],
) -> tuple[bytes | None, bool] | None:
    """Move the bucket's ``branch`` to ``tip`` by compare-and-swap: forward only, unless forced.

    ``is_ancestor(old, new)``: whether ``old`` is in ``new``'s history (this
    store's answer: a tip it does not hold is not). The branch is read with its
    ETag, then written only if it still has that ETag (``If-Match``), or is
    still absent (``If-None-Match: *``): of two pushes that read the same tip,
    one writes and the other is refused, whatever the timing. The first branch
    pushed becomes the bucket's HEAD.

    Returns:
        ``(old tip, forced)``, or None when the branch was at ``tip`` already.

    Raises:
        RefConflict: not a fast-forward (and not forced), or another push moved the branch first.
    """
    old, etag = there.ref(branch)
    if old == tip:
        return None
    forced = old is not None and not is_ancestor(old, tip)
    if forced and not force:
        raise RefConflict(
            f"push to {there.name} rejected: its branch {branch!r} has commits this one lacks (not a "
            f"fast-forward); pull, then push again (or push --force to drop them there)"
        )
    try:
        there.put_ref(branch, tip, etag)
    except Precondition:
        raise RefConflict(
            f"push to {there.name} lost a race: another push moved its branch {branch!r} after this one "
            "read it, and the bucket kept that one; fetch or pull, then push again"
        ) from None
    there.set_head(branch)
    return old, forced


def fetch(there: BucketTenant, destination: LocalDestination) -> tuple[Sent, list[bytes], Offer]:
    """Bring in what this tenant lacks of every branch of the bucket (the refs are left to the caller).

    Returns:
        What was received, the commits to index (parents first), and the bucket's
        head and branches (as an :class:`Offer` with no commits).

    Raises:
        CorruptObject: an object whose bytes do not match its id, a pack that
            cannot be read, or a branch naming a commit no part holds.
    """
    sent = Sent()
    survey = destination.survey()
    branches = there.branches()
    offer = Offer(head=there.head(), branches=branches, commits=[], redactions=[])
    erased = set(survey.erased)
    lacking_records = sorted(there.erased() - erased)
    if lacking_records:
        records = there.redactions(lacking_records)
        sent.redactions = destination.redact(records)
        erased.update(oid for oid, _ in records)
    tips = list(dict.fromkeys(tip for _, tip in branches))
    frontier = sorted(destination.lacking_commits(tips))
    if not frontier:
        return sent, [], offer
    catalog = there.catalog()
    needed: dict[bytes, tuple[bytes, ...]] = {}
    while frontier:
        for oid in frontier:
            if oid not in catalog.commits:
                raise CorruptObject(
                    f"remote {there.name!r} names commit {oid.hex()[:12]}, which no part of the bucket holds"
                )
            needed[oid] = catalog.commits[oid]
        parents = {p for oid in frontier for p in catalog.commits[oid] if p not in needed}
        frontier = sorted(destination.lacking_commits(sorted(parents))) if parents else []
    parts: dict[str, None] = {}
    todo = sorted({catalog.part_of[oid] for oid in needed})
    while todo:  # with the parts each leaves objects to
        name = todo.pop()
        if name not in parts:
            parts[name] = None
            todo.extend(after for after in catalog.parts[name].after if after in catalog.parts)
    for name in parts:
        for pack_name, ids in catalog.parts[name].packs:
            wanted = [oid for oid in ids if oid not in erased]
            absent = destination.lacking(wanted) if wanted else set()
            if not absent:
                continue
            pack = there.pack(pack_name)
            objects = [(oid, data) for oid, data in zip(pack.ids, pack.data, strict=True) if oid in absent]
            if len(objects) < len(absent):
                gone = sorted(absent - {oid for oid, _ in objects})
                raise CorruptObject(
                    f"remote {there.name!r}: pack {pack_name} lacks {len(gone)} object(s) its part names "
                    f"(e.g. {gone[0].hex()[:12]}), with no redaction record for them"
                )
            written, size = destination.store(objects)
            sent.objects += written
            sent.bytes += size
    return sent, _parents_first(needed), offer


def _parents_first(commits: dict[bytes, tuple[bytes, ...]]) -> list[bytes]:
    """The ids of ``commits`` ordered so that each comes after those of its parents among them."""
    order: list[bytes] = []
    placed: set[bytes] = set()
    opened: set[bytes] = set()  # a part naming parents that loop (not a history) cannot loop here
    for start in sorted(commits):
        stack = [(start, False)]
        while stack:
            oid, ready = stack.pop()
            if ready:
                if oid not in placed:
                    placed.add(oid)
                    order.append(oid)
                continue
            if oid in opened:
                continue
            opened.add(oid)
            stack.append((oid, True))
            stack.extend((p, False) for p in commits[oid] if p in commits and p not in opened)
    return order

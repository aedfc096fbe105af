"""Integrity checks: every object re-hashed, every reference followed, every index compared.

``fsck`` re-hashes and decodes every object of a tenant, checks that refs,
reflogs, commits and trees point at objects that exist (an erased version, which
has a redaction record, is not missing), compares the derived indexes with a
fresh rebuild, and checks the recall indexes. Damage below the objects (the
store file itself) is reported as a problem too, rather than ending the check,
and so is a clone killed part-way that no rerun has finished yet.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import filterfalse, islice

from mnemosyne.errors import CorruptObject, MnemoError, NotFound
from mnemosyne.index.build import Rebuilt, rebuild, ref_tips, topological
from mnemosyne.index.view import View
from mnemosyne.model import codec
from mnemosyne.model.objects import CommitObject, StoredObject, TreeChunk, decode_object
from mnemosyne.model.reports import FsckReport, Problem
from mnemosyne.store import remote_config

_REINDEX = "run 'mnemo reindex'"
_BATCH = 1024
"""Objects the scan hashes at a time."""
_KEPT_CHUNKS = 8192
"""Decoded chunks kept for the rebuild's diffs at most (~50 MB): every chunk of a
100,000-node tree, with room to spare."""


def fsck(view: View) -> FsckReport:
    """Check one tenant's objects, refs and derived indexes."""
    problems: list[Problem] = []
    count = 0
    commits: list[bytes] = []
    try:
        stored: set[bytes] = set()
        found: list[bytes] = []
        count, claims_possible = _check_objects(view, problems, stored, found)
        if view.txn.remote:  # the walks read every commit: at once, not a round trip each
            view.objects.prefetch(view.txn, found)
        commits = _check_history(view, problems, stored, claims_possible)
        from mnemosyne.recall.check import check as recall_check  # numpy: loaded when fsck runs

        recall = recall_check(view, stored)
        problems.extend(Problem(kind="index", object=None, message=line) for line in recall)
    except CorruptObject as exc:
        # Damage below the objects (the store file): what was checked so far stands.
        problems.append(Problem(kind="corrupt", object=None, message=str(exc)))
    problems.extend(_unfinished_clone(view))
    return FsckReport(ok=not problems, problems=problems, objects=count, commits=len(commits))


def _unfinished_clone(view: View) -> list[Problem]:
    """The store is a clone killed part-way: sound so far, but not all of its source's history."""
    try:
        clone = remote_config.unfinished_clone(view.txn)
    except CorruptObject as exc:
        return [Problem(kind="corrupt", object=None, message=str(exc))]
    if clone is None:
        return []
    message = f"an unfinished clone of {clone.described()}: run the same clone again to finish it"
    return [Problem(kind="missing", object=None, message=message)]


def _check_objects(
    view: View, problems: list[Problem], stored: set[bytes], commits: list[bytes]
) -> tuple[int, bool]:
    """Re-hash and decode every object; return how many, and whether any may hold a claim.

    Adds the id of every stored object to ``stored``, so that following the trees
    asks a set rather than storage (a read per node version), and of every sound
    commit to ``commits``.
    """
    count = 0
    claims_possible = False  # no stored object holds a claim: the rebuild skips the claim index
    scan = view.objects.scan(view.txn)
    while batch := list(islice(scan, _BATCH)):
        oids = [oid for oid, _ in batch]
        datas = [data for _, data in batch]
        count += len(batch)
        stored.update(oids)
        claims_possible = claims_possible or any(codec.CLAIM_TAG in data for data in datas)
        # Hashed a batch at a time: one hasher for all, a third cheaper than one each.
        for oid, data, digest in zip(oids, datas, codec.object_ids(datas), strict=True):
            if digest != oid:
                problems.append(
                    Problem(kind="corrupt", object=oid.hex(), message="bytes do not match the hash")
                )
                continue
            try:
                if isinstance(decode_object(data, oid), CommitObject):
                    commits.append(oid)
            except CorruptObject as exc:
                problems.append(Problem(kind="corrupt", object=oid.hex(), message=str(exc)))
    return count, claims_possible


def _check_history(
    view: View, problems: list[Problem], stored: set[bytes], claims_possible: bool
) -> list[bytes]:
    """Follow refs, reflogs, commits and trees, then compare the indexes; return the commits reached.

    The indexes are compared only when nothing else is wrong. Then the rebuild
    walks the commits as the tree check does, parents first, so the two take
    turns: each commit's tree is checked as the rebuild comes to it, and the
    chunks the check decodes are those the rebuild's diff of that commit reads.
    """
    bad = {p.object for p in problems}
    tips = ref_tips(view)
    commits: list[bytes] = []
    for oid in sorted(tips):
        if oid.hex() not in bad and oid not in stored:
            problems.append(
                Problem(kind="missing", object=oid.hex(), message="a ref or reflog names a missing commit")
            )
    walked = {t for t in tips if t.hex() not in bad}
    try:
        commits = topological(view, walked)
        dangling = _dangling(view, set(commits), stored, bad)
        if dangling:
            commits = topological(view, walked | dangling)
    except CorruptObject:
        raise
    except MnemoError as exc:
        problems.append(Problem(kind="missing", object=None, message=f"history cannot be walked: {exc}"))
    chunks = _Chunks(view)
    walk = _walk(view, commits, problems, bad, stored, chunks)
    if problems:  # the indexes cannot be judged: check every tree all the same
        for _ in walk:
            pass
        return commits
    rebuilt: Rebuilt | MnemoError
    try:
        rebuilt = rebuild(
            view, claims_possible, commits=walk, chunks=chunks.current, replaced=chunks.replaced
        )
    except MnemoError as exc:
        rebuilt = exc  # a damaged tree stops the rebuild: the check of the trees goes on
    for _ in walk:
        pass
    if problems:
        return commits
    if isinstance(rebuilt, CorruptObject):
        raise rebuilt
    _compare_indexes(view, problems, rebuilt)
    return commits


def _dangling(view: View, reached: set[bytes], stored: set[bytes], bad: set[str | None]) -> set[bytes]:
    """Commits indexed and stored that no ref reaches: checked as if a ref named them.

    A push over HTTP indexes its commits in parts, each in a transaction of its
    own; when a later part is refused, the earlier ones stay indexed before any
    branch reaches them. They are sound, as any stored object no ref names is,
    until a rerun moves the branch onto them or ``gc`` drops them with their index
    entries. So their trees and index entries are checked like the rest, rather
    than the entries reported as extra. (An entry whose commit is not stored is
    still reported.)
    """
    return {
        oid
        for oid in view.graph.commits(view.txn)
        if oid not in reached and oid in stored and oid.hex() not in bad
    }


def _walk(
    view: View,
    commits: list[bytes],
    problems: list[Problem],
    bad: set[str | None],
    stored: set[bytes],
    chunks: _Chunks,
) -> Iterator[tuple[bytes, CommitObject]]:
    """Check each commit's tree, then hand the commit on."""
    seen: set[bytes] = set()
    for oid in commits:
        commit = view.commit(oid)
        _check_tree(view, commit, seen, problems, bad, stored, chunks)
        yield oid, commit


def _compare_indexes(view: View, problems: list[Problem], rebuilt: Rebuilt | MnemoError) -> None:
    """Compare the commit graph, change and claim indexes with their rebuild."""
    if isinstance(rebuilt, MnemoError):
        problems.append(Problem(kind="index", object=None, message=f"cannot rebuild indexes: {rebuilt}"))
        return
    if rebuilt.chunks:
        problems.append(
            Problem(
                kind="index",
                object=None,
                message=f"{len(rebuilt.chunks)} claim-index chunks are missing; {_REINDEX}",
            )
        )
    missing, extra, differ = rebuilt.matches(view)
    if missing or extra or differ:
        problems.append(
            Problem(
                kind="index",
                object=None,
                message=f"derived indexes disagree with the objects ({missing} missing, "
                f"{extra} extra, {differ} different entries); {_REINDEX}",
            )
        )


class _Chunks:
    """Tree chunks decoded once for both the tree check and the rebuild's diffs.

    The scan has re-hashed every object of this same read transaction, and the
    rebuild runs only when it found all of them sound: so chunks are read from
    storage and decoded, without hashing them again or going through the
    handle's cache (which a walk over every version of a tree would only churn).
    The check keeps each chunk it decodes, the first time a tree names it, for
    the rebuild's diff of that commit; the diff of a later commit, the one that
    replaces it, reads it once more and lets it go. A chunk read again after that
    (a branch off an older commit) is decoded again.
    """

    def __init__(self, view: View) -> None:
        self._view = view
        self._kept: dict[bytes, TreeChunk] = {}

    def read(self, oid: bytes) -> StoredObject | None:
        """The object ``oid`` decoded from storage (None when it is not stored)."""
        view = self._view
        data = view.objects.raw(view.txn, oid)  # storage, not the cache: it may hold chunks never stored
        return None if data is None else decode_object(data, oid)

    def read_many(self, oids: list[bytes]) -> list[StoredObject | None]:
        """:meth:`read` of each of ``oids``, from one read of storage."""
        view = self._view
        found = view.objects.raw_many(view.txn, oids) if oids else []
        pairs = zip(oids, found, strict=True)
        return [None if data is None else decode_object(data, oid) for oid, data in pairs]

    def keep(self, oid: bytes, chunk: TreeChunk) -> None:
        """Keep a chunk for the diffs (all are dropped at once when too many are kept)."""
        if len(self._kept) >= _KEPT_CHUNKS:
            self._kept.clear()
        self._kept[oid] = chunk

    def current(self, oid: bytes) -> TreeChunk:
        """A chunk of the tree being indexed: kept for the diff of the commit that replaces it."""
        chunk = self._kept.get(oid)
        if chunk is None:
            chunk = self._decoded(oid)
            self.keep(oid, chunk)
        return chunk

    def replaced(self, oid: bytes) -> TreeChunk:
        """A chunk of the parent's tree the commit replaced: no longer kept."""
        chunk = self._kept.pop(oid, None)
        return self._decoded(oid) if chunk is None else chunk

    def _decoded(self, oid: bytes) -> TreeChunk:
        obj = self.read(oid)
        if obj is None:
            raise NotFound(f"object {oid.hex()} is not in the store")
        if not isinstance(obj, TreeChunk):
            raise CorruptObject(f"object {oid.hex()} should be a tree chunk")
        return obj


def _check_tree(
    view: View,
    commit: CommitObject,
    seen: set[bytes],
    problems: list[Problem],
    bad: set[str | None],
    stored: set[bytes],
    chunks: _Chunks,
) -> None:
    level = [commit.tree]
    while level:
        # A level of the tree at a time, its chunks not met yet read together (on
        # PostgreSQL one round trip, not one each).
        wanted = []
        for oid in level:
            if oid not in seen:
                seen.add(oid)
                if not (bad and oid.hex() in bad):
                    wanted.append(oid)
        level = []
        for oid, chunk in zip(wanted, chunks.read_many(wanted), strict=True):
            _check_chunk(view, oid, chunk, seen, problems, bad, stored, chunks, level)


def _check_chunk(
    view: View,
    oid: bytes,
    chunk: StoredObject | None,
    seen: set[bytes],
    problems: list[Problem],
    bad: set[str | None],
    stored: set[bytes],
    chunks: _Chunks,
    below: list[bytes],
) -> None:
    """Check one chunk of a tree; the ids of its child chunks not met yet go to ``below``."""
    if chunk is None:
        problems.append(Problem(kind="missing", object=oid.hex(), message="a tree names a missing chunk"))
        return
    if not isinstance(chunk, TreeChunk):
        problems.append(Problem(kind="corrupt", object=oid.hex(), message="expected a tree chunk"))
        return
    chunks.keep(oid, chunk)
    if chunk.level:
        # Only children not met yet: a new version of an inner chunk names mostly
        # children of the version before it, and a lookup here is one in C.
        below.extend(filterfalse(seen.__contains__, chunk.values))
        return
    if stored.issuperset(chunk.values):  # one call, not a lookup per node: nearly every leaf
        return
    for value in chunk.values:
        if value not in stored and value not in seen:
            seen.add(value)  # reported once, however many chunks name it
            if value.hex() not in bad and view.objects.redaction(view.txn, value) is None:  # erased
                problems.append(
                    Problem(kind="missing", object=value.hex(), message="a tree names a missing node")
                )

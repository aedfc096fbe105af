"""Integrity checks: every object re-hashed, every reference followed, every index compared.

``fsck`` re-hashes and decodes every object of a tenant, checks that refs,
reflogs, commits and trees point at objects that exist (an erased version, which
has a redaction record, is not missing), compares the derived indexes with a
fresh rebuild, and checks the recall indexes. Damage below the objects (the
store file itself) is reported as a problem too, rather than ending the check,
and so is a clone killed part-way that no rerun has finished yet.
"""

from __future__ import annotations

from mnemosyne.errors import CorruptObject, MnemoError
from mnemosyne.index.build import rebuild, ref_tips, topological
from mnemosyne.index.view import View
from mnemosyne.model import codec
from mnemosyne.model.objects import CommitObject, TreeChunk, decode_object
from mnemosyne.model.reports import FsckReport, Problem
from mnemosyne.store import remote_config

_REINDEX = "run 'mnemo reindex'"


def fsck(view: View) -> FsckReport:
    """Check one tenant's objects, refs and derived indexes."""
    problems: list[Problem] = []
    count = 0
    commits: list[bytes] = []
    try:
        stored: set[bytes] = set()
        count, claims_possible = _check_objects(view, problems, stored)
        commits = _check_history(view, problems, stored)
        if not any(p.kind != "index" for p in problems):
            _check_indexes(view, problems, claims_possible)
        from mnemosyne.recall.check import check as recall_check  # numpy: loaded when fsck runs

        problems.extend(Problem(kind="index", object=None, message=line) for line in recall_check(view))
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


def _check_objects(view: View, problems: list[Problem], stored: set[bytes]) -> tuple[int, bool]:
    """Re-hash and decode every object; return how many, and whether any may hold a claim.

    Adds the id of every stored object to ``stored``, so that following the trees
    asks a set rather than storage (a read per node version).
    """
    count = 0
    claims_possible = False  # no stored object holds a claim: the rebuild skips the claim index
    for oid, data in view.objects.scan(view.txn):
        count += 1
        stored.add(oid)
        claims_possible = claims_possible or codec.CLAIM_TAG in data
        if codec.object_id(data) != oid:
            problems.append(Problem(kind="corrupt", object=oid.hex(), message="bytes do not match the hash"))
            continue
        try:
            decode_object(data, oid)
        except CorruptObject as exc:
            problems.append(Problem(kind="corrupt", object=oid.hex(), message=str(exc)))
    return count, claims_possible


def _check_history(view: View, problems: list[Problem], stored: set[bytes]) -> list[bytes]:
    """Follow refs, reflogs, commits and trees; return the commits reached."""
    bad = {p.object for p in problems}
    tips = ref_tips(view)
    commits: list[bytes] = []
    for oid in sorted(tips):
        if oid.hex() not in bad and not view.objects.contains(view.txn, oid):
            problems.append(
                Problem(kind="missing", object=oid.hex(), message="a ref or reflog names a missing commit")
            )
    try:
        commits = topological(view, {t for t in tips if t.hex() not in bad})
    except CorruptObject:
        raise
    except MnemoError as exc:
        problems.append(Problem(kind="missing", object=None, message=f"history cannot be walked: {exc}"))
    seen: set[bytes] = set()
    for oid in commits:
        _check_tree(view, view.commit(oid), seen, problems, bad, stored)
    return commits


def _check_indexes(view: View, problems: list[Problem], claims_possible: bool) -> None:
    """Compare the commit graph, change and claim indexes with a rebuild."""
    try:
        rebuilt = rebuild(view, claims_possible)
    except CorruptObject:
        raise
    except MnemoError as exc:
        problems.append(Problem(kind="index", object=None, message=f"cannot rebuild indexes: {exc}"))
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


def _check_tree(
    view: View,
    commit: CommitObject,
    seen: set[bytes],
    problems: list[Problem],
    bad: set[str | None],
    stored: set[bytes],
) -> None:
    stack = [commit.tree]
    while stack:
        oid = stack.pop()
        if oid in seen:
            continue
        seen.add(oid)
        if oid.hex() in bad:
            continue
        # Ask storage, not the object cache: the cache may hold chunks never stored.
        data = view.objects.raw(view.txn, oid)
        if data is None:
            problems.append(Problem(kind="missing", object=oid.hex(), message="a tree names a missing chunk"))
            continue
        # Decoded here without the cache: one pass over every chunk would evict the
        # chunks the index rebuild reads again and again. (The scan above verified hashes.)
        chunk = decode_object(data, oid)
        if not isinstance(chunk, TreeChunk):
            problems.append(Problem(kind="corrupt", object=oid.hex(), message="expected a tree chunk"))
            continue
        if chunk.level:
            stack.extend(chunk.values)
            continue
        for value in chunk.values:
            if value not in seen:
                seen.add(value)
                if (
                    value not in stored
                    and value.hex() not in bad
                    and view.objects.redaction(view.txn, value) is None  # erased on purpose
                ):
                    problems.append(
                        Problem(kind="missing", object=value.hex(), message="a tree names a missing node")
                    )

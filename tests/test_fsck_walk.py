"""fsck's walk of a long history: the tree check and the index rebuild take turns over the commits.

fsck decodes each tree chunk once, for both the check of the trees and the
rebuild's diffs, hashes it once (in the scan), and checks a leaf's nodes with one
set operation. These tests plant the damage such sharing could hide: a chunk many
commits share, a node deep in a shared leaf, a damaged tree that stops the
rebuild part-way, index entries of commits late in history or whose tree no
commit changed.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mnemosyne import Node, Repo
from mnemosyne.model.objects import TreeChunk, decode_object
from mnemosyne.model.reports import FsckReport
from mnemosyne.store.kv.base import Space, WriteTxn
from mnemosyne.store.prolly import Tree
from mnemosyne.store.tree_diff import TreeDiff

SCOPE = b"\x00\x00\x00\x00"  # the default tenant's key scope
CHANGES = SCOPE + b"c"  # the change index's keys: scope, tag, id, NUL, generation and commit
BASE = 2000  # some eighty leaves under two levels of inner chunks


def node_id(i: int) -> str:
    return f"mem/{i:04d}"


@pytest.fixture
def repo() -> Repo:
    """A base commit and a dozen one-node commits, the last two orphaned but in the reflog."""
    repo = Repo.in_memory()
    repo.commit([Node(id=node_id(i), content=f"value {i}") for i in range(BASE)], message="base")
    for c in range(12):
        repo.commit([Node(id=node_id(c * 31 % BASE), content=f"version {c}")], message=f"c{c}")
    repo.branch("old")
    repo.reset("main", "main~2")
    return repo


def chunks_of(repo: Repo, tree: str) -> dict[str, TreeChunk]:
    """Every chunk of a tree, by hex id, read from storage."""
    found: dict[str, TreeChunk] = {}
    with repo.kv.read() as txn:
        stack = [bytes.fromhex(tree)]
        while stack:
            oid = stack.pop()
            data = txn.get(Space.OBJECTS, SCOPE + oid)
            assert data is not None
            chunk = decode_object(data, oid)
            assert isinstance(chunk, TreeChunk)
            found[oid.hex()] = chunk
            if chunk.level:
                stack.extend(chunk.values)
    return found


def trees(repo: Repo) -> list[str]:
    """The tree of every commit of ``old`` (which holds all the history), oldest first."""
    return [commit.tree for commit in reversed(list(repo.log(at="old")))]


def shared_leaf(repo: Repo) -> tuple[str, TreeChunk]:
    """A leaf every commit's tree names."""
    common = set.intersection(*(set(chunks_of(repo, tree)) for tree in trees(repo)))
    leaves = sorted(oid for oid in common if not chunks_of(repo, trees(repo)[0])[oid].level)
    assert leaves
    return leaves[len(leaves) // 2], chunks_of(repo, trees(repo)[0])[leaves[len(leaves) // 2]]


def transact(repo: Repo, change: Callable[[WriteTxn], object]) -> None:
    repo.kv.transact(change)


def found(report: FsckReport) -> list[tuple[str, str | None]]:
    return [(p.kind, p.object) for p in report.problems]


def test_a_long_history_checks_clean(repo: Repo) -> None:
    report = repo.fsck()
    assert report.ok, report.problems
    assert report.commits == 13


def test_a_leaf_every_commit_shares_corrupted_is_named_once(repo: Repo) -> None:
    leaf, _ = shared_leaf(repo)
    key = SCOPE + bytes.fromhex(leaf)

    def flip(txn: WriteTxn) -> None:
        data = txn.get(Space.OBJECTS, key)
        assert data is not None
        txn.put(Space.OBJECTS, key, data[:-3] + bytes([data[-3] ^ 0x20]) + data[-2:])

    transact(repo, flip)
    assert found(repo.fsck()) == [("corrupt", leaf)]


def test_a_node_deep_in_a_leaf_many_trees_share_is_missing_once(repo: Repo) -> None:
    _, chunk = shared_leaf(repo)
    lost = chunk.values[-1]  # not the first of its leaf: every one of a leaf's nodes is checked
    transact(repo, lambda txn: txn.delete(Space.OBJECTS, SCOPE + lost))
    assert found(repo.fsck()) == [("missing", lost.hex())]


def test_the_trees_are_all_checked_when_a_damaged_tree_stops_the_rebuild(repo: Repo) -> None:
    history = trees(repo)
    # A chunk new in the second commit: the rebuild's diff of that commit cannot read it.
    early = sorted(set(chunks_of(repo, history[1])) - set(chunks_of(repo, history[0])))[0]
    # A node only the last commit wrote: found only by checking trees after the rebuild stopped.
    last = repo.resolve("old")
    written = repo.get(node_id(11 * 31 % BASE), at=last.id)
    assert written is not None and written.content == "version 11"

    def damage(txn: WriteTxn) -> None:
        txn.delete(Space.OBJECTS, SCOPE + bytes.fromhex(early))
        txn.delete(Space.OBJECTS, SCOPE + bytes.fromhex(written.hash))

    transact(repo, damage)
    assert found(repo.fsck()) == [("missing", early), ("missing", written.hash)]


def change_entries(repo: Repo, id: str) -> list[tuple[bytes, bytes]]:
    with repo.kv.read() as txn:
        return list(txn.scan(Space.INDEX, CHANGES + id.encode() + b"\x00"))


def test_a_wrong_change_entry_late_in_history_is_found(repo: Repo) -> None:
    changed = node_id(10 * 31 % BASE)  # written by the base commit and by the eleventh
    entries = change_entries(repo, changed)
    assert len(entries) == 2
    (key_a, value_a), (key_b, value_b) = entries
    # Each entry names the other version: as many entries, each one wrong.
    transact(repo, lambda txn: txn.put_many(Space.INDEX, [(key_a, value_b), (key_b, value_a)]))
    report = repo.fsck()
    assert found(report) == [("index", None)]
    assert "(0 missing, 0 extra, 2 different entries)" in report.problems[0].message
    assert repo.fsck(repair=True).ok
    assert repo.fsck().ok


def test_the_verification_entry_of_a_commit_whose_tree_changed_nothing_is_checked(repo: Repo) -> None:
    verified = node_id(7)
    repo.verify(verified, by="checker")  # same tree as its parent: no chunk is new
    before = change_entries(repo, verified)
    assert repo.fsck().ok
    newest = before[-1][0]
    transact(repo, lambda txn: txn.delete(Space.INDEX, newest))
    report = repo.fsck()
    assert found(report) == [("index", None)]
    assert "(1 missing, 0 extra, 0 different entries)" in report.problems[0].message


def test_a_diff_reads_each_differing_chunk_once_the_old_trees_through_load_old() -> None:
    chunks: dict[bytes, TreeChunk] = {}

    def put(chunk: TreeChunk) -> bytes:
        from mnemosyne.model import codec

        oid = codec.object_id(codec.encode(chunk))
        chunks[oid] = chunk
        return oid

    tree = Tree(chunks.__getitem__, put)
    keys = [node_id(i) for i in range(2000)]
    old = tree.build(keys, [bytes([i % 251]) * 32 for i in range(2000)])
    new, _ = tree.update(old, [(keys[5], b"\x01" * 32), (keys[1500], None), ("mem/zzzz", b"\x02" * 32)])
    read_old: list[bytes] = []
    read_new: list[bytes] = []

    def counting(into: list[bytes]) -> Callable[[bytes], TreeChunk]:
        def load(oid: bytes) -> TreeChunk:
            into.append(oid)
            return chunks[oid]

        return load

    diff = list(TreeDiff(counting(read_new), counting(read_old)).diff(old, new))
    assert diff == list(tree.diff(old, new))
    assert [key for key, _, _ in diff] == [keys[5], keys[1500], "mem/zzzz"]
    assert len(set(read_old)) == len(read_old) and len(set(read_new)) == len(read_new)  # each once
    in_old = {oid for oid in chunks if oid in _reachable(chunks, old)}
    in_new = _reachable(chunks, new)
    assert set(read_old) <= in_old - in_new  # only chunks the new tree replaced
    assert set(read_new) <= in_new - in_old
    assert old in read_old and new in read_new


def _reachable(chunks: dict[bytes, TreeChunk], root: bytes) -> set[bytes]:
    out: set[bytes] = set()
    stack = [root]
    while stack:
        oid = stack.pop()
        out.add(oid)
        if chunks[oid].level:
            stack.extend(chunks[oid].values)
    return out

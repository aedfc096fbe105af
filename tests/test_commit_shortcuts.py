"""The commit path's shortcuts give the answers the long way gave.

A commit reads its tip's claim tree only when it writes claims, builds its
commit-graph entry's skip pointer from the first parent's entry it has just
read (and the entry itself from the parents' entries the indexing read), reads
its branch's ref once, and moves through the store's transaction gate without a
context manager. Each is held here to an answer worked out without it: ancestry
recomputed from the commits' parents, entries built by reading the parents,
the ref read both ways, claim conflicts against claims committed several
commits back, and a map that still grows after a transaction failed.
"""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime

import pytest

from mnemosyne import Claim, ClaimConflict, Node, NotFound, Repo
from mnemosyne.index.graph import CommitGraph, skip_depth
from mnemosyne.store.kv.memory import MemoryKV
from mnemosyne.store.prolly import EMPTY, Tree
from mnemosyne.store.refs import BRANCH_PREFIX, HEAD, RefStore


def _ancestors(parents: dict[str, tuple[str, ...]], oid: str) -> set[str]:
    seen = {oid}
    todo = [oid]
    while todo:
        for parent in parents[todo.pop()]:
            if parent not in seen:
                seen.add(parent)
                todo.append(parent)
    return seen


def test_ancestry_through_merges_is_what_the_parents_say(tmp_path):
    """Skip pointers built from the first parent's entry (a merge's other parents differ) stay right."""
    parents: dict[str, tuple[str, ...]] = {}
    with Repo.init(tmp_path / "s", sync=False) as repo:
        for i in range(40):
            made = repo.commit([Node(id=f"main/{i}", content=i)], message=f"main {i}")
            parents[made.id] = made.parents
            if i % 7 == 3:
                repo.branch(f"side{i}")
                for j in range(3):
                    side = repo.commit(
                        [Node(id=f"side/{i}/{j}", content=j)], message="side", branch=f"side{i}"
                    )
                    parents[side.id] = side.parents
                again = repo.commit([Node(id=f"main/{i}/b", content=i)], message="main again")
                parents[again.id] = again.parents
                merged = repo.merge(f"side{i}", message=f"merge side{i}")
                assert merged.commit is not None and len(merged.commit.parents) == 2
                parents[merged.commit.id] = merged.commit.parents
        commits = list(parents)
        for descendant in commits:
            truth = _ancestors(parents, descendant)
            for ancestor in commits:
                assert repo.is_ancestor(ancestor, descendant) == (ancestor in truth), (ancestor, descendant)


def test_each_skip_pointer_is_the_first_parent_ancestor_at_its_depth():
    """Merges of long-diverged lines: a skip pointer taken from another parent's entry would be wrong."""
    rng = random.Random(7)
    graph = CommitGraph(b"t")
    tips = {"main": b"", "side": b""}
    made: list[bytes] = []

    def add(txn, oid: bytes, parents: tuple[bytes, ...]) -> None:
        graph.add(txn, oid, parents)
        made.append(oid)

    def build(txn) -> None:
        for n in range(300):
            oid = n.to_bytes(4, "big") * 8
            if n % 40 == 39 and tips["side"]:
                add(txn, oid, (tips["main"], tips["side"]))  # a merge of two long lines
                tips["main"] = oid
            elif n % 80 == 0:
                add(txn, oid, (tips["main"],) if tips["main"] else ())
                tips["main"] = tips["side"] = oid  # the side line starts here
            else:
                line = rng.choice(["main", "side"])
                add(txn, oid, (tips[line],))
                tips[line] = oid
        for oid in made:
            entry = graph.entry(txn, oid)
            if not entry.parents:
                continue
            walk, depth = oid, entry.depth
            while depth > skip_depth(entry.depth):
                walk, depth = graph.entry(txn, walk).parents[0], depth - 1
            assert entry.skip == walk, oid.hex()

    MemoryKV().transact(build)


def test_an_entry_built_from_the_parents_entries_given_is_the_one_built_by_reading_them():
    """Random histories with merges: each commit indexed both ways, in two scopes, gives the same bytes."""
    rng = random.Random(11)
    read, given = CommitGraph(b"r"), CommitGraph(b"g")

    def build(txn) -> None:
        made: list[bytes] = []
        for n in range(200):
            oid = n.to_bytes(4, "big") * 8
            parents = tuple(dict.fromkeys(rng.sample(made[-30:], min(len(made), rng.choice([1, 1, 2, 3])))))
            claims = rng.randbytes(32) if n % 7 == 0 else b""
            by_reading = read.add(txn, oid, parents, claims)
            entries = [given.entry(txn, parent) for parent in parents]
            assert given.add(txn, oid, parents, claims, (), entries) == by_reading
            made.append(oid)
        assert {k[1:]: v for k, v in read.entries(txn).items()} == {
            k[1:]: v for k, v in given.entries(txn).items()
        }

    MemoryKV().transact(build)


def test_a_ref_s_state_is_what_exists_and_read_say():
    """Absent, created with no commits, pointing at a commit, and HEAD (a name, not a commit)."""
    refs = RefStore(b"t")
    when = datetime(2026, 1, 1, tzinfo=UTC)

    def check(txn) -> None:
        names = [BRANCH_PREFIX + name for name in ("absent", "unborn", "set")] + [HEAD]
        refs.create_unborn(txn, BRANCH_PREFIX + "unborn", when=when, author="t", reason="create")
        refs.update(txn, BRANCH_PREFIX + "set", None, b"\x01" * 32, when=when, author="t", reason="commit")
        refs.set_head(txn, "set")
        for name in names:
            assert refs.state(txn, name) == (refs.exists(txn, name), refs.read(txn, name)), name
        assert [refs.state(txn, name) for name in names] == [
            (False, None),
            (True, None),
            (True, b"\x01" * 32),
            (True, None),
        ]

    MemoryKV().transact(check)


def test_a_claim_meets_the_tips_claims_after_commits_without_claims(tmp_path):
    """The tip's claim tree is read for a commit that writes claims, however many commits wrote none."""
    start = datetime(2026, 1, 1, tzinfo=UTC)

    def claim(node_id: str, value: str) -> Node:
        return Node(id=node_id, kind="claim", content=Claim("mira", "deadline", value, start))

    with Repo.init(tmp_path / "s", sync=False) as repo:
        repo.commit([claim("c/1", "march")], message="claim")
        for i in range(5):
            repo.commit([Node(id=f"note/{i}", content="no claim here")], message="note")
        with pytest.raises(ClaimConflict):
            repo.commit([claim("c/2", "april")], message="other value, same start")
        replaced = repo.commit([claim("c/2", "april")], message="replace", on_claim_conflict="replace")
        assert replaced.deleted_ids == () and repo.get("c/1") is None and repo.get("c/2") is not None


def test_a_tree_without_a_store_still_refuses_to_write():
    """A read-only Tree (no store) refuses a write with the same error as before."""
    chunks = {b"root": EMPTY}
    tree = Tree(chunks.__getitem__)
    with pytest.raises(TypeError, match="without a store"):
        tree.update(b"root", [("a", b"\x01" * 32)])


def test_a_failed_transaction_gives_its_gate_slot_back(tmp_path):
    """After a commit fails inside its transaction, a map resize (which waits for every slot) still runs."""
    # Closed only on success: closing would wait for a slot a broken gate kept.
    repo = Repo.init(tmp_path / "s", map_size=64 * 1024, sync=False)
    repo.commit([Node(id="a", content="x")], message="first")
    done = threading.Event()

    def grow() -> None:
        # In a thread: a slot kept would hang the abort or the resize, not the test run.
        with pytest.raises(NotFound):
            repo.commit(delete=["never-written"], message="fails inside the transaction")
        # Far more than 64 KiB: the map must double several times, each waiting for the gate.
        repo.commit([Node(id=f"big/{i}", content="y" * 4000) for i in range(200)], message="grow")
        done.set()

    worker = threading.Thread(target=grow, daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert done.is_set(), "the resize waited for a slot the failed transaction kept"
    assert repo.get("big/199") is not None
    repo.close()

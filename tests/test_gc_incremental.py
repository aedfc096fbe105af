"""gc drops the derived-index entries of the commits it removes instead of rebuilding the indexes.

Whatever the history (branches, merges, resets, claims, verifications, erasures),
after a gc the store is fsck-clean (fsck compares every derived index with a
fresh rebuild) and the surviving refs answer log, history, blame, diff and facts
as before. And gc's index work is in the commits removed, not in the history.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from support.clocks import T0, Clock
from support.internals import object_store
from support.tiers import examples

from mnemosyne import Claim, MnemoError, Node, NotFound, Repo
from mnemosyne.store.kv.base import Space

IDS = [f"n{i}" for i in range(4)]
CLAIMS = [f"c{i}" for i in range(3)]
EVERY_ID = IDS + CLAIMS


def _node(id_: str, value: int) -> Node:
    if id_ in CLAIMS:
        predicate = f"p{int(id_[1:]) % 2}"
        start = T0 - timedelta(days=value % 3)
        return Node(id=id_, kind="claim", content=Claim("s", predicate, value, start))
    return Node(id=id_, content=f"{id_} is {value}")


_puts = st.lists(st.tuples(st.sampled_from(EVERY_ID), st.integers(0, 5)), max_size=3)
_deletes = st.lists(st.sampled_from(EVERY_ID), max_size=1)
_ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("commit"), st.integers(0, 3), _puts, st.lists(st.sampled_from(EVERY_ID), max_size=1)
        ),
        st.tuples(st.just("branch"), st.integers(0, 3)),
        st.tuples(st.just("delete"), st.integers(1, 3)),
        st.tuples(st.just("reset"), st.integers(0, 3), st.integers(1, 2)),
        st.tuples(st.just("merge"), st.integers(0, 3), st.integers(0, 3)),
        st.tuples(st.just("verify"), st.integers(0, 3), st.sampled_from(EVERY_ID)),
        st.tuples(st.just("forget"), st.sampled_from(EVERY_ID)),
    ),
    max_size=14,
)


def _play(repo: Repo, ops: list[tuple[Any, ...]]) -> None:
    """Run ``ops`` on ``repo``; an op that does not apply (no such branch, nothing to erase) is skipped."""
    branches = ["main"]
    for number, op in enumerate(ops):
        try:
            _step(repo, op, branches, f"b{number}")
        except MnemoError:
            pass  # refused (a claim conflict, a removal of an absent id, an erased version): nothing written


def _step(repo: Repo, op: tuple[Any, ...], branches: list[str], new_branch: str) -> None:
    def pick(i: int) -> str:
        return branches[i % len(branches)]

    kind = op[0]
    if kind == "commit":
        _, b, puts, deletes = op
        nodes = [_node(i, v) for i, v in dict(puts).items()]
        repo.commit(nodes, deletes, branch=pick(b), on_claim_conflict="keep")
    elif kind == "branch":
        repo.branch(new_branch, at=pick(op[1]))
        branches.append(new_branch)
    elif kind == "delete" and len(branches) > 1:
        repo.delete_branch(branches.pop(1 + (op[1] - 1) % (len(branches) - 1)))
    elif kind == "reset":
        repo.reset(pick(op[1]), f"{pick(op[1])}~{op[2]}")
    elif kind == "merge" and pick(op[1]) != pick(op[2]):
        repo.merge(pick(op[1]), into=pick(op[2]), strategy="theirs", message="merge")
    elif kind == "verify":
        repo.verify(op[2], branch=pick(op[1]))
    elif kind == "forget":
        repo.forget(op[1], "asked to")


def _answers(repo: Repo) -> dict[str, Any]:
    """What the surviving refs answer: log, history, blame, facts, and diff against main."""

    def answer(fn: Callable[[], object]) -> object:
        try:
            return fn()
        except MnemoError as exc:
            return type(exc).__name__

    found: dict[str, Any] = {}
    for branch in repo.branches():
        found[f"log {branch}"] = list(repo.log(at=branch))
        found[f"diff {branch}"] = repo.diff("main", branch)
        found[f"facts {branch}"] = answer(lambda b=branch: repo.facts("s", at=b))
        for id_ in EVERY_ID:
            found[f"history {branch} {id_}"] = answer(lambda b=branch, i=id_: repo.history(i, at=b))
            found[f"blame {branch} {id_}"] = answer(lambda b=branch, i=id_: repo.blame(i, at=b))
    return found


@pytest.mark.slow
@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(ops=_ops, early=st.booleans())
def test_gc_leaves_the_indexes_as_a_rebuild_and_the_answers_unchanged(ops, early):
    clock = Clock()
    with Repo.in_memory(clock=clock) as repo:
        repo.commit([_node(i, 0) for i in EVERY_ID], message="start")
        _play(repo, ops)
        assert repo.fsck().ok  # erased claims committed again included (test_claims_rewritten.py)
        before = _answers(repo)
        if early:
            # A first collection finds the garbage and starts its clock; the second removes it.
            repo.gc(grace=timedelta(minutes=5), expire_reflog=timedelta(0))
            clock.now += timedelta(minutes=10)
        removed = repo.gc(grace=timedelta(0), expire_reflog=timedelta(0)).commits_removed
        event(f"commits removed: {'some' if removed else 'none'}")
        report = repo.fsck()
        assert report.ok, report.problems
        assert _answers(repo) == before


class _CountingTxn:
    """A write transaction that counts the derived-index keys written or deleted."""

    def __init__(self, txn: Any, counts: dict[str, int]) -> None:
        self._txn = txn
        self._counts = counts

    def __getattr__(self, name: str) -> Any:
        return getattr(self._txn, name)

    def put(self, space: Space, key: bytes, value: bytes, overwrite: bool = True) -> bool:
        self._counts[space] += space is Space.INDEX
        return bool(self._txn.put(space, key, value, overwrite))

    def put_many(self, space: Space, items: list[tuple[bytes, bytes]], overwrite: bool = True) -> int:
        self._counts[space] += len(items) if space is Space.INDEX else 0
        return int(self._txn.put_many(space, items, overwrite))

    def delete(self, space: Space, key: bytes) -> bool:
        self._counts[space] += space is Space.INDEX
        return bool(self._txn.delete(space, key))


def test_gc_touches_the_index_entries_of_the_removed_commits_only(monkeypatch):
    with Repo.in_memory(clock=Clock()) as repo:
        for round_ in range(30):  # a history of 600 change-index entries on main
            repo.commit([Node(id=f"m{i}", content=f"{round_}.{i}") for i in range(20)])
        repo.branch("scratch")
        repo.commit([Node(id="m0", content="scratch")], branch="scratch")
        repo.commit([Node(id="s", content="scratch")], branch="scratch")
        repo.delete_branch("scratch")
        before = _answers(repo)
        counts = {space: 0 for space in Space}
        transact = repo.kv.transact
        monkeypatch.setattr(
            repo.kv, "transact", lambda fn: transact(lambda txn: fn(_CountingTxn(txn, counts)))
        )
        report = repo.gc(grace=timedelta(0), expire_reflog=timedelta(0))
        monkeypatch.undo()
        assert report.commits_removed == 2
        # Two graph entries and two change entries go; a rebuild would rewrite all 600.
        assert counts[Space.INDEX] <= 10, counts
        assert repo.fsck().ok
        assert _answers(repo) == before


def test_gc_of_a_store_that_lost_a_reachable_node_refuses_and_writes_nothing():
    """The lost node keeps the full rebuild, which reads it: gc says so rather than hide it."""
    with Repo.in_memory(clock=Clock()) as repo:
        repo.commit([Node(id="a", content="A"), Node(id="b", content="B")])
        repo.branch("tmp")
        repo.commit([Node(id="c", content="C")], branch="tmp")
        repo.delete_branch("tmp")
        lost = bytes.fromhex(repo.blame("a").hash)
        repo.kv.transact(lambda txn: object_store(repo).remove(txn, lost))  # damage below the API
        before = repo.fsck().problems
        with pytest.raises(NotFound, match=lost.hex()):
            repo.gc(grace=timedelta(0), expire_reflog=timedelta(0))
        assert repo.fsck().problems == before
        assert repo.branches() == ["main"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["lmdb", "postgres"])
def test_gc_on_a_stored_backend_keeps_the_indexes_as_a_rebuild(backend, tmp_path, request):
    where = tmp_path / "store" if backend == "lmdb" else request.getfixturevalue("pg_url")
    with Repo.init(where, clock=Clock()) as repo:
        ops: list[tuple[Any, ...]] = [
            ("commit", 0, [("n0", 1), ("c0", 1)], []),
            ("branch", 0),
            ("commit", 1, [("n1", 2), ("c1", 2)], []),
            ("merge", 1, 0),
            ("branch", 0),
            ("commit", 2, [("n2", 3), ("c2", 4)], ["n3"]),
            ("verify", 2, "n0"),
            ("commit", 0, [("n0", 5)], []),
            ("reset", 0, 1),  # orphans the last commit on main
            ("delete", 2),  # and the scratch branch's
            ("forget", "n1"),
        ]
        repo.commit([_node(i, 0) for i in EVERY_ID], message="start")
        _play(repo, ops)
        before = _answers(repo)
        report = repo.gc(grace=timedelta(0), expire_reflog=timedelta(0))
        assert report.commits_removed >= 3
        check = repo.fsck()
        assert check.ok, check.problems
        assert _answers(repo) == before

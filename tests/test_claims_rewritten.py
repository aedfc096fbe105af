"""Erased claim bytes written again: the claim index is what a rebuild makes of it.

``forget`` takes an erased claim version out of the claim tree of every commit
whose snapshot held it (ADR 36). Writing the exact bytes again (same id, same
content: the same hash) stores them anew, so every commit that named the hash
holds a readable claim again, the ones before the erasure included: a rebuild
indexes it there, and so must the write. fsck compares the indexes with a
rebuild; facts and timelines at every commit must not change under ``reindex``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.clocks import T0, Clock
from support.tiers import examples

from mnemosyne import Claim, MnemoError, Node, Redacted, Repo
from mnemosyne.store import object_store
from mnemosyne.store.object_store import ERASED_KEPT

CLAIMS = ["c0", "c1", "c2"]
NOTES = ["n0"]


def _node(id_: str, value: int) -> Node:
    if id_ in CLAIMS:
        # Two claims share a predicate, so timelines hold neighbours; starts differ by value.
        predicate = f"p{int(id_[1:]) % 2}"
        return Node(
            id=id_, kind="claim", content=Claim("s", predicate, value, T0 - timedelta(days=value % 3))
        )
    return Node(id=id_, content=f"{id_} is {value}")


def _answers(repo: Repo) -> dict[str, Any]:
    """Facts and timelines at every commit of every branch (older commits are where trees were rewritten)."""
    found: dict[str, Any] = {}
    for branch in repo.branches():
        for commit in repo.log(at=branch):
            if commit.id in found:
                continue
            found[commit.id] = (
                repo.facts("s", at=commit.id),
                [repo.timeline("s", p, at=commit.id) for p in ("p0", "p1")],
            )
    return found


def _assert_as_rebuilt(repo: Repo) -> None:
    report = repo.fsck()
    assert report.ok, report.problems
    before = _answers(repo)
    repo.reindex()
    assert _answers(repo) == before


def test_a_claim_forgotten_then_committed_again_is_back_in_the_commits_that_named_it():
    with Repo.in_memory(clock=Clock()) as repo:
        first = repo.commit([_node(i, 0) for i in CLAIMS], message="start")
        repo.branch("side")  # keeps c2 at the erased hash: forget drops it from main only
        was = repo.facts("s", at=first.id)
        repo.forget("c2", "asked to")
        assert repo.facts("s", at=first.id) != was
        again = repo.commit([_node("c2", 0)], message="the same bytes again")
        assert again.created
        report = repo.fsck()
        assert report.ok, report.problems
        assert repo.facts("s", at=first.id) == was
        assert repo.facts("s", at="side") == was
        assert repo.get("c2", at="side") == _node("c2", 0)
        _assert_as_rebuilt(repo)


@pytest.mark.parametrize("kept", [ERASED_KEPT, 0], ids=["erased ids kept", "too many to keep"])
def test_a_handle_that_knew_the_erasures_before_another_erased_sees_the_bytes_come_back(
    tmp_path, monkeypatch, kept
):
    monkeypatch.setattr(object_store, "ERASED_KEPT", kept)
    with Repo.init(tmp_path / "s", clock=Clock()) as mine, Repo.open(tmp_path / "s", clock=Clock()) as theirs:
        first = mine.commit([_node(i, 0) for i in CLAIMS], message="start")
        mine.forget("c0", "one")
        mine.commit([_node("c0", 1)], message="the first erasure is known here now")
        theirs.forget("c2", "two")  # another handle: the count moves on
        mine.commit([_node("c2", 0)], message="the same bytes again")
        assert "c2" in {fact.id for fact in mine.facts("s", at=first.id)}
        _assert_as_rebuilt(mine)


def test_forget_rewrite_forget_leaves_the_claim_nowhere_and_the_first_record_standing():
    with Repo.in_memory(clock=Clock()) as repo:
        first = repo.commit([_node(i, 0) for i in CLAIMS], message="start")
        repo.branch("side")
        record = repo.forget("c2", "first").redactions[0]
        repo.commit([_node("c2", 0)], message="again")
        second = repo.forget("c2", "second")
        assert second.redactions == [record]  # records are append-only: the first stands
        report = repo.fsck()
        assert report.ok, report.problems
        assert all(fact.id != "c2" for fact in repo.facts("s", at=first.id))
        assert all(fact.id != "c2" for fact in repo.facts("s", at="side"))
        with pytest.raises(Redacted, match="first"):
            repo.get("c2", at="side")
        _assert_as_rebuilt(repo)


def test_search_finds_the_bytes_written_again_and_loses_them_at_the_next_forget():
    with Repo.in_memory(clock=Clock()) as repo:
        node = Node(id="c", kind="claim", content=Claim("mira", "city", "Zanzibar", T0))
        repo.commit([node])
        repo.forget("c", "one")
        assert repo.search("Zanzibar") == []
        repo.commit([node])
        assert [hit.node for hit in repo.search("Zanzibar")] == [node]
        repo.forget("c", "two")
        assert repo.search("Zanzibar") == []
        report = repo.fsck()
        assert report.ok, report.problems


def test_the_erased_content_under_another_id_brings_nothing_back():
    with Repo.in_memory(clock=Clock()) as repo:
        first = repo.commit([_node(i, 0) for i in CLAIMS], message="start")
        repo.forget("c2", "asked to")
        repo.commit([msgspec.structs.replace(_node("c2", 0), id="c9")], message="another id")
        assert "c2" not in {fact.id for fact in repo.facts("s", at=first.id)}
        assert "c9" in {fact.id for fact in repo.facts("s")}
        _assert_as_rebuilt(repo)


def test_a_merge_resolved_with_the_erased_bytes_brings_them_back_everywhere():
    with Repo.in_memory(clock=Clock()) as repo:
        first = repo.commit([_node(i, 0) for i in CLAIMS], message="start")
        repo.branch("side")
        repo.forget("c2", "asked to")  # main drops c2; side still names the erased hash
        repo.commit([_node("c2", 4)], message="main's c2")
        repo.commit([_node("c2", 5)], branch="side", message="side's c2")
        result = repo.merge("side", into="main", resolutions={"c2": _node("c2", 0)})
        assert result.commit is not None
        assert repo.get("c2") == _node("c2", 0)
        assert "c2" in {fact.id for fact in repo.facts("s", at=first.id)}
        _assert_as_rebuilt(repo)


_ids = st.sampled_from(CLAIMS + NOTES)
_ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("commit"),
            st.integers(0, 2),
            st.lists(st.tuples(_ids, st.integers(0, 3)), max_size=2),
            st.lists(_ids, max_size=1),
        ),
        st.tuples(st.just("branch"), st.integers(0, 2)),
        st.tuples(st.just("switch"), st.integers(0, 2)),
        st.tuples(st.just("merge"), st.integers(0, 2), st.integers(0, 2)),
        st.tuples(st.just("reset"), st.integers(0, 2)),
        st.tuples(st.just("revert"), st.integers(0, 1)),
        st.tuples(st.just("forget"), _ids),
        st.tuples(st.just("forget version"), st.integers(0, 20)),
        # Bytes written before (erased since, most likely), again: under their id or another.
        st.tuples(st.just("again"), st.integers(0, 20), st.integers(0, 2), st.booleans()),
        st.tuples(st.just("again"), st.integers(0, 20), st.integers(0, 2), st.booleans()),
    ),
    max_size=10,
)


class _Play:
    """Runs ops on a repo; an op that does not apply (a conflict, nothing to erase) is skipped."""

    def __init__(self, repo: Repo) -> None:
        self.repo = repo
        self.branches = ["main"]
        self.written: list[Node] = []  # every version committed, in order (the erased ones too)

    def commit(self, nodes: list[Node], branch: str, deletes: tuple[str, ...] = ()) -> None:
        made = self.repo.commit(nodes, list(deletes), branch=branch, on_claim_conflict="keep")
        if made.created:
            self.written.extend(nodes)

    def step(self, number: int, op: tuple[Any, ...]) -> None:
        repo, branches = self.repo, self.branches

        def pick(i: int) -> str:
            return branches[i % len(branches)]

        kind = op[0]
        if kind == "commit":
            _, b, puts, deletes = op
            self.commit([_node(i, v) for i, v in dict(puts).items()], pick(b), deletes)
        elif kind == "branch":
            repo.branch(f"b{number}", at=pick(op[1]))
            branches.append(f"b{number}")
        elif kind == "switch":
            repo.switch(pick(op[1]))
        elif kind == "merge" and pick(op[1]) != pick(op[2]):
            repo.merge(pick(op[1]), into=pick(op[2]), strategy="theirs", message="merge")
        elif kind == "reset":
            repo.reset(pick(op[1]), f"{pick(op[1])}~1")
        elif kind == "revert":
            repo.revert(f"HEAD~{op[1]}")
        elif kind == "forget":
            repo.forget(op[1], "asked to")
        elif kind == "forget version" and self.written:
            node = self.written[op[1] % len(self.written)]
            repo.forget(node.id, "asked to", version=node.hash)
        elif kind == "again" and self.written:
            _, k, b, other = op
            node = self.written[k % len(self.written)]
            if other and node.id in CLAIMS:  # the same content under the next claim id
                node = msgspec.structs.replace(node, id=CLAIMS[(CLAIMS.index(node.id) + 1) % len(CLAIMS)])
            self.commit([node], pick(b))


@pytest.mark.slow
@settings(
    max_examples=examples(80),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(ops=_ops)
def test_claim_index_equals_a_rebuild_whatever_is_erased_and_written_again(ops):
    with Repo.in_memory(clock=Clock()) as repo:
        play = _Play(repo)
        play.commit([_node(i, 0) for i in CLAIMS + NOTES], "main")
        for number, op in enumerate(ops):
            try:
                play.step(number, op)
            except MnemoError:
                pass  # refused: nothing written
            report = repo.fsck()
            assert report.ok, (op, report.problems)
        _assert_as_rebuilt(repo)

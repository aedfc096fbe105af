"""``Repo.freshness``: a branch's tip and the tenant's erasure count from one snapshot, in one read.

Whatever happened (commits on several branches, branches made and deleted,
resets, erasures), it says what ``tip`` and ``erasures`` say; on PostgreSQL it
is one round trip, and the LangGraph saver's check of what it keeps is that one
read (it was two, ``erasures`` then ``tip``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from mnemosyne import Freshness, InvalidInput, Node, NotFound, Redacted, Repo
from mnemosyne.integrations.langgraph import MnemosyneSaver

BRANCHES = ["main", "side", "never"]

steps = st.lists(
    st.one_of(
        st.tuples(st.just("commit"), st.sampled_from(BRANCHES[:2]), st.integers(0, 4)),
        st.tuples(st.just("forget"), st.sampled_from(BRANCHES[:2]), st.integers(0, 4)),
        st.tuples(st.just("branch"), st.sampled_from(BRANCHES[:2]), st.integers(0, 4)),
        st.tuples(st.just("delete"), st.sampled_from(BRANCHES[:2]), st.integers(0, 4)),
        st.tuples(st.just("reset"), st.sampled_from(BRANCHES[:2]), st.integers(0, 4)),
    ),
    max_size=12,
)


def _apply(repo: Repo, step: tuple[str, str, int]) -> None:
    kind, branch, i = step
    try:
        if kind == "commit":
            repo.switch(branch) if branch in repo.branches() else repo.branch(branch, orphan=True)
            repo.commit([Node(id=f"m/{i}", content=f"note {i} on {branch}")])
        elif kind == "forget":
            repo.forget(f"m/{i}", reason="asked to")
        elif kind == "branch":
            repo.branch(branch)
        elif kind == "delete" and branch != repo.head:
            repo.delete_branch(branch)
        elif kind == "reset":
            repo.reset(branch, f"{branch}~1")
    except (NotFound, InvalidInput):
        pass  # a step that does not apply here (no such id, branch or parent) changes nothing


def _check(repo: Repo) -> None:
    for branch in BRANCHES:
        assert repo.freshness(branch) == Freshness(tip=repo.tip(branch), erasures=repo.erasures())


@settings(max_examples=40, deadline=None)
@given(steps)
def test_it_says_what_tip_and_erasures_say_whatever_happened(history: list[tuple[str, str, int]]) -> None:
    with Repo.in_memory() as repo:
        _check(repo)
        for step in history:
            _apply(repo, step)
            _check(repo)


@settings(max_examples=10, deadline=None)
@given(steps)
def test_it_says_what_tip_and_erasures_say_on_lmdb(tmp_path_factory: Any, history: Any) -> None:
    with Repo.init(tmp_path_factory.mktemp("s") / "s.mnemo", sync=False) as repo:
        for step in history:
            _apply(repo, step)
        _check(repo)


def test_a_bad_branch_name_is_refused() -> None:
    with Repo.in_memory() as repo, pytest.raises(InvalidInput):
        repo.freshness("no..dots")


def _put(saver: MnemosyneSaver, config: Any, step: int) -> Any:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6(clock_seq=step))
    checkpoint["channel_values"] = {"count": step}
    checkpoint["channel_versions"] = {"count": step + 1}
    return saver.put(config, checkpoint, {"source": "loop", "step": step, "parents": {}}, {"count": step + 1})


@pytest.mark.slow
def test_on_postgresql_it_is_one_round_trip_and_so_is_the_savers_warm_read(pg_url: str) -> None:
    """And right after a put, reading the latest is two: the check and the (new) checkpoint's writes,
    read at the commit the put made (not at its id as text, which needs a lookup of a branch so named)."""
    with Repo.init(pg_url) as repo:
        kv: Any = repo.kv
        repo.commit([Node(id="a", content="x")])
        repo.freshness("main")  # the handle learns what the read asks first
        apart = Freshness(tip=repo.tip("main"), erasures=repo.erasures())
        before = kv.round_trips
        assert repo.freshness("main") == apart
        assert kv.round_trips - before == 1
        saver = MnemosyneSaver(repo)
        config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        for step in range(3):
            config = _put(saver, config, step)
        latest = {"configurable": {"thread_id": "t"}}
        before = kv.round_trips
        saver.get_tuple(latest)  # the check, then the new checkpoint's pending writes (none)
        assert kv.round_trips - before == 2
        saver.get_tuple(latest)  # what the saver keeps is complete now: only its check is read
        before = kv.round_trips
        found = saver.get_tuple(latest)
        assert found is not None and found.checkpoint["channel_values"]["count"] == 2
        assert kv.round_trips - before == 1


def test_the_saver_still_sees_an_erasure_made_by_another_handle(tmp_path: Path) -> None:
    path = tmp_path / "s.mnemo"
    with Repo.init(path) as repo:
        saver = MnemosyneSaver(repo)
        config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        config = _put(saver, config, 0)
        latest = saver.get_tuple({"configurable": {"thread_id": "t"}})
        assert latest is not None
        with Repo.open(path) as other:
            branch = other.thread_branch("t")
            other.forget(other.ids(at=branch, prefix=branch), reason="the user asked")
        # Not served from what it kept: reading an erased checkpoint says so.
        with pytest.raises(Redacted):
            saver.get_tuple({"configurable": {"thread_id": "t"}})

"""A graph's super-step through MnemosyneSaver: the writes, then the next checkpoint, reading only the new.

In a running graph LangGraph calls ``put_writes`` with each finished task's writes
and then ``put`` with the next checkpoint, whose parent is the one the writes
belong to. After its own put the saver knows that checkpoint but not yet its
pending writes: the first ``put_writes`` reads them once, at the tip it knows, and
keeps them, so the writes' commit leaves the saver knowing the thread and the next
put reads nothing (no tip, no pointer, no parent checkpoint). What another handle
wrote meanwhile is never lost: a commit on a tip that moved is refused and read
again.
"""

from __future__ import annotations

import itertools
import operator
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.graph import END, START, StateGraph

from mnemosyne import Repo
from mnemosyne.integrations.langgraph import MnemosyneSaver

STEPS = 6


class _State(TypedDict, total=False):
    notes: Annotated[list[str], operator.add]
    step: int


def _app(saver: MnemosyneSaver) -> Any:
    def node(state: _State) -> dict[str, Any]:
        step = state.get("step", 0) + 1
        return {"notes": [f"note {step}"], "step": step}

    def route(state: _State) -> str:
        return END if state["step"] >= STEPS else "node"

    graph = StateGraph(_State)
    graph.add_node("node", node)
    graph.add_edge(START, "node")
    graph.add_conditional_edges("node", route)
    return graph.compile(checkpointer=saver)


READS = ("freshness", "tip", "get", "histories", "resolve")


def _counted(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Calls of the Repo's reads, counted from now on."""
    calls: Counter[str] = Counter()
    for name in (*READS, "nodes", "commit"):
        method = getattr(Repo, name)

        def counting(self: Repo, *args: Any, _method: Any = method, _name: str = name, **kwargs: Any) -> Any:
            calls[_name] += 1
            return _method(self, *args, **kwargs)

        monkeypatch.setattr(Repo, name, counting)
    return calls


def test_a_running_graph_reads_only_each_checkpoints_writes_once(monkeypatch: pytest.MonkeyPatch) -> None:
    with Repo.in_memory() as repo:
        app = _app(MnemosyneSaver(repo))
        config: Any = {"configurable": {"thread_id": "t"}}
        app.invoke({"notes": [], "step": 0}, config, durability="sync")
        calls = _counted(monkeypatch)
        # The same thread again: LangGraph reads its latest checkpoint once, then steps.
        final = app.invoke({"notes": [], "step": 0}, config, durability="sync")
        commits = calls["commit"]
        assert commits >= 2 * STEPS  # every step: the task's writes, then the checkpoint
        # One read of the latest (get_tuple's check), then nothing but each checkpoint's writes.
        # LangGraph saves a task's writes from a worker thread: on a loaded machine they can
        # arrive after the next checkpoint's put, and are then stored where the saver kept the
        # checkpoint that put replaced (see the late-writes tests below). A saver that kept
        # nothing of what it knew would read 33 times here.
        assert sum(calls[name] for name in READS) <= 1, calls
        assert calls["nodes"] <= commits // 2 + 2, calls
    assert final["step"] == STEPS
    assert final["notes"] == [f"note {i}" for i in range(1, STEPS + 1)] * 2


def test_the_history_a_graph_leaves_is_read_back_whole(tmp_path: Path) -> None:
    path = tmp_path / "s.mnemo"
    with Repo.init(path) as repo:
        app = _app(MnemosyneSaver(repo))
        config: Any = {"configurable": {"thread_id": "t"}}
        app.invoke({"notes": [], "step": 0}, config, durability="sync")
        kept = [(c.checkpoint["id"], c.pending_writes) for c in MnemosyneSaver(repo).list(config)]
    with Repo.open(path) as repo:
        saver = MnemosyneSaver(repo)
        read = [(c.checkpoint["id"], c.pending_writes) for c in saver.list(config)]
        latest = saver.get_tuple(config)
    assert read == kept and len(read) == STEPS + 2  # the input, the start, one per step
    assert latest is not None and latest.checkpoint["channel_values"]["step"] == STEPS
    written = [writes for _, writes in read[1:]]
    assert all(writes for writes in written), "every checkpoint but the last has its task's writes"


@pytest.mark.slow
def test_on_postgresql_a_super_step_is_the_two_commits_round_trips_and_one_read(pg_url: str) -> None:
    with Repo.init(pg_url) as repo:
        kv: Any = repo.kv
        app = _app(MnemosyneSaver(repo))
        config: Any = {"configurable": {"thread_id": "t"}}
        app.invoke({"notes": [], "step": 0}, config, durability="sync")
        before = kv.round_trips
        app.invoke({"notes": [], "step": 0}, config, durability="sync")
        trips = kv.round_trips - before
    # Per step: two commits of two round trips each and one read of the new checkpoint's
    # writes (13 to 14 when each put read the tip, the pointer and the parent checkpoint
    # again); beside them the run's first read of the latest checkpoint.
    steps = STEPS + 1  # the new input is a step of its own
    assert trips <= 6 + steps * 6, trips


def _late_writes(saver: MnemosyneSaver, count: Any) -> tuple[list[int], list[int], dict[int, list[Any]]]:
    """Checkpoints put in a chain, each put followed by writes on time, one or two checkpoints behind.

    Returns what ``count()`` grew by for each on-time and each late ``put_writes``,
    and the writes given to each step's checkpoint.
    """
    thread: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    made = [thread]
    given: dict[int, list[Any]] = {}
    on_time: list[int] = []
    late: list[int] = []
    for n in range(1, 14):
        made.append(saver.put(made[-1], _checkpoint(n), {"source": "loop", "step": n}, {"count": n + 1}))
        given[n] = []
        behind = n % 3 if n > 2 else 0
        task = "abc"[behind]
        before = count()
        saver.put_writes(made[-1 - behind], [("notes", f"{task} {n}")], task_id=task)
        (late if behind else on_time).append(count() - before)
        given[n - behind].append((task, f"{task} {n}"))
    return on_time, late, {n: sorted(writes) for n, writes in given.items()}


def test_writes_that_arrive_after_the_next_puts_are_stored_without_looking_for_their_checkpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with Repo.in_memory() as repo:
        saver = MnemosyneSaver(repo)
        calls = _counted(monkeypatch)
        on_time, late, given = _late_writes(saver, lambda: sum(calls[name] for name in READS))
        assert on_time and late and set(on_time) == set(late) == {0}, (on_time, late, calls)
        # Nothing lost: each checkpoint has the writes it was given, late or not.
        thread: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        found = {
            c.metadata["step"]: sorted((task, value) for task, _, value in c.pending_writes or [])
            for c in MnemosyneSaver(repo).list(thread)
        }
        messages = [commit.message for commit in repo.log(at=repo.thread_branch("t"))]
    assert found == given and sum(map(len, given.values())) == 13, found
    # A late commit says, as an on-time one does, which step's checkpoint it follows.
    for step, writes in given.items():
        for task, _ in writes:
            head = f"writes of task {task} after step {step}: notes\n"
            assert any(m.startswith(head) for m in messages), (head, messages)


@pytest.mark.slow
def test_on_postgresql_late_writes_cost_the_round_trips_of_writes_on_time(pg_url: str) -> None:
    with Repo.init(pg_url) as repo:
        kv: Any = repo.kv
        on_time, late, _ = _late_writes(MnemosyneSaver(repo), lambda: kv.round_trips)
    # One read of the checkpoint's writes, then the commit: late or not (a saver that looked
    # for the checkpoint again read the tip and the namespace first: seven in all). The
    # thread's first writes are the handle's first of their kind, learning what they read.
    assert max(late) <= max(on_time[1:]) <= 3, (on_time, late)


def _checkpoint(n: int) -> Any:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6(clock_seq=n))
    checkpoint["channel_values"] = {"count": n}
    checkpoint["channel_versions"] = {"count": n + 1}
    return checkpoint


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 1)),
        # Writes to the latest, or to one up to three checkpoints behind it.
        st.tuples(
            st.just("writes"),
            st.integers(0, 1),
            st.sampled_from(["a", "b"]),
            st.integers(1, 3),
            st.integers(0, 3),
        ),
        st.tuples(st.just("read"), st.integers(0, 1)),
    ),
    min_size=1,
    max_size=14,
)


@settings(max_examples=25, deadline=None)
@given(ops=OPS)
def test_two_handles_interleaving_lose_no_write(
    tmp_path_factory: pytest.TempPathFactory, ops: list[Any]
) -> None:
    """Two savers on one store (each its own handle) put, write and read in any order: nothing is lost."""
    path = tmp_path_factory.mktemp("two") / "s.mnemo"
    with Repo.init(path) as first, Repo.open(path) as second:
        savers = [MnemosyneSaver(first), MnemosyneSaver(second)]
        thread: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        latest: str | None = None
        made_ids: list[str] = []
        written: dict[str, dict[str, int]] = {}  # checkpoint -> task -> writes stored
        made = 0
        for op in ops:
            saver = savers[op[1]]
            if op[0] == "put":
                made += 1
                parent = (
                    {"configurable": {**thread["configurable"], "checkpoint_id": latest}}
                    if latest
                    else thread
                )
                latest = saver.put(
                    parent, _checkpoint(made), {"source": "loop", "step": made}, {"count": made + 1}
                )["configurable"]["checkpoint_id"]
                written[latest] = {}
                made_ids.append(latest)
            elif op[0] == "writes" and latest is not None:
                # Behind: as LangGraph's worker threads may save a task's writes late.
                _, _, task, n, behind = op
                target = made_ids[-1 - min(behind, len(made_ids) - 1)]
                at = {"configurable": {**thread["configurable"], "checkpoint_id": target}}
                saver.put_writes(at, [("notes", f"{task}{i}") for i in range(n)], task_id=task)
                written[target][task] = max(written[target].get(task, 0), n)
            found = saver.get_tuple({"configurable": {"thread_id": "t"}})
            if latest is None:
                assert found is None
                continue
            assert found is not None and found.checkpoint["id"] == latest
            for checkpoint_id, reader in itertools.product(made_ids[-4:], savers):
                config: Any = {"configurable": {**thread["configurable"], "checkpoint_id": checkpoint_id}}
                found = reader.get_tuple(config)
                assert found is not None
                expected = {
                    (task, "notes", f"{task}{i}")
                    for task, n in written[checkpoint_id].items()
                    for i in range(n)
                }
                assert set(found.pending_writes or []) == expected

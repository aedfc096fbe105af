"""The async methods of ``MnemosyneSaver`` and ``MnemosyneStore`` never block the event loop:
the store's disk work runs in worker threads, and the loop keeps serving meanwhile."""

from __future__ import annotations

import asyncio
import operator
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from mnemosyne import RefConflict, Repo
from mnemosyne.integrations.langgraph import MnemosyneSaver, MnemosyneStore

THREADS = 32
READS_AND_WRITES = ["commit", "get", "nodes", "tip", "erasures", "freshness", "search", "history"]


class Calls:
    """Which thread ran each call of some public methods of a repo, and when each commit ran."""

    def __init__(self, repo: Repo) -> None:
        self.threads: list[tuple[str, int]] = []
        self.commits: list[tuple[float, float]] = []
        for name in READS_AND_WRITES:
            real = getattr(repo, name, None)
            if real is None:
                continue  # a method an older version has not (erasures)

            def recorded(
                *args: Any, _real: Callable[..., Any] = real, _name: str = name, **kwargs: Any
            ) -> Any:
                self.threads.append((_name, threading.get_ident()))
                start = time.perf_counter()
                try:
                    return _real(*args, **kwargs)
                finally:
                    if _name == "commit":
                        self.commits.append((start, time.perf_counter()))

            setattr(repo, name, recorded)

    def on(self, thread: int) -> list[str]:
        return [name for name, ident in self.threads if ident == thread]


class Heartbeat:
    """A task that wakes every half millisecond and notes when it did."""

    def __init__(self) -> None:
        self.ticks: list[float] = []
        self._stop = False

    async def run(self) -> None:
        self.ticks.append(time.perf_counter())
        while not self._stop:
            await asyncio.sleep(0.0005)
            self.ticks.append(time.perf_counter())

    async def around(self, work: Awaitable[Any]) -> Any:
        task = asyncio.create_task(self.run())
        await asyncio.sleep(0.005)
        try:
            return await work
        finally:
            self._stop = True
            await task

    def pace(self, spans: list[tuple[float, float]]) -> float:
        """Beats per second from the first of ``spans`` starting to the last ending."""
        start, end = min(s for s, _ in spans), max(e for _, e in spans)
        return sum(1 for tick in self.ticks if start < tick < end) / (end - start)

    def during(self, spans: list[tuple[float, float]]) -> int:
        """How many of ``spans`` saw the heartbeat beat while they ran."""
        return sum(1 for start, end in spans if any(start < tick < end for tick in self.ticks))


# -- a graph, 32 threads at once --------------------------------------------------------------


class Notes(TypedDict):
    notes: Annotated[list[str], operator.add]
    count: int


async def _note(state: Notes) -> dict[str, Any]:
    await asyncio.sleep(0)
    return {"notes": [f"note {state['count']}"], "count": state["count"] + 1}


def _graph(checkpointer: Any) -> Any:
    builder = StateGraph(Notes)
    for name in ("draft", "review", "publish"):
        builder.add_node(name, _note)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "review")
    builder.add_edge("review", "publish")
    builder.add_edge("publish", END)
    return builder.compile(checkpointer=checkpointer)


async def _run_threads(checkpointer: Any) -> list[Any]:
    graph = _graph(checkpointer)
    configs = [{"configurable": {"thread_id": f"chat-{i}"}} for i in range(THREADS)]
    finals = await asyncio.gather(*(graph.ainvoke({"notes": [], "count": 0}, c) for c in configs))
    histories = [[s.values async for s in graph.aget_state_history(c)] for c in configs]
    return [finals, histories]


@pytest.mark.slow
def test_32_threads_of_a_graph_at_once_checkpoint_off_the_event_loop(disk_tmp_path: Path) -> None:
    with Repo.init(disk_tmp_path / "s.mnemo") as repo:  # durable: every commit waits for the disk
        calls = Calls(repo)
        heartbeat = Heartbeat()

        async def main() -> tuple[int, list[Any]]:
            return threading.get_ident(), await heartbeat.around(_run_threads(MnemosyneSaver(repo)))

        loop_thread, ours = asyncio.run(main())
        assert len(calls.commits) >= THREADS * 4 and calls.on(loop_thread) == []
        # The loop went on beating while the commits waited for the disk.
        assert heartbeat.during(calls.commits) >= len(calls.commits) // 4, heartbeat.during(calls.commits)
    assert ours == asyncio.run(
        _run_threads(InMemorySaver())
    )  # and every thread is as LangGraph's saver keeps it


# -- the saver alone: the loop's heartbeat against work done inline ------------------------------


async def _checkpointing(saver: MnemosyneSaver, inline: bool) -> None:
    """Each of 32 threads puts, writes and reads its checkpoints, then lists them (inline: the sync calls)."""

    async def call(name: str, *args: Any) -> Any:
        if inline:
            return getattr(saver, name)(*args)  # what the async methods did before: the work on the loop
        if name == "list":
            return [item async for item in saver.alist(*args)]
        return await getattr(saver, f"a{name}")(*args)

    async def one(i: int) -> None:
        config: Any = {"configurable": {"thread_id": f"t{i}", "checkpoint_ns": ""}}
        for step in range(3):
            checkpoint = empty_checkpoint()
            checkpoint["id"] = str(uuid6(clock_seq=step))
            checkpoint["channel_values"] = {"notes": [f"n{k}" for k in range(step)], "count": step}
            checkpoint["channel_versions"] = {"notes": step + 1, "count": step + 1}
            metadata = {"source": "loop", "step": step, "parents": {}}
            config = await call("put", config, checkpoint, metadata, {"notes": step + 1, "count": step + 1})
            await call("put_writes", config, [("notes", f"w{step}")], f"task-{step}")
            latest = await call("get_tuple", {"configurable": {"thread_id": f"t{i}"}})
            assert latest is not None and latest.checkpoint["channel_values"]["count"] == step
        assert len(list(await call("list", {"configurable": {"thread_id": f"t{i}"}}))) == 3

    await asyncio.gather(*(one(i) for i in range(THREADS)))


@pytest.mark.slow
def test_the_event_loop_keeps_its_pace_while_32_threads_checkpoint(disk_tmp_path: Path) -> None:
    paces: dict[bool, float] = {}
    for inline in (False, True):
        with Repo.init(disk_tmp_path / f"inline-{inline}.mnemo") as repo:
            calls = Calls(repo)
            heartbeat = Heartbeat()

            async def main(saver: MnemosyneSaver, inline: bool = inline, beat: Heartbeat = heartbeat) -> int:
                await beat.around(_checkpointing(saver, inline))
                return threading.get_ident()

            loop_thread = asyncio.run(main(MnemosyneSaver(repo)))
            paces[inline] = heartbeat.pace(calls.commits)
            if not inline:
                assert calls.on(loop_thread) == []
                assert heartbeat.during(calls.commits) >= len(calls.commits) // 4
            else:  # the check sees it: done inline, no commit lets the loop beat
                assert heartbeat.during(calls.commits) == 0
    # Off the loop it beats on while the checkpoints are written: a beat every 10 ms at the
    # least on average (every half millisecond on a quiet machine), so one scheduler hiccup on
    # a busy machine does not decide; inline it cannot beat at all until the work is done.
    assert paces[False] >= 100 and paces[True] == 0, paces


# -- the long-term store ------------------------------------------------------------------------


@pytest.mark.slow
def test_the_store_reads_and_writes_off_the_event_loop(disk_tmp_path: Path) -> None:
    with Repo.init(disk_tmp_path / "s.mnemo") as repo:
        calls = Calls(repo)
        store = MnemosyneStore(repo)
        heartbeat = Heartbeat()

        async def one(i: int) -> Any:
            namespace = ("users", f"u{i}")
            await store.aput(namespace, "prefs", {"language": "fr", "n": i})
            await store.aput(namespace, "diary", {"text": f"entry {i}"})
            found = await store.aget(namespace, "prefs")
            listed = await store.asearch(namespace)
            await store.adelete(namespace, "diary")
            return found.value if found else None, sorted(item.key for item in listed)

        async def main() -> tuple[int, list[Any]]:
            work = asyncio.gather(*(one(i) for i in range(THREADS)))
            return threading.get_ident(), await heartbeat.around(work)

        loop_thread, results = asyncio.run(main())
        assert results == [({"language": "fr", "n": i}, ["diary", "prefs"]) for i in range(THREADS)]
        assert len(calls.commits) >= THREADS * 3 and calls.on(loop_thread) == []
        assert heartbeat.during(calls.commits) >= len(calls.commits) // 4


def test_the_stores_own_commits_take_turns_so_none_spends_a_retry() -> None:
    with Repo.in_memory() as repo:
        store = MnemosyneStore(repo)
        conflicts: list[str] = []
        real = repo.commit

        def slow(*args: Any, **kwargs: Any) -> Any:
            time.sleep(0.002)  # long enough for every other writer to read the same tip meanwhile
            try:
                return real(*args, **kwargs)
            except RefConflict as conflict:
                conflicts.append(str(conflict))
                raise

        repo.commit = slow  # type: ignore[method-assign]

        async def main() -> None:
            await asyncio.gather(*(store.aput(("users", f"u{i}"), "prefs", {"n": i}) for i in range(16)))

        asyncio.run(main())
        assert conflicts == []
        assert sorted(item.value["n"] for item in store.search(("users",), limit=20)) == list(range(16))

"""A compiled LangGraph graph's super-step with each checkpointer: what a user waits for per step.

The put rows in ``checkpointer.py`` time the saver's ``put`` alone. A running graph
does more per super-step: LangGraph calls ``put_writes`` with the finished task's
writes, then ``put`` with the new checkpoint, and does its own work around them.
Here a real ``StateGraph`` of 20 channels runs a node that changes three of them
(the message list, the step counter and one text field of 240 characters), step
after step, on a new thread each run: with ``MnemosyneSaver`` on LMDB (sync on),
with ``SqliteSaver`` (WAL, ``synchronous=FULL``) and with no checkpointer (LangGraph
alone, the floor). Both of LangGraph's durable modes are timed: ``sync`` (each
step's checkpoint is on disk before the next step starts) and ``async``, its
default (the checkpoint is written while the next step runs: with a node that does
no work of its own, as here, the next step soon waits for it). Runs take turns;
the figures are medians of the time per step. On PostgreSQL the same graph runs
with ours on a store of the server and LangGraph's ``PostgresSaver`` on the same
server, in each placement of ``placement``.
"""

from __future__ import annotations

import itertools
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from typing import Any, TypedDict

from checkpointer import postgres_savers
from harness import row
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from placement import placed, placements

from mnemosyne import Repo
from mnemosyne.integrations.langgraph import MnemosyneSaver

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support.pg_server import PgServer

_THREADS = itertools.count()
"""Thread ids: a new thread each run, as a new conversation."""

FIELDS = 18
"""Text channels beside ``messages`` and ``step``: 20 channels in all."""


class _State(TypedDict, total=False):
    messages: list[dict[str, str]]
    step: int
    field_00: str
    field_01: str
    field_02: str
    field_03: str
    field_04: str
    field_05: str
    field_06: str
    field_07: str
    field_08: str
    field_09: str
    field_10: str
    field_11: str
    field_12: str
    field_13: str
    field_14: str
    field_15: str
    field_16: str
    field_17: str


def _graph(steps: int) -> StateGraph[_State]:
    def node(state: _State) -> dict[str, Any]:
        step = state.get("step", 0) + 1
        last = [
            *state.get("messages", []),
            {"role": "assistant", "content": f"message {step}: " + "words " * 20},
        ]
        return {
            "messages": last[-13:],
            "step": step,
            f"field_{step % FIELDS:02d}": (f"field at step {step} " * 12)[:240],
        }

    def route(state: _State) -> str:
        return END if state["step"] >= steps else "node"

    graph = StateGraph(_State)
    graph.add_node("node", node)
    graph.add_edge(START, "node")
    graph.add_conditional_edges("node", route)
    return graph


def _per_step(compiled: dict[str, Any], runs: int, steps: int) -> dict[tuple[str, str], float]:
    """Median µs per step of each compiled graph in each durable mode, runs taking turns."""
    begin: dict[str, Any] = {"messages": [], "step": 0} | {f"field_{i:02d}": "-" * 240 for i in range(FIELDS)}
    samples: dict[tuple[str, str], list[float]] = {
        (name, mode): [] for name in compiled for mode in ("sync", "async")
    }
    for run in range(runs + 1):  # the first run warms up
        for mode in ("sync", "async"):
            order = list(compiled.items())
            for name, app in order if run % 2 == 0 else reversed(order):
                options: dict[str, Any] = {} if name == "none" else {"durability": mode}
                thread = f"run-{next(_THREADS)}"
                t0 = time.perf_counter()
                final = app.invoke(begin, {"configurable": {"thread_id": thread}}, **options)
                took = (time.perf_counter() - t0) / steps
                assert final["step"] == steps, final["step"]
                if run:
                    samples[(name, mode)].append(took)
    return {key: statistics.median(values) * 1e6 for key, values in samples.items()}


def _rows(median: dict[tuple[str, str], float], theirs: str, label: str, where: str = "") -> None:
    for mode, said in (("async", "durability async (LangGraph's default)"), ("sync", "durability sync")):
        ours, other = median[("ours", mode)], median[("theirs", mode)]
        row(
            f"langgraph{where}: one super-step of a compiled graph, {said}, MnemosyneSaver / {theirs}, medians",
            label,
            f"{ours:.0f} / {other:.0f} µs = {ours / other:.2f}",
        )
    alone = (median[("none", "sync")] + median[("none", "async")]) / 2
    row(
        f"langgraph{where}: one super-step of the same graph with no checkpointer, median (µs)",
        label,
        f"{alone:.0f}",
    )


def bench_graph_step(root: Path, runs: int = 12, steps: int = 20) -> None:
    """Rows: time per super-step with MnemosyneSaver on LMDB and with SqliteSaver, in both durable modes."""
    graph = _graph(steps)
    repo = Repo.init(root / "graph.mnemo")
    connection = sqlite3.connect(root / "graph.sqlite", check_same_thread=False)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    compiled = {
        "ours": graph.compile(checkpointer=MnemosyneSaver(repo)),
        "theirs": graph.compile(checkpointer=SqliteSaver(connection)),
        "none": graph.compile(),
    }
    try:
        median = _per_step(compiled, runs, steps)
    finally:
        repo.close()
        connection.close()
    _rows(median, "SqliteSaver (WAL, FULL)", f"{steps} steps, 20 channels")


def bench_graph_step_postgres(runs: int = 12, steps: int = 20) -> None:
    """The same on one PostgreSQL server: MnemosyneSaver beside PostgresSaver, in each placement."""
    graph = _graph(steps)
    server = PgServer().start()
    try:
        repo, connection, theirs = postgres_savers(server, "graph")
        compiled = {
            "ours": graph.compile(checkpointer=MnemosyneSaver(repo)),
            "theirs": graph.compile(checkpointer=theirs),
            "none": graph.compile(),
        }
        measured = []
        for where, client, serving in placements():
            with placed(server.data, client, serving):
                measured.append((where, _per_step(compiled, runs, steps)))
        repo.close()
        connection.close()
    finally:
        server.stop()
    for where, median in measured:
        _rows(median, "PostgresSaver, same server", f"{steps} steps, 20 channels", f" on postgres ({where})")

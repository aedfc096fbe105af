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
the figures are medians of the time per step.
"""

from __future__ import annotations

import sqlite3
import statistics
import time
from pathlib import Path
from typing import Any, TypedDict

from harness import row
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from mnemosyne import Repo
from mnemosyne.integrations.langgraph import MnemosyneSaver

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


def bench_graph_step(root: Path, runs: int = 12, steps: int = 20) -> None:
    """Rows: time per super-step with each checkpointer, in both durable modes, side by side."""
    graph = _graph(steps)
    repo = Repo.init(root / "graph.mnemo")
    connection = sqlite3.connect(root / "graph.sqlite", check_same_thread=False)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    compiled = {
        "ours": graph.compile(checkpointer=MnemosyneSaver(repo)),
        "sqlite": graph.compile(checkpointer=SqliteSaver(connection)),
        "none": graph.compile(),
    }
    start: dict[str, Any] = {"messages": [], "step": 0} | {f"field_{i:02d}": "-" * 240 for i in range(FIELDS)}
    per_step: dict[tuple[str, str], list[float]] = {
        (name, mode): [] for name in compiled for mode in ("sync", "async")
    }
    thread = 0
    try:
        for run in range(runs + 1):  # the first run warms up
            for mode in ("sync", "async"):
                order = list(compiled.items())
                for name, app in order if run % 2 == 0 else reversed(order):
                    thread += 1
                    options: dict[str, Any] = {} if name == "none" else {"durability": mode}
                    t0 = time.perf_counter()
                    final = app.invoke(start, {"configurable": {"thread_id": f"run-{thread}"}}, **options)
                    took = (time.perf_counter() - t0) / steps
                    assert final["step"] == steps, final["step"]
                    if run:
                        per_step[(name, mode)].append(took)
    finally:
        repo.close()
        connection.close()
    median = {key: statistics.median(values) * 1e6 for key, values in per_step.items()}
    label = f"{steps} steps, 20 channels"
    for mode, said in (("async", "durability async (LangGraph's default)"), ("sync", "durability sync")):
        ours, theirs = median[("ours", mode)], median[("sqlite", mode)]
        row(
            f"langgraph: one super-step of a compiled graph, {said}, MnemosyneSaver / SqliteSaver (WAL, FULL), medians",
            label,
            f"{ours:.0f} / {theirs:.0f} µs = {ours / theirs:.2f}",
        )
    alone = statistics.median(per_step[("none", "sync")] + per_step[("none", "async")]) * 1e6
    row(
        "langgraph: one super-step of the same graph with no checkpointer, median (µs)", label, f"{alone:.0f}"
    )

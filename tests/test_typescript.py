"""The TypeScript client and LangGraph.js saver (``clients/typescript``): its suite; one graph, two languages.

``make test`` installs the Node dependencies (``npm ci``) and type-checks them;
here the vitest suite runs (the client against a real ``mnemo serve`` and a
server that misbehaves, the drift check of the generated types, LangGraph's
checkpoint validation suite on ``MnemosyneSaver``), then the same three-step graph
runs in Python and in TypeScript against one server (both savers over HTTP), and
``mnemo diff`` of a step of each thread reads alike.
"""

from __future__ import annotations

import json
import operator
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from support.components import need_module, unavailable
from support.served import Served, tokens

from mnemosyne import Repo, Store, connect
from mnemosyne.integrations.client import ServedRepo

need_module("langgraph")
need_module("uvicorn")

pytestmark = pytest.mark.slow  # node, a server process

TS = Path(__file__).resolve().parents[1] / "clients" / "typescript"
VITEST = TS / "node_modules" / ".bin" / "vitest"


def _vitest(*args: str, env: dict[str, str] | None = None) -> str:
    if shutil.which("node") is None or not VITEST.exists():
        unavailable("node and clients/typescript/node_modules are missing (make test installs them: npm ci)")
    done = subprocess.run(
        [str(VITEST), "run", *args],
        cwd=TS,
        env={**os.environ, "MNEMO_PYTHON": sys.executable, "NO_COLOR": "1", "CI": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-8000:]
    return output


def test_the_typescript_suite_passes_in_full() -> None:
    output = _vitest()
    counts = re.search(r"Tests\s+(\d+) passed \((\d+)\)", output)
    assert counts is not None, output[-4000:]
    passed, total = int(counts.group(1)), int(counts.group(2))
    assert passed == total, output[-4000:]  # nothing skipped, nothing left out
    assert total > 700  # LangGraph's checkpoint validation suite is most of them
    for name in (
        "saver.test.ts",
        "client.test.ts",
        "faults.test.ts",
        "schema.test.ts",
        "steps.test.ts",
        "values.test.ts",
        "layout.test.ts",
    ):
        assert name in output


class _State(TypedDict):
    notes: Annotated[list[str], operator.add]
    count: int
    messages: Annotated[list[Any], operator.add]


def _python_steps(repo: ServedRepo, thread_id: str) -> dict[str, Any]:
    """clients/typescript/examples/steps.ts, in Python: three steps, each a note, a message and a count."""
    from langchain_core.messages import AIMessage
    from langgraph.graph import END, START, StateGraph

    from mnemosyne.integrations.langgraph import MnemosyneSaver

    def step(name: str) -> Any:
        return lambda state: {
            "notes": [f"{name} saw {state['count']}"],
            "count": state["count"] + 1,
            "messages": [AIMessage(f"{name} saw {state['count']}")],
        }

    graph = StateGraph(_State)
    for name in ("plan", "act", "review"):
        graph.add_node(name, step(name))
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "act")
    graph.add_edge("act", "review")
    graph.add_edge("review", END)
    compiled = graph.compile(checkpointer=MnemosyneSaver(repo))
    config = {"configurable": {"thread_id": thread_id}}
    return compiled.invoke({"notes": ["start"], "count": 0}, config, durability="sync")  # type: ignore[no-any-return]


_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _value(content: dict[str, Any]) -> Any:
    """A stored value as ``mnemo diff`` shows it: JSON, or JSON with messages as LangChain's records."""
    assert "bytes" not in content, content  # nothing of these graphs is stored as a serializer's bytes
    return content.get("json", content.get("langchain"))


def _record(text: str) -> dict[str, Any]:
    """The record of ``AIMessage(text)``, as both savers store it."""
    record_id = ["langchain", "schema", "messages", "AIMessage"]
    return {"id": record_id, "kwargs": {"content": text, "type": "ai"}, "lc": 1, "type": "constructor"}


def _step(path: Path, thread_id: str, step: int) -> dict[str, Any]:
    """What ``mnemo diff`` says checkpoint ``step`` of a thread changed since the one before, ids masked."""
    branch = f"threads/{thread_id}"
    with Repo.open(path) as repo:
        firsts = [(c.message.split("\n")[0], c.id) for c in repo.log(at=branch)]  # newest first
    marks = dict(firsts)
    old, new = marks[f"checkpoint step {step - 1} (loop)"], marks[f"checkpoint step {step} (loop)"]
    # The writes of the step between: a graph saves them from a worker thread (a promise in
    # TypeScript), so on a busy machine they can be committed after the next checkpoint.
    late = [i for i, (first, _) in enumerate(firsts) if f" after step {step - 1}: " in first]
    if late and min(late) < [commit for _, commit in firsts].index(new):
        new = firsts[min(late)][1]
    done = subprocess.run(
        [sys.executable, "-m", "mnemo_cli", "--repo", str(path), "--json", "diff", old, new],
        capture_output=True,
        text=True,
        check=True,
    )
    diff = json.loads(done.stdout)

    def masked(node_id: str) -> str:
        return _ID.sub("<id>", node_id.replace(branch, "threads/<thread>"))

    channels = {  # a channel's value at one id (ADR 65): added or changed, old -> new
        change["new"]["content"]["channel"]: (
            _value(change["old"]["content"]) if change.get("old") else None,
            _value(change["new"]["content"]),
        )
        for change in diff["added"] + diff["modified"]
        if "/~channels/" in change["id"]
    }
    writes = sorted(
        (change["new"]["content"]["channel"], json.dumps(_value(change["new"]["content"])))
        for change in diff["added"]
        if "/w/" in change["id"]
    )
    return {
        "added": sorted(masked(change["id"]) for change in diff["added"]),
        "modified": sorted(masked(change["id"]) for change in diff["modified"]),
        "removed": sorted(masked(change["id"]) for change in diff["removed"]),
        "channels": channels,
        "writes": writes,
    }


def test_a_python_and_a_typescript_graph_read_alike_in_mnemo_diff(tmp_path: Path) -> None:
    path = tmp_path / "store"
    Store.init(path).close()
    made = tokens(path, ("saver", "default", "write"))
    server = Served(path)
    try:
        # Both savers write through the server, each over HTTP with the same token.
        with connect(server.url, token=made["saver"]) as repo:
            state = _python_steps(repo, "py-steps")
        assert (state["notes"], state["count"]) == (["start", "plan saw 0", "act saw 1", "review saw 2"], 3)
        assert [m.content for m in state["messages"]] == ["plan saw 0", "act saw 1", "review saw 2"]
        env = {"MNEMO_URL": server.url, "MNEMO_TOKENS": json.dumps(made), "MNEMO_STEPS_THREAD": "ts-steps"}
        _vitest("test/steps.test.ts", env=env)
    finally:
        assert server.stop() == 0, server.stderr
    python, typescript = _step(path, "py-steps", 2), _step(path, "ts-steps", 2)
    assert python == typescript
    # Each changed channel is one id, old -> new (ADR 65), under the root namespace's readable segment.
    notes = ["start", "plan saw 0"]
    said = [_record("plan saw 0")]  # messages read as LangChain's records (ADR 61), in both languages
    assert python["channels"] == {
        "branch:to:review": (None, None),
        "count": (1, 2),
        "notes": (notes, [*notes, "act saw 1"]),
        "messages": (said, [*said, _record("act saw 1")]),
    }
    root = "threads/<thread>/_root"
    changed = [f"{root}/~channels/{channel}" for channel in ("count", "messages", "notes")]
    assert python["modified"] == [*changed, f"{root}/~latest"]
    assert python["removed"] == [f"{root}/~channels/branch:to:act"]
    assert [channel for channel, _ in python["writes"]] == ["branch:to:review", "count", "messages", "notes"]


def test_the_typescript_example_runs_and_its_thread_reads_from_the_shell() -> None:
    if shutil.which("node") is None or not VITEST.exists():
        unavailable("node and clients/typescript/node_modules are missing (make test installs them: npm ci)")
    script = TS.parents[1] / "examples" / "typescript_agent.sh"
    bin_dir = str(Path(sys.executable).parent)
    done = subprocess.run(
        ["bash", str(script)],
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    shown = done.stdout
    assert "$ mnemo log --thread agent-1" in shown and "checkpoint step 2" in shown, shown[-4000:]
    # mnemo diff of two steps: each changed channel once, at its one readable id.
    changed = [line for line in shown.splitlines() if line.startswith("~ threads/agent-1/")]
    assert "~ threads/agent-1/_root/~channels/notes" in changed, shown[-4000:]
    assert len(changed) == len(set(changed)), changed
    assert "_e3b0c442" not in shown

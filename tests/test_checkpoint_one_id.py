"""A channel's value at one id (ADR 65): ``mnemo diff`` of two checkpoints shows each
changed channel once, old -> new; namespaces and channels read as their names; a thread
written in ADR 33's layout (a value node per checkpoint, the root namespace a digest)
still reads, goes on, prunes and copies."""

from __future__ import annotations

import operator
import re
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import CheckpointTuple, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from starlette.testclient import TestClient
from support.tiers import examples

from mnemosyne import InvalidInput, Node, Provenance, Repo
from mnemosyne.integrations.langgraph import MnemosyneSaver
from mnemosyne.integrations.langgraph.stored_values import stored
from mnemosyne.integrations.langgraph.thread_nodes import STABLE, stable_id
from mnemosyne.integrations.langgraph.threads import channel_segment, name_of, namespace_segment, segment
from mnemosyne.integrations.viewer import build_app
from mnemosyne.model.thread_names import is_plain
from mnemosyne.model.validation import check_id

MNEMO = Path(sys.executable).with_name("mnemo")


class _State(TypedDict):
    notes: Annotated[list[str], operator.add]
    mood: str


def _graph() -> StateGraph[_State]:
    builder = StateGraph(_State)
    builder.add_node("write", lambda state: {"notes": ["met Mira"], "mood": "calm"})
    builder.add_edge(START, "write")
    builder.add_edge("write", END)
    return builder


def _checkpoint_commits(repo: Repo, branch: str) -> list[str]:
    """The thread's checkpoint commits, newest first (not those of pending writes)."""
    return [c.id for c in repo.log(at=branch) if "checkpoint " in c.message.split("\n")[0]]


def _value_changes(repo: Repo, old: str, new: str) -> tuple[list[str], list[str], dict[str, tuple[Any, Any]]]:
    """The value ids a diff of two commits adds and removes, and those it changes with (old, new) content."""
    diff = repo.diff(old, new)
    values = "/~channels/"
    return (
        [c.id for c in diff.added if values in c.id],
        [c.id for c in diff.removed if values in c.id],
        {c.id: (c.old.content, c.new.content) for c in diff.modified if values in c.id},
    )


def test_a_channel_updated_twice_is_one_id_old_to_new_in_diff_and_mnemo_diff(tmp_path: Path) -> None:
    path = tmp_path / ".mnemo"
    with MnemosyneSaver.from_path(path) as saver:
        graph = _graph().compile(checkpointer=saver)
        config: dict[str, Any] = {"configurable": {"thread_id": "chat-7"}}
        graph.invoke({"notes": [], "mood": "new"}, config)  # type: ignore[arg-type]
        graph.update_state(config, {"mood": "happy"})  # type: ignore[arg-type]
        graph.update_state(config, {"mood": "tired"})  # type: ignore[arg-type]
        assert graph.get_state(config).values == {"notes": ["met Mira"], "mood": "tired"}  # type: ignore[arg-type]
        repo = saver.repo
        newest, before, first = _checkpoint_commits(repo, "threads/chat-7")[:3]
        mood = "threads/chat-7/_root/~channels/mood"
        for old, new, was, now in ((first, before, "calm", "happy"), (before, newest, "happy", "tired")):
            added, removed, changed = _value_changes(repo, old, new)
            assert (added, removed, list(changed)) == ([], [], [mood])  # one id, the one that changed
            assert (changed[mood][0]["json"], changed[mood][1]["json"]) == (was, now)
        # Each earlier checkpoint still reads as it was, from the commit of its own put.
        history = [s.values.get("mood") for s in graph.get_state_history(config)]  # type: ignore[arg-type]
        assert history[:3] == ["tired", "happy", "calm"]
        again = MnemosyneSaver(repo)
        assert [t.checkpoint["channel_values"].get("mood") for t in again.list(config)][:3] == history[:3]  # type: ignore[arg-type]
    # The command line, as a user runs it: one id, old and new values.
    shown = subprocess.run(
        [str(MNEMO), "--repo", str(path), "diff", f"{first}", f"{before}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    value_lines = [line for line in shown.splitlines() if "/~channels/" in line]
    assert value_lines == [f"~ {mood}"], shown
    assert '-json: "calm"' in shown and '+json: "happy"' in shown, shown
    assert "_e3b0c442" not in shown, shown
    # The viewer's page of that commit: the one id, its old value removed and its new one added.
    with Repo.open(path, readonly=True) as repo:
        page = TestClient(build_app(repo, port=8765), base_url="http://127.0.0.1:8765").get(
            f"/commit/{before}"
        )
    assert page.status_code == 200
    html = page.text
    assert html.count("/~channels/") == html.count(mood) >= 1  # no value id but the one that changed
    section = html.split(f">{mood}</a>", 1)[1].split("<h3>", 1)[0]
    assert re.search(r'<tr class="del">[^\n]*scope="row">json</th>[^\n]*<pre>calm</pre>', section)
    assert re.search(r'<tr class="add">[^\n]*scope="row">json</th>[^\n]*<pre>happy</pre>', section)
    assert "_e3b0c442" not in html


# -- segments -------------------------------------------------------------------------------

_NAMES = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", "root", "_root", "child:1ef0", "a|b:c", "__start__", "branch:to:agent", "~latest"]),
    st.text(alphabet="ab_:|/%~.", max_size=6),
    st.text(min_size=70, max_size=120),
)
SEEN: dict[str, str] = {}
SEEN_CHANNELS: dict[str, str] = {}


@given(name=_NAMES)
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_namespace_and_channel_segments_are_readable_valid_and_never_meet(name: str) -> None:
    ns, channel = namespace_segment(name), channel_segment(name)
    for seg in (ns, channel):
        check_id(f"threads/t/{seg}/x")  # one valid segment: no '/', not empty, '.' or '..'
        assert "/" not in seg and len(seg.encode("utf-8", "surrogatepass")) <= 80
    assert SEEN.setdefault(ns, name) == name and SEEN_CHANNELS.setdefault(channel, name) == name
    assert name_of(ns) in (name, None) and (name_of(ns) is None) == ("~" in ns)  # reversible unless digested
    legacy = segment(name)
    assert ns == legacy or not is_plain(name)  # a plain name is where it was
    assert ns != legacy or is_plain(name)  # never another name's earlier digest, nor its own
    assert (not ns.startswith("~") and not channel.startswith("~")) or name == ""
    if name and "~" not in ns and all(char.isascii() and (char.isalnum() or char in ":|_-") for char in name):
        assert name in ns and name == channel  # readable: the name itself is there
    assert namespace_segment("") == "_root" and channel_segment("messages") == "messages"


class _Text(str):
    """Text of a subclass: its channel id is worked out, not remembered."""


@given(base=_NAMES, name=_NAMES)
@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_channel_s_value_id_is_the_same_asked_once_or_again(base: str, name: str) -> None:
    """The ids a put asks for twice are remembered: the answer is the one worked out each time."""
    expected = f"{base}{STABLE}{channel_segment(name)}"
    assert stable_id(base, name) == expected
    assert stable_id(base, name) == expected  # remembered
    assert stable_id(base, _Text(name)) == expected
    for stranger in (b"messages", 7, ["messages"], None):
        with pytest.raises(InvalidInput, match="a channel must be text"):
            stable_id(base, stranger)  # type: ignore[arg-type]


# -- a thread in ADR 33's layout --------------------------------------------------------------


def _adr33_put(repo: Repo, thread: str, ns: str, put: dict[str, Any], parent: dict[str, Any] | None) -> None:
    """Store a checkpoint as ADR 33 did: a value node per checkpoint, ``channels``, digest segments."""
    serde = InMemorySaver().serde
    branch = repo.thread_branch(thread)
    base = f"{branch}/{segment(ns)}"
    cp = put["id"]
    writers = dict(parent["writers"]) if parent else {}
    nodes = []
    for channel in put["changed"]:
        writers[channel] = cp
        fields, _ = stored(serde.dumps_typed, put["values"][channel], messages=True)
        nodes.append(
            Node(
                id=f"{base}/{segment(cp)}/c/{segment(channel)}",
                content={"channel": channel, "version": put["versions"][channel], **fields},
            )
        )
    checkpoint = empty_checkpoint()
    checkpoint["id"] = cp
    checkpoint["channel_versions"] = dict(put["versions"])
    header = {key: value for key, value in checkpoint.items() if key != "channel_values"}
    metadata = {"source": "loop", "step": put["step"], "parents": {}, "run_id": put["run"]}
    nodes.append(
        Node(
            id=f"{base}/{segment(cp)}",
            content={
                "thread_id": thread,
                "checkpoint_ns": ns,
                "checkpoint_id": cp,
                "parent": parent["id"] if parent else None,
                "run_id": put["run"],
                "checkpoint": stored(serde.dumps_typed, header, messages=True)[0],
                "metadata": stored(serde.dumps_typed, metadata, messages=True)[0],
                "channels": writers,
            },
            provenance=Provenance(agent_step=put["step"], source="langgraph"),
        )
    )
    nodes.append(Node(id=f"{base}/~latest", content={"latest": cp}))
    if repo.tip(branch) is None:
        repo.branch(branch, orphan=True, author="langgraph")
    repo.commit(put=nodes, branch=branch, message="checkpoint", author="langgraph")
    put["writers"] = writers


def _same(ours: CheckpointTuple | None, theirs: CheckpointTuple | None) -> None:
    assert (ours is None) == (theirs is None)
    if ours is not None and theirs is not None:
        assert (ours.config, ours.checkpoint["channel_values"], ours.parent_config) == (
            theirs.config,
            theirs.checkpoint["channel_values"],
            theirs.parent_config,
        )
        assert ours.checkpoint["channel_versions"] == theirs.checkpoint["channel_versions"]


def _reference_put(reference: InMemorySaver, thread: str, ns: str, put: dict[str, Any], parent: Any) -> None:
    configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if parent is not None:
        configurable["checkpoint_id"] = parent["id"]
    checkpoint = empty_checkpoint()
    checkpoint["id"] = put["id"]
    checkpoint["channel_values"] = dict(put["values"])
    checkpoint["channel_versions"] = dict(put["versions"])
    metadata = {"source": "loop", "step": put["step"], "parents": {}, "run_id": put["run"]}
    changed = {c: put["versions"][c] for c in put["changed"]}
    reference.put({"configurable": configurable}, checkpoint, metadata, changed)  # type: ignore[arg-type]


def test_a_thread_in_the_earlier_layout_reads_goes_on_in_its_namespace_and_prunes() -> None:
    reference = InMemorySaver()
    ns = ""  # the root namespace: a digest then, "_root" now
    with Repo.in_memory() as repo:
        puts: list[dict[str, Any]] = []
        values: dict[str, Any] = {}
        versions: dict[str, int] = {}
        for step, changed in enumerate([["a", "b", "__start__"], ["b"], ["a"]]):
            for channel in changed:
                values[channel] = f"{channel} at {step}"
                versions[channel] = versions.get(channel, 0) + 1
            put = {
                "id": f"1ef{step:05d}-0000-6000-8000-000000000000",
                "values": dict(values),
                "versions": dict(versions),
                "changed": changed,
                "step": step,
                "run": f"run-{step}",
            }
            parent = puts[-1] if puts else None
            _adr33_put(repo, "chat@x", ns, put, parent)
            _reference_put(reference, "chat@x", ns, put, parent)
            puts.append(put)
        branch = repo.thread_branch("chat@x")
        legacy = f"{branch}/{segment(ns)}"
        assert segment(ns).startswith("_e3b0c442")
        saver = MnemosyneSaver(repo)
        thread: dict[str, Any] = {"configurable": {"thread_id": "chat@x"}}
        _same(saver.get_tuple(thread), reference.get_tuple(thread))  # type: ignore[arg-type]
        for put in puts:
            named = {"configurable": {"thread_id": "chat@x", "checkpoint_ns": ns, "checkpoint_id": put["id"]}}
            _same(saver.get_tuple(named), reference.get_tuple(named))  # type: ignore[arg-type]
        for ours, theirs in zip(saver.list(thread), reference.list(thread), strict=True):  # type: ignore[arg-type]
            _same(ours, theirs)

        # It goes on where it began: the new put's values at one id per channel, in the same namespace.
        put = {
            "id": "1ef00009-0000-6000-8000-000000000000",
            "values": {**values, "b": "b at 9"},
            "versions": {**versions, "b": versions["b"] + 1},
            "changed": ["b"],
            "step": 9,
            "run": "run-9",
        }
        config = {
            "configurable": {"thread_id": "chat@x", "checkpoint_ns": ns, "checkpoint_id": puts[-1]["id"]}
        }
        checkpoint = empty_checkpoint()
        checkpoint["id"] = put["id"]
        checkpoint["channel_values"] = dict(put["values"])
        checkpoint["channel_versions"] = dict(put["versions"])
        metadata = {"source": "loop", "step": 9, "parents": {}, "run_id": "run-9"}
        saver.put(config, checkpoint, metadata, {"b": put["versions"]["b"]})  # type: ignore[arg-type]
        _reference_put(reference, "chat@x", ns, put, puts[-1])
        ids = {n.id for n in repo.nodes(at=branch)}
        assert f"{legacy}/~channels/b" in ids and f"{legacy}/~channels/__start__" in ids
        assert not any(i.startswith(f"{branch}/_root") for i in ids)
        for reader in (saver, MnemosyneSaver(repo)):
            _same(reader.get_tuple(thread), reference.get_tuple(thread))  # type: ignore[arg-type]
            for ours, theirs in zip(reader.list(thread), reference.list(thread), strict=True):  # type: ignore[arg-type]
                _same(ours, theirs)

        # A copy holds every checkpoint's values (InMemorySaver copies none: held to the source).
        saver.copy_thread("chat@x", "copy")
        saver.delete_thread("chat@x")
        copied = list(MnemosyneSaver(repo).list({"configurable": {"thread_id": "copy"}}))  # type: ignore[arg-type]
        source = list(reference.list(thread))  # type: ignore[arg-type]
        assert [(t.checkpoint["id"], t.checkpoint["channel_values"]) for t in copied] == [
            (t.checkpoint["id"], t.checkpoint["channel_values"]) for t in source
        ]
        copy: dict[str, Any] = {"configurable": {"thread_id": "copy"}}
        saver.delete_for_runs(["run-1"])
        saver.prune(["copy"], strategy="keep_latest")
        want = reference.get_tuple(thread)  # type: ignore[arg-type]
        assert want is not None
        for reader in (saver, MnemosyneSaver(repo)):
            (kept,) = reader.list(copy)  # type: ignore[arg-type]
            assert kept.checkpoint["channel_values"] == want.checkpoint["channel_values"]

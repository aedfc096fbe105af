"""How ``MnemosyneSaver`` stores a checkpoint (ADRs 33 and 65): a value node per channel
at one id, written when the channel changed, JSON where a value has an exact JSON form,
a small checkpoint node naming whose put wrote each value; threads stored as one blob by
an earlier version still read and go on; erasure reaches every value."""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import CheckpointTuple, empty_checkpoint, get_checkpoint_metadata
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from support.cli_harness import CliStore
from support.tiers import examples

from mnemosyne import Node, Provenance, Redacted, Repo
from mnemosyne.integrations.langgraph import MnemosyneSaver
from mnemosyne.integrations.langgraph.threads import namespace_segment, segment

ROOT = namespace_segment("")  # the root namespace's segment: _root


def _put(
    saver: Any,
    thread: str,
    values: dict[str, Any],
    versions: dict[str, Any],
    *,
    changed: list[str] | None = None,
    parent: dict[str, Any] | None = None,
    step: int = 0,
    run_id: str | None = None,
) -> dict[str, Any]:
    """A put as LangGraph makes one: every value, every version, and which channels changed."""
    configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if parent is not None:
        configurable["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = dict(values)
    checkpoint["channel_versions"] = dict(versions)
    metadata: dict[str, Any] = {"source": "loop", "step": step, "parents": {}}
    if run_id is not None:
        metadata["run_id"] = run_id
    new = {channel: versions[channel] for channel in (versions if changed is None else changed)}
    return dict(saver.put({"configurable": configurable}, checkpoint, metadata, new))


def _latest(saver: Any, thread: str) -> CheckpointTuple:
    found = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
    assert found is not None
    return found  # type: ignore[no-any-return]


def _changed(repo: Repo, branch: str) -> tuple[list[str], list[str]]:
    """The ids the branch's last commit added, and those it modified."""
    tip = repo.resolve(branch)
    change = repo.diff(tip.parents[0] if tip.parents else None, tip.id)
    return [c.id for c in change.added], [c.id for c in change.modified]


# -- what a put writes ---------------------------------------------------------------------


def test_a_put_writes_the_checkpoint_and_the_channels_that_changed_and_nothing_else() -> None:
    with Repo.in_memory() as repo:
        saver = MnemosyneSaver(repo)
        chat = [HumanMessage("hi", id="m1"), AIMessage("hello", id="m2")]
        values = {"messages": chat, "count": 1, "profile": {"name": "Mira", "city": "Lyon"}}
        first = _put(saver, "chat-7", values, {"messages": 1, "count": 1, "profile": 1})
        cp1 = first["configurable"]["checkpoint_id"]
        base = f"threads/chat-7/{ROOT}"
        added, modified = _changed(repo, "threads/chat-7")
        assert sorted(added) == sorted(
            [f"{base}/{cp1}", *(f"{base}/~channels/{c}" for c in values), f"{base}/~latest"]
        )

        second = _put(
            saver,
            "chat-7",
            {**values, "count": 2},
            {"messages": 1, "count": 2, "profile": 1},
            changed=["count"],
            parent=first,
        )
        cp2 = second["configurable"]["checkpoint_id"]
        added, modified = _changed(repo, "threads/chat-7")
        # The changed channel is one id, old -> new; the others are not touched.
        assert added == [f"{base}/{cp2}"]
        assert sorted(modified) == [f"{base}/~channels/count", f"{base}/~latest"]
        node = repo.get(f"{base}/{cp2}", at="threads/chat-7")
        assert node is not None and node.content["values_from"] == {
            "messages": cp1,
            "count": cp2,
            "profile": cp1,
        }

        for reader in (saver, MnemosyneSaver(repo)):  # what it knows, and read afresh
            latest = _latest(reader, "chat-7")
            assert latest.checkpoint["channel_values"] == {**values, "count": 2}
            assert list(latest.checkpoint["channel_values"]) == ["messages", "count", "profile"]
            earlier = reader.get_tuple(first)
            assert earlier is not None and earlier.checkpoint["channel_values"] == values


def test_a_diff_of_two_steps_shows_the_values_that_changed_not_base64(tmp_path: Path) -> None:
    cli = CliStore(tmp_path / ".mnemo")
    with MnemosyneSaver.from_path(cli.path) as saver:
        state = {"notes": ["hello"], "count": 1, "profile": {"name": "Mira", "city": "Lyon"}}
        first = _put(saver, "chat-7", state, {"notes": 1, "count": 1, "profile": 1})
        _put(
            saver,
            "chat-7",
            {**state, "notes": ["hello", "world"], "count": 2},
            {"notes": 2, "count": 2, "profile": 1},
            changed=["notes", "count"],
            parent=first,
            step=1,
        )
    out = cli.ok("diff", "threads/chat-7~1", "threads/chat-7")
    assert '+json: ["hello", "world"]' in out and "+json: 2" in out
    assert "Lyon" not in out  # the channel that did not change is not in the diff
    assert '"serde"' not in out and not re.search(r"[A-Za-z0-9+/=]{48,}", out), out
    shown = cli.doc(
        "show",
        f"threads/chat-7/{ROOT}/~channels/profile",
        "--at",
        "threads/chat-7",
    )
    expected = {
        "channel": "profile",
        "written_by": first["configurable"]["checkpoint_id"],
        "version": 1,
        "json": {"name": "Mira", "city": "Lyon"},
        "order": [["name", "city"]],
    }
    assert shown["content"] == expected


# -- values come back exactly ------------------------------------------------------------


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)
_OTHER = st.one_of(
    st.tuples(st.integers(-(2**63), 2**63 - 1), st.text(max_size=3)),
    st.just(uuid.UUID(int=5)),
    st.frozensets(st.integers(0, 9), max_size=3),
    st.binary(max_size=8),
    st.datetimes(timezones=st.just(UTC)),
    st.just(HumanMessage("hi", id="m1")),
    st.sampled_from([float("nan"), float("inf")]),
    st.dictionaries(st.integers(0, 9), st.integers(0, 9), min_size=1, max_size=3),
)


def _exactly(got: Any, want: Any) -> bool:
    """Equal, of the same types all the way down, dicts in the same key order."""
    if type(got) is not type(want):
        return False
    if isinstance(want, dict):
        return list(got) == list(want) and all(_exactly(got[k], want[k]) for k in want)
    if isinstance(want, list):
        return len(got) == len(want) and all(_exactly(g, w) for g, w in zip(got, want, strict=True))
    return bool(got == want) or (want != want and got != got)


def _has_json_form(value: Any) -> bool:
    """The rule of ADRs 33 and 61, written out on its own: exact JSON types, any key orders."""

    def fits(part: Any) -> bool:
        if part is None or type(part) in (bool, str):
            return not isinstance(part, str) or not re.search("[\ud800-\udfff]", part)
        if type(part) is int:
            return bool(-(2**63) <= part <= 2**64 - 1)
        if type(part) is float:
            return part == part and part not in (float("inf"), float("-inf"))
        if type(part) is list:
            return all(fits(item) for item in part)
        if type(part) is dict:
            keys = list(part)
            if not all(type(key) is str and fits(key) for key in keys):
                return False
            return all(fits(item) for item in part.values())
        return False

    return fits(value)


@given(value=st.one_of(_JSON, _OTHER))
@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_value_comes_back_exactly_stored_as_json_when_it_has_a_json_form(value: Any) -> None:
    serde = JsonPlusSerializer()
    expected = serde.loads_typed(serde.dumps_typed(value))  # what LangGraph's own savers give back
    with Repo.in_memory() as repo:
        saver = MnemosyneSaver(repo)
        _put(saver, "t", {"v": value}, {"v": 1})
        node = repo.get(f"threads/t/{ROOT}/~channels/v", at="threads/t")
        assert node is not None
        assert ("json" in node.content) == _has_json_form(value), node.content
        if "json" in node.content:
            expected = value  # a JSON form is exact: types, key order, -0.0 and all
        for reader in (saver, MnemosyneSaver(repo)):
            got = _latest(reader, "t").checkpoint["channel_values"]["v"]
            assert _exactly(got, expected), (got, expected)
        # Each read is a fresh copy: changing what was returned changes nothing stored.
        first = _latest(saver, "t").checkpoint["channel_values"]
        if isinstance(first["v"], list | dict):
            first["v"].clear()
            assert _exactly(_latest(saver, "t").checkpoint["channel_values"]["v"], expected)


def test_dicts_keep_their_key_order_and_records_of_one_shape_share_one_entry() -> None:
    with Repo.in_memory() as repo:
        saver = MnemosyneSaver(repo)
        rows = [{"role": "user", "content": f"message {i}"} for i in range(3)]
        # One set of keys in two orders: the second is named by its path (as LangGraph's
        # versions_seen beside channel_versions after an update).
        clash = [{"b": 1, "a": 2}, {"a": 3, "b": 4}, {"n": {"b": 5, "a": 6}, "m": {"a": 7, "b": 8}}]
        stored = _put(saver, "t", {"rows": rows, "clash": clash}, {"rows": 1, "clash": 1})
        base = f"threads/t/{ROOT}/~channels"
        rows_node, clash_node = (
            repo.get(f"{base}/rows", at="threads/t"),
            repo.get(f"{base}/clash", at="threads/t"),
        )
        assert rows_node is not None and rows_node.content["order"] == [["role", "content"]]
        assert clash_node is not None and clash_node.content == {
            "channel": "clash",
            "written_by": stored["configurable"]["checkpoint_id"],
            "version": 1,
            "json": clash,
            "order": [["b", "a"], ["n", "m"]],
            "order_at": [[[1], ["a", "b"]], [[2, "m"], ["a", "b"]]],
        }
        values = _latest(MnemosyneSaver(repo), "t").checkpoint["channel_values"]
        assert [list(row) for row in values["rows"]] == [["role", "content"]] * 3
        assert _exactly(values["clash"], clash)


# -- reads stay bounded -------------------------------------------------------------------


def _counting(repo: Repo, names: list[str]) -> dict[str, int]:
    """Count the calls of some public methods of ``repo`` from now on."""
    counts = dict.fromkeys(names, 0)
    for name in names:
        real = getattr(repo, name)

        def counted(*args: Any, _real: Callable[..., Any] = real, _name: str = name, **kwargs: Any) -> Any:
            counts[_name] += 1
            return _real(*args, **kwargs)

        setattr(repo, name, counted)
    return counts


def test_reading_a_checkpoint_takes_its_node_one_read_of_its_values_and_one_of_its_writes() -> None:
    with Repo.in_memory() as repo:
        saver = MnemosyneSaver(repo)
        channels = [f"c{i}" for i in range(6)]
        config = first = _put(saver, "t", dict.fromkeys(channels, 0), dict.fromkeys(channels, 1))
        for step in (1, 2):  # later puts change two channels each: values come from three checkpoints
            changed = channels[2 * step - 2 : 2 * step]
            latest = _latest(saver, "t")
            versions = {c: v + (c in changed) for c, v in latest.checkpoint["channel_versions"].items()}
            values = {c: step if c in changed else latest.checkpoint["channel_values"][c] for c in channels}
            config = _put(saver, "t", values, versions, changed=changed, parent=config, step=step)
        fresh = MnemosyneSaver(repo)
        counts = _counting(repo, ["get", "histories", "nodes", "tip", "erasures", "freshness"])
        assert _latest(fresh, "t").checkpoint["channel_values"] == {
            "c0": 1,
            "c1": 1,
            "c2": 2,
            "c3": 2,
            "c4": 0,
            "c5": 0,
        }
        # The pointer (every place it may be, in one read), the checkpoint; its values and its
        # writes in one read of a prefix each. The tip and the erasure count in one read
        # (freshness), never apart: five reads, however many channels.
        assert counts == {"get": 1, "histories": 1, "nodes": 2, "tip": 0, "erasures": 0, "freshness": 1}
        counts.update(dict.fromkeys(counts, 0))
        _latest(fresh, "t")  # known now: the tip and the erasure count say it still holds
        assert counts == {"get": 0, "histories": 0, "nodes": 0, "tip": 0, "erasures": 0, "freshness": 1}
        counts.update(dict.fromkeys(counts, 0))
        # One named by its id: the node with the commit of its put (one read), its values there, its writes.
        assert fresh.get_tuple(config) is not None
        assert counts == {"get": 0, "histories": 1, "nodes": 2, "tip": 1, "erasures": 0, "freshness": 0}
        counts.update(dict.fromkeys(counts, 0))
        # An earlier one: its values are read in its put's commit, not at the tip: as many reads.
        earlier = fresh.get_tuple(first)
        assert earlier is not None and earlier.checkpoint["channel_values"] == dict.fromkeys(channels, 0)
        assert counts == {"get": 0, "histories": 1, "nodes": 2, "tip": 1, "erasures": 0, "freshness": 0}


# -- forks, prune, copy --------------------------------------------------------------------


def test_a_fork_keeps_the_values_of_the_checkpoint_it_forked_from() -> None:
    with Repo.in_memory() as repo:
        saver = MnemosyneSaver(repo)
        first = _put(saver, "t", {"a": "a1", "b": "b1"}, {"a": 1, "b": 1})
        _put(saver, "t", {"a": "a1", "b": "b2"}, {"a": 1, "b": 2}, changed=["b"], parent=first, step=1)
        # Time travel: from the first checkpoint, a new channel; a and b are the first one's.
        fork = _put(
            saver,
            "t",
            {"a": "a1", "b": "b1", "c": "c1"},
            {"a": 1, "b": 1, "c": 1},
            changed=["c"],
            parent=first,
            step=1,
        )
        for reader in (saver, MnemosyneSaver(repo)):
            found = reader.get_tuple(fork)
            assert found is not None and found.checkpoint["channel_values"] == {
                "a": "a1",
                "b": "b1",
                "c": "c1",
            }
        assert next(repo.log(at="threads/t")).message.startswith("fork of ")


def test_prune_and_copy_keep_the_values_a_kept_checkpoint_names() -> None:
    with Repo.in_memory() as repo:
        saver = MnemosyneSaver(repo)
        config = _put(saver, "t", {"kept": "from the first step", "n": 0}, {"kept": 1, "n": 1})
        for step in (1, 2):
            config = _put(
                saver,
                "t",
                {"kept": "from the first step", "n": step},
                {"kept": 1, "n": step + 1},
                changed=["n"],
                parent=config,
                step=step,
            )
        saver.prune(["t"], strategy="keep_latest")
        saver.copy_thread("t", "copy")
        expected = {"kept": "from the first step", "n": 2}
        for thread in ("t", "copy"):
            for reader in (saver, MnemosyneSaver(repo)):
                assert _latest(reader, thread).checkpoint["channel_values"] == expected
        channel_nodes = [n.id for n in repo.nodes(at="threads/t") if "/~channels/" in n.id]
        assert len(channel_nodes) == 2  # one value node per channel, holding the kept checkpoint's values
        saver.delete_thread("t")
        assert _latest(saver, "copy").checkpoint["channel_values"] == expected


# -- threads an earlier version stored -----------------------------------------------------


def _old_put(
    repo: Repo, config: dict[str, Any], checkpoint: dict[str, Any], metadata: dict[str, Any]
) -> dict[str, Any]:
    """Store a checkpoint as the saver did before ADR 33: one node, a pointer at the namespace's id."""
    serde = JsonPlusSerializer()
    configurable = config["configurable"]
    thread, ns, parent = (
        configurable["thread_id"],
        configurable.get("checkpoint_ns", ""),
        configurable.get("checkpoint_id"),
    )
    versions = checkpoint["channel_versions"]
    saved = {
        **checkpoint,
        "channel_values": {k: v for k, v in checkpoint["channel_values"].items() if k in versions},
    }
    full = get_checkpoint_metadata(config, metadata)  # type: ignore[arg-type]

    def packed(value: Any) -> list[str]:
        kind, data = serde.dumps_typed(value)
        return [kind, base64.b64encode(data).decode("ascii")]

    branch = repo.thread_branch(thread)
    base = f"{branch}/{segment(ns)}"
    node = Node(
        id=f"{base}/{segment(checkpoint['id'])}",
        content={
            "thread_id": thread,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint["id"],
            "parent": parent,
            "run_id": full.get("run_id"),
            "checkpoint": packed(saved),
            "metadata": packed(full),
        },
        provenance=Provenance(agent_step=full.get("step"), source="langgraph"),
    )
    if repo.tip(branch) is None:
        repo.branch(branch, orphan=True, author="langgraph")
    repo.commit(
        put=[node, Node(id=base, content={"latest": checkpoint["id"]})],
        branch=branch,
        message="checkpoint",
        author="langgraph",
    )
    write = Node(
        id=f"{base}/{segment(checkpoint['id'])}/w/{segment('task-1')}/0",
        content={
            "task_id": "task-1",
            "task_path": "",
            "channel": "notes",
            "idx": 0,
            "value": packed(f"write of {checkpoint['id']}"),
        },
    )
    repo.commit(put=[write], branch=branch, message="writes", author="langgraph")
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}}


def _same_as(ours: CheckpointTuple | None, theirs: CheckpointTuple | None) -> None:
    assert (ours is None) == (theirs is None)
    if ours is not None and theirs is not None:
        assert (ours.config, ours.checkpoint, ours.metadata, ours.parent_config, ours.pending_writes) == (
            theirs.config,
            theirs.checkpoint,
            theirs.metadata,
            theirs.parent_config,
            theirs.pending_writes,
        )


def test_a_thread_stored_as_one_blob_by_an_earlier_version_reads_and_goes_on() -> None:
    with Repo.in_memory() as repo:
        reference = InMemorySaver()
        config: dict[str, Any] = {"configurable": {"thread_id": "old@example.com", "checkpoint_ns": ""}}
        for step in range(3):
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {
                "notes": [f"n{i}" for i in range(step + 1)],
                "chat": [HumanMessage("hi", id="m")],
            }
            checkpoint["channel_versions"] = {"notes": step + 1, "chat": 1}
            metadata = {"source": "loop", "step": step, "parents": {}, "run_id": f"run-{step}"}
            stored = _old_put(repo, config, checkpoint, metadata)  # type: ignore[arg-type]
            reference.put(config, checkpoint, metadata, dict(checkpoint["channel_versions"]))  # type: ignore[arg-type]
            reference.put_writes(stored, [("notes", f"write of {checkpoint['id']}")], "task-1")  # type: ignore[arg-type]
            config = stored
        branch = repo.thread_branch("old@example.com")
        base = f"{branch}/{segment('')}"  # the digest an earlier version named the root namespace by
        saver = MnemosyneSaver(repo)
        thread = {"configurable": {"thread_id": "old@example.com"}}
        _same_as(saver.get_tuple(thread), reference.get_tuple(thread))  # type: ignore[arg-type]
        _same_as(saver.get_tuple(config), reference.get_tuple(config))  # type: ignore[arg-type]
        assert [t.config for t in saver.list(thread)] == [t.config for t in reference.list(thread)]  # type: ignore[arg-type]

        # The thread goes on: the first put stores every value (its parent holds them in a blob).
        values = {"notes": ["n0", "n1", "n2", "n3"], "chat": [HumanMessage("hi", id="m")]}
        newer = _put(
            saver,
            "old@example.com",
            values,
            {"notes": 4, "chat": 1},
            changed=["notes"],
            parent=config,
            step=3,
        )
        node = repo.get(f"{base}/{newer['configurable']['checkpoint_id']}", at=branch)
        assert node is not None and set(node.content["values_from"].values()) == {
            newer["configurable"]["checkpoint_id"]
        }
        assert (
            repo.get(base, at=branch) is None and repo.get(f"{base}/~latest", at=branch) is not None
        )  # moved
        for reader in (saver, MnemosyneSaver(repo)):
            assert _latest(reader, "old@example.com").checkpoint["channel_values"] == values
            _same_as(reader.get_tuple(config), reference.get_tuple(config))  # type: ignore[arg-type]
        saver.delete_for_runs(["run-1"])
        saver.prune(["old@example.com"], strategy="keep_latest")
        (kept,) = saver.list(thread)  # type: ignore[arg-type]
        assert kept.checkpoint["channel_values"] == values
        assert [n.id for n in repo.nodes(at=branch)] == sorted(
            [node.id, *(f"{base}/~channels/{c}" for c in values), f"{base}/~latest"]
        )


# -- erasure reaches every node ------------------------------------------------------------


def _files_hold(path: Path, needle: bytes) -> bool:
    return any(needle in f.read_bytes() for f in path.rglob("*") if f.is_file())


def test_erasing_reaches_every_channel_node_and_keeps_what_a_kept_checkpoint_names(tmp_path: Path) -> None:
    canary = f"canary-{uuid.uuid4().hex}"
    path = tmp_path / "store.mnemo"
    with MnemosyneSaver.from_path(path, erase=True) as saver:
        # A value set once and kept by every later checkpoint, a write, and metadata.
        config = _put(saver, "secret", {"diary": f"dear diary, {canary}", "n": 0}, {"diary": 1, "n": 1})
        saver.put_writes(config, [("n", {"note": canary})], "task")  # type: ignore[arg-type]
        for step in (1, 2):
            config = _put(
                saver,
                "secret",
                {"diary": f"dear diary, {canary}", "n": step},
                {"diary": 1, "n": step + 1},
                changed=["n"],
                parent=config,
                step=step,
            )
        # In another thread, a run that leaked: its value goes; one a later checkpoint keeps stays.
        clean = _put(
            saver, "kept", {"kept": "keep me", "leak": "nothing"}, {"kept": 1, "leak": 1}, run_id="clean"
        )
        leaky = _put(
            saver,
            "kept",
            {"kept": "keep me too", "leak": canary},
            {"kept": 2, "leak": 2},
            parent=clean,
            step=1,
            run_id="leaky",
        )
        _put(
            saver,
            "kept",
            {"kept": "keep me too", "leak": "sealed"},
            {"kept": 2, "leak": 3},
            changed=["leak"],
            parent=leaky,
            step=2,
            run_id="clean",
        )
        assert _files_hold(path, canary.encode())  # the check sees it: stored as text
        saver.delete_thread("secret")
        saver.delete_for_runs(["leaky"])
        saver.repo.gc(grace=timedelta(0), compact=True)
        assert not _files_hold(path, canary.encode())
        assert _latest(saver, "kept").checkpoint["channel_values"] == {
            "kept": "keep me too",
            "leak": "sealed",
        }
        assert saver.get_tuple({"configurable": {"thread_id": "secret"}}) is None
        assert saver.repo.fsck().ok


def test_a_saver_that_knows_the_latest_notices_a_channel_erased_by_hand() -> None:
    with Repo.in_memory() as repo:
        saver = MnemosyneSaver(repo)
        _put(saver, "t", {"secret": "passport X123", "n": 1}, {"secret": 1, "n": 1})
        assert _latest(saver, "t").checkpoint["channel_values"]["secret"] == "passport X123"  # known now
        before = repo.erasures()
        repo.commit([Node(id="notes/other", content="unrelated")], message="a commit erases nothing")
        assert repo.erasures() == before
        node_id = f"threads/t/{ROOT}/~channels/secret"
        repo.forget(node_id, "the user asked", author="dpo")  # erasure leaves the thread's tip as it was
        assert repo.erasures() == before + 1
        for reader in (saver, MnemosyneSaver(repo)):
            with pytest.raises(Redacted):
                reader.get_tuple({"configurable": {"thread_id": "t"}})


def test_the_erasure_count_of_a_tenant_grows_with_each_version_erased(tmp_path: Path) -> None:
    with Repo.init(tmp_path / "s.mnemo") as repo:
        assert repo.erasures() == 0
        for i in range(3):
            repo.commit([Node(id="diary", content=f"entry {i}")], message=f"entry {i}")
        repo.forget("diary", "asked to", author="dpo")
        assert repo.erasures() == 3  # one per version
        with Repo.open(tmp_path / "s.mnemo", tenant="other", create=True) as other:
            assert other.erasures() == 0  # per tenant
        repo.gc(grace=timedelta(0))
        assert repo.erasures() == 3  # it never goes down


def test_a_checkpoint_written_now_says_when_in_its_metadata_as_json(tmp_path: Path) -> None:
    # Metadata is readable too: step, source and the run's configurable values.
    with Repo.in_memory() as repo:
        saver = MnemosyneSaver(repo)
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "user": "mira"}}
        stored = saver.put(config, empty_checkpoint(), {"source": "input", "step": -1, "parents": {}}, {})  # type: ignore[arg-type]
        node = repo.get(f"threads/t/{ROOT}/{stored['configurable']['checkpoint_id']}", at="threads/t")
        assert node is not None
        assert node.content["metadata"]["json"] == {
            "parents": {},
            "source": "input",
            "step": -1,
            "user": "mira",
        }
        assert node.content["checkpoint"]["json"]["channel_versions"] == {}
        assert datetime.fromisoformat(node.content["checkpoint"]["json"]["ts"]) <= datetime.now(UTC)

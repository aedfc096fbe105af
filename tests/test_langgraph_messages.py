"""LangChain messages and LangGraph's records stored readably (ADR 61): messages as LangChain's
constructor records, checkpoint records JSON after ``update_state``, and stores written before
(messages as serializer bytes) still read."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from support.cli_harness import CliStore
from support.tiers import examples

from mnemosyne import CorruptObject, Node, Repo
from mnemosyne.integrations.langgraph import MnemosyneSaver, stored_values
from mnemosyne.integrations.langgraph.threads import namespace_segment

ROOT = namespace_segment("")
BASE64_RUN = re.compile(r"[A-Za-z0-9+/=]{40,}")


def _put(saver: MnemosyneSaver, thread: str, values: dict[str, Any]) -> dict[str, Any]:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = dict(values)
    checkpoint["channel_versions"] = dict.fromkeys(values, 1)
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return dict(saver.put(config, checkpoint, {"source": "loop", "step": 0}, dict.fromkeys(values, 1)))  # type: ignore[arg-type]


def _channel_node(repo: Repo, thread: str, put: dict[str, Any], channel: str) -> Node:
    """The channel's value node as the put wrote it (the tip's: the put is the thread's last)."""
    node = repo.get(f"threads/{thread}/{ROOT}/~channels/{channel}", at=f"threads/{thread}")
    assert node is not None and node.content["written_by"] == put["configurable"]["checkpoint_id"]
    return node


def _same(got: Any, want: Any) -> bool:
    """Equal and of the same types all the way down (messages compare field by field)."""
    if type(got) is not type(want):
        return False
    if isinstance(want, dict):
        return list(got) == list(want) and all(_same(got[k], want[k]) for k in want)
    if isinstance(want, list):
        return len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want, strict=True))
    return bool(got == want)


_TEXT = st.text(max_size=12)
_JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), _TEXT)
_KWARGS = st.dictionaries(st.text(min_size=1, max_size=5).filter(lambda k: k != "lc"), _JSON_LEAF, max_size=3)
_CONTENT = st.one_of(_TEXT, st.lists(st.builds(lambda t: {"type": "text", "text": t}, _TEXT), max_size=2))
_IDS = st.one_of(st.none(), st.text(alphabet="abc123-", min_size=1, max_size=8))
_TOOL_CALLS = st.lists(
    st.builds(
        lambda name, call, a: {"name": name, "args": {"a": a}, "id": call, "type": "tool_call"},
        st.text(min_size=1, max_size=5),
        st.text(alphabet="xyz0", min_size=1, max_size=5),
        _JSON_LEAF,
    ),
    max_size=2,
)
_MESSAGES = st.one_of(
    st.builds(
        lambda c, i, n: HumanMessage(content=c, id=i, name=n), _CONTENT, _IDS, st.one_of(st.none(), _TEXT)
    ),
    st.builds(lambda c, i, k: SystemMessage(content=c, id=i, additional_kwargs=k), _CONTENT, _IDS, _KWARGS),
    st.builds(
        lambda c, i, m, t: AIMessage(content=c, id=i, response_metadata=m, tool_calls=t),
        _CONTENT,
        _IDS,
        _KWARGS,
        _TOOL_CALLS,
    ),
    st.builds(
        lambda c, t, i: ToolMessage(content=c, tool_call_id=t, id=i),
        _CONTENT,
        st.text(min_size=1, max_size=5),
        _IDS,
    ),
    st.builds(lambda i: RemoveMessage(id=i), st.text(alphabet="abc", min_size=1, max_size=4)),
)


@given(messages=st.lists(_MESSAGES, max_size=5), extra=_KWARGS)
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_messages_are_stored_as_langchain_records_and_come_back_exactly(
    messages: list[BaseMessage], extra: dict[str, Any]
) -> None:
    value: Any = {"messages": messages, "extra": extra}
    serde = JsonPlusSerializer()
    with Repo.in_memory() as repo:
        saver = MnemosyneSaver(repo)
        stored = _put(saver, "t", {"state": value, "chat": messages})
        for channel in ("state", "chat"):
            node = _channel_node(repo, "t", stored, channel)
            if messages:
                assert "langchain" in node.content and "bytes" not in node.content, node.content
            text = json.dumps(node.content)
            for message in messages:
                assert type(message).__name__ in text
        for reader in (saver, MnemosyneSaver(repo)):
            got = reader.get_tuple({"configurable": {"thread_id": "t"}})
            assert got is not None
            assert _same(got.checkpoint["channel_values"]["state"], value)
            assert _same(got.checkpoint["channel_values"]["chat"], messages)
            # As LangGraph's own serializer gives them back.
            assert got.checkpoint["channel_values"]["chat"] == serde.loads_typed(serde.dumps_typed(messages))


class _Mine(HumanMessage):
    """A message class of an application's own: not revived from a record (it names code)."""


@pytest.mark.parametrize(
    "value",
    [
        {"messages": [HumanMessage("hi")], "lc": 1},  # a map of its own that reads as a record
        [HumanMessage("hi"), {"lc": 2, "type": "constructor"}],
        [_Mine("hi")],  # a subclass
        [HumanMessage("hi", additional_kwargs={"when": b"bytes"})],  # a field with no JSON form
        [HumanMessage("hi"), (1, 2)],  # a tuple beside it
    ],
    ids=["lc key", "lc record of its own", "subclass", "bytes field", "tuple"],
)
def test_a_value_whose_messages_have_no_exact_record_form_keeps_the_serializer_s_bytes(value: Any) -> None:
    with Repo.in_memory() as repo:
        saver = MnemosyneSaver(repo)
        stored = _put(saver, "t", {"v": value})
        node = _channel_node(repo, "t", stored, "v")
        assert set(node.content) == {"channel", "written_by", "version", "serde", "bytes"}
        got = MnemosyneSaver(repo).get_tuple({"configurable": {"thread_id": "t"}})
        serde = JsonPlusSerializer()  # what LangGraph's own savers give back
        assert got is not None and got.checkpoint["channel_values"]["v"] == serde.loads_typed(
            serde.dumps_typed(value)
        )


def test_a_record_of_a_class_not_revived_is_a_corrupt_object() -> None:
    with Repo.in_memory() as repo:
        saver = MnemosyneSaver(repo)
        stored = _put(saver, "t", {"v": [HumanMessage("hi")]})
        node = _channel_node(repo, "t", stored, "v")
        record = node.content["langchain"][0]
        forged = {**record, "id": ["os", "system"]}
        repo.commit([Node(id=node.id, content={**node.content, "langchain": [forged]})], branch="threads/t")
        with pytest.raises(CorruptObject, match="no known message"):
            MnemosyneSaver(repo).get_tuple({"configurable": {"thread_id": "t"}})


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _graph() -> StateGraph:
    builder = StateGraph(Chat)
    builder.add_node("agent", lambda state: {"messages": [AIMessage(f"answer {len(state['messages'])}")]})
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    return builder


def test_a_chat_thread_reads_in_diff_and_stays_json_after_update_state(tmp_path: Path) -> None:
    cli = CliStore(tmp_path / ".mnemo")
    with MnemosyneSaver.from_path(cli.path) as saver:
        graph = _graph().compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "chat-3"}}
        graph.invoke({"messages": [HumanMessage("hello", id="h1")]}, config)
        earlier = list(graph.get_state_history(config))[1]  # before the agent answered
        # update_state on an earlier checkpoint: its versions_seen["__interrupt__"] holds the
        # checkpoint's channels in another order than channel_versions.
        forked = graph.update_state(earlier.config, {"messages": [HumanMessage("edited", id="h2")]})
        graph.invoke(None, forked)
        values = graph.get_state(config).values["messages"]
        assert [m.content for m in values] == ["hello", "edited", "answer 2"]
        repo = saver.repo
        branch = repo.thread_branch("chat-3")
        nodes = list(repo.nodes(at=branch))
        checkpoints = [n for n in nodes if isinstance(n.content, dict) and "checkpoint" in n.content]
        assert len(checkpoints) >= 5
        for node in checkpoints:
            assert "json" in node.content["checkpoint"] and "json" in node.content["metadata"], node.id
        assert any("order_at" in n.content["checkpoint"] for n in checkpoints)  # the update's record
        messages = [n for n in nodes if n.id.endswith("/~channels/messages")]
        assert messages and all("langchain" in n.content for n in messages)
        for node in nodes:
            assert "bytes" not in json.dumps(node.content), node.id
        # A fresh saver reads what was stored: the same state.
        assert MnemosyneSaver(repo).get_tuple(config).checkpoint["channel_values"]["messages"] == values  # type: ignore[union-attr]
    out = cli.ok("diff", "threads/chat-3~1", "threads/chat-3")
    assert "answer 2" in out and "AIMessage" in out
    values_shown = [line for line in out.splitlines() if line.startswith("    ")]  # not the ids
    assert values_shown and '"serde"' not in out, out
    assert not any(BASE64_RUN.search(line) for line in values_shown), out


def test_a_thread_whose_messages_were_stored_as_bytes_reads_and_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with Repo.in_memory() as repo:
        graph = _graph().compile(checkpointer=MnemosyneSaver(repo))
        config = {"configurable": {"thread_id": "old"}}
        with monkeypatch.context() as before:  # as an earlier version stored them: serializer bytes
            before.setattr(stored_values, "with_records", lambda value: None)
            graph.invoke({"messages": [HumanMessage("hello", id="h1")]}, config)
        branch = repo.thread_branch("old")
        old = [n for n in repo.nodes(at=branch) if n.id.endswith("/~channels/messages")]
        assert old and all(base64.b64decode(n.content["bytes"]) for n in old)
        fresh = _graph().compile(checkpointer=MnemosyneSaver(repo))
        assert [m.content for m in fresh.get_state(config).values["messages"]] == ["hello", "answer 1"]
        fresh.invoke({"messages": [HumanMessage("again", id="h3")]}, config)
        assert [m.content for m in fresh.get_state(config).values["messages"]] == [
            "hello",
            "answer 1",
            "again",
            "answer 3",
        ]
        (newest,) = [n for n in repo.nodes(at=branch) if n.id.endswith("/~channels/messages")]
        assert "langchain" in newest.content


class _OwnSerializer(JsonPlusSerializer):
    """An application's serializer (one that encrypts, say): its bytes are not to be bypassed."""


def test_under_an_application_s_serializer_messages_keep_its_bytes() -> None:
    with Repo.in_memory() as repo:
        saver = MnemosyneSaver(repo, serde=_OwnSerializer())
        stored = _put(saver, "t", {"chat": [HumanMessage("private", id="m1")]})
        node = _channel_node(repo, "t", stored, "chat")
        assert set(node.content) == {"channel", "written_by", "version", "serde", "bytes"}
        assert "private" not in json.dumps(node.content)
        got = MnemosyneSaver(repo, serde=_OwnSerializer()).get_tuple({"configurable": {"thread_id": "t"}})
        assert got is not None and got.checkpoint["channel_values"]["chat"] == [
            HumanMessage("private", id="m1")
        ]

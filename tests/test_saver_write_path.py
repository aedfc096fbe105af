"""What a checkpoint put writes, after its write path was made cheaper.

A put checks each value once for a JSON form and once more as node content; both
checks now test text and integer items without a call each, and the JSON-form
check meets a record's set of keys once. These tests hold what a put stores and
what every read gives back to what it was: a sequence of puts, writes, forks and
deletes reads as a model says (``get_tuple``, ``list``, a fresh saver), every put
is one commit whose diff is its nodes, and ``fsck`` (which compares the derived
indexes with a rebuild) stays clean; values made of records whose keys come in
several orders come back exactly; node content is refused exactly when the rule
says, with the same message.
"""

from __future__ import annotations

import json
import math
import re
from collections import OrderedDict
from enum import IntEnum
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from support.tiers import examples

from mnemosyne import InvalidInput, Node, Repo
from mnemosyne.integrations.langgraph import MnemosyneSaver
from mnemosyne.integrations.langgraph.threads import namespace_segment

ROOT = namespace_segment("")
_SERDE = JsonPlusSerializer()  # the root namespace's segment
CHANNELS = ("messages", "count", "flag", "notes")

# -- a model of a thread's checkpoints --------------------------------------------------


class Model:
    """What LangGraph should read back: every checkpoint put, its writes, each thread's latest."""

    def __init__(self) -> None:
        self.checkpoints: dict[str, dict[str, dict[str, Any]]] = {}  # thread -> id -> saved
        self.clock = 0

    def next_id(self) -> str:
        self.clock += 1
        return str(uuid6(clock_seq=self.clock))

    def latest(self, thread: str) -> dict[str, Any] | None:
        saved = self.checkpoints.get(thread)
        return saved[max(saved)] if saved else None


def _put(
    saver: MnemosyneSaver, model: Model, thread: str, parent: dict[str, Any] | None, changes: dict
) -> None:
    """A put as LangGraph makes one: the parent's values with ``changes``, their versions bumped."""
    values = dict(parent["values"]) if parent else {}
    versions = dict(parent["versions"]) if parent else {}
    for channel, value in changes.items():
        values[channel] = value
        versions[channel] = versions.get(channel, 0) + 1
    checkpoint = empty_checkpoint()
    checkpoint["id"] = model.next_id()
    checkpoint["channel_values"] = dict(values)
    checkpoint["channel_versions"] = dict(versions)
    configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if parent is not None:
        configurable["checkpoint_id"] = parent["id"]
    step = len(model.checkpoints.get(thread, {}))
    saver.put(
        {"configurable": configurable},
        checkpoint,
        {"source": "loop", "step": step, "parents": {}},
        {channel: versions[channel] for channel in changes},
    )
    model.checkpoints.setdefault(thread, {})[checkpoint["id"]] = {
        "id": checkpoint["id"],
        "parent": parent["id"] if parent else None,
        # What LangGraph's own savers give back (a tuple comes back a list).
        "values": {
            channel: _SERDE.loads_typed(_SERDE.dumps_typed(value)) for channel, value in values.items()
        },
        "versions": versions,
        "step": step,
        "writes": [],
    }


def _same_writes(got: list[Any], want: list[tuple[str, str, Any]]) -> bool:
    def key(write: Any) -> tuple[str, str, str]:
        return (write[0], write[1], json.dumps(write[2]))

    return sorted(map(key, got)) == sorted(map(key, want))


def _check(saver: MnemosyneSaver, model: Model) -> None:
    """Every read a graph makes agrees with the model: latest, each by id, the listing."""
    for thread, saved in model.checkpoints.items():
        latest = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
        if not saved:
            assert latest is None
            assert list(saver.list({"configurable": {"thread_id": thread}})) == []
            continue
        want = saved[max(saved)]
        assert latest is not None and latest.checkpoint["id"] == want["id"]
        for one in saved.values():
            got = saver.get_tuple(
                {"configurable": {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": one["id"]}}
            )
            assert got is not None
            assert got.checkpoint["channel_values"] == one["values"], one["id"]
            assert got.checkpoint["channel_versions"] == one["versions"]
            assert got.metadata["step"] == one["step"]
            parent = got.parent_config["configurable"]["checkpoint_id"] if got.parent_config else None
            assert parent == one["parent"]
            assert _same_writes(list(got.pending_writes or []), one["writes"])
        listed = list(saver.list({"configurable": {"thread_id": thread}}))
        assert [found.checkpoint["id"] for found in listed] == sorted(saved, reverse=True)
        for found in listed:
            assert found.checkpoint["channel_values"] == saved[found.checkpoint["id"]]["values"]


_VALUES = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.text(max_size=6),
    st.booleans(),
    st.lists(
        st.fixed_dictionaries(
            {"role": st.sampled_from(["user", "assistant"]), "content": st.text(max_size=5)}
        ),
        max_size=3,
    ),
    st.tuples(st.integers(0, 3)),  # no JSON form: the serializer's bytes
)
_OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("put"),
            st.sampled_from(["a", "b"]),
            st.dictionaries(st.sampled_from(CHANNELS), _VALUES, max_size=3),
            st.integers(0, 3),  # how far back the parent is: 0 the latest, else a fork
        ),
        st.tuples(
            st.just("writes"), st.sampled_from(["a", "b"]), st.text("xyz", min_size=1, max_size=2), _VALUES
        ),
        st.tuples(st.just("delete"), st.sampled_from(["a", "b"]), st.none(), st.none()),
    ),
    min_size=1,
    max_size=10,
)


def _run(saver: MnemosyneSaver, model: Model, ops: list[tuple[Any, ...]]) -> None:
    for op, thread, arg, extra in ops:
        saved = model.checkpoints.get(thread) or {}
        if op == "put":
            ids = sorted(saved)
            parent = saved[ids[max(0, len(ids) - 1 - extra)]] if ids else None
            _put(saver, model, thread, parent, arg)
        elif op == "writes" and saved:
            latest = saved[max(saved)]
            config = {
                "configurable": {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": latest["id"]}
            }
            saver.put_writes(config, [("notes", extra)], task_id=arg)
            if not any(task == arg for task, _, _ in latest["writes"]):  # a task's writes are kept once
                latest["writes"].append((arg, "notes", extra))
        elif op == "delete":
            saver.delete_thread(thread)
            model.checkpoints[thread] = {}


@given(ops=_OPS)
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_puts_writes_forks_and_deletes_read_as_the_model_says(ops: list[tuple[Any, ...]]) -> None:
    with Repo.in_memory() as repo:
        saver = MnemosyneSaver(repo)
        model = Model()
        _run(saver, model, ops)
        _check(saver, model)
        _check(MnemosyneSaver(repo), model)  # nothing kept in memory: everything read back
        assert repo.fsck().ok


def test_on_a_durable_store_each_put_is_one_commit_of_its_nodes_and_fsck_stays_clean(tmp_path: Path) -> None:
    repo = Repo.init(tmp_path / "store")
    saver = MnemosyneSaver(repo)
    model = Model()
    records = [{"role": "user", "content": f"message {i}"} for i in range(4)]
    parent: dict[str, Any] | None = None
    for step in range(12):
        changes: dict[str, Any] = {"count": step, "messages": records[: step % 4 + 1]}
        if step % 3 == 0:
            changes["flag"] = step % 2 == 0
        _put(saver, model, "t", parent, changes)
        parent = model.latest("t")
    fork = model.checkpoints["t"][sorted(model.checkpoints["t"])[5]]
    was = model.latest("t")
    assert was is not None
    _put(saver, model, "t", fork, {"notes": "from a fork"})
    _check(saver, model)
    commits = list(repo.log(at=repo.thread_branch("t")))
    assert len(commits) == 13
    # Each put's commit changes its checkpoint node, the channels it changed and the pointer;
    # a fork's also each channel whose value node held a value of another version (ADR 65).
    newest, before = commits[0], commits[1]
    diff = repo.diff(before.id, newest.id)
    changed = sorted(change.id.rsplit("/", 1)[-1] for change in diff.added + diff.modified)
    checkpoint_segment = model.latest("t")
    assert checkpoint_segment is not None
    differ = [c for c, v in fork["versions"].items() if was["versions"].get(c) != v]
    assert differ and "notes" not in differ
    assert changed == sorted([checkpoint_segment["id"], "notes", "~latest", *differ])
    assert diff.removed == []
    report = repo.fsck()
    assert report.ok, report.problems
    repo.close()
    with Repo.open(tmp_path / "store") as again:
        _check(MnemosyneSaver(again), model)


# -- records whose keys come in several orders ---------------------------------------------

_KEYS = ("a", "b", "c")
_RECORD = st.permutations(_KEYS).flatmap(
    lambda keys: st.integers(1, 3).flatmap(
        lambda size: st.fixed_dictionaries(
            {key: st.integers(0, 9) | st.text("é\u2603x", max_size=2) for key in keys[:size]}
        )
    )
)
_RECORDS = st.recursive(
    st.lists(_RECORD, max_size=5),
    lambda inner: (
        st.lists(inner | _RECORD, max_size=3) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=2)
    ),
    max_leaves=8,
)


def _one_order_per_key_set(value: Any) -> bool:
    """The rule of ADR 33, written out on its own: every dict with one set of keys has one order."""
    orders: dict[frozenset[str], list[str]] = {}

    def fits(part: Any) -> bool:
        if isinstance(part, list):
            return all(fits(item) for item in part)
        if isinstance(part, dict):
            keys = list(part)
            return orders.setdefault(frozenset(keys), keys) == keys and all(
                fits(item) for item in part.values()
            )
        return True

    return fits(value)


def _order(value: Any) -> Any:
    """``value`` with every dict spelled as its list of items: equal only when key orders are too."""
    if isinstance(value, list):
        return [_order(item) for item in value]
    if isinstance(value, dict):
        return [(key, _order(item)) for key, item in value.items()]
    return value


@given(value=_RECORDS)
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_records_in_several_key_orders_come_back_exactly(value: Any) -> None:
    with Repo.in_memory() as repo:
        saver = MnemosyneSaver(repo)
        model = Model()
        _put(saver, model, "t", None, {"rows": value})
        latest = model.latest("t")
        assert latest is not None
        node = repo.get(f"threads/t/{ROOT}/~channels/rows", at="threads/t")
        assert node is not None
        assert "json" in node.content, node.content  # a second order of a set of keys is named by path
        assert ("order_at" not in node.content) == _one_order_per_key_set(value), node.content
        first = {frozenset(keys): keys for keys in node.content.get("order", [])}
        if "order" in node.content:  # each set of keys whose first order is not sorted, once
            assert len(first) == len(node.content["order"])
            assert all(keys != sorted(keys) for keys in node.content["order"])
        for _path, keys in node.content.get("order_at", []):  # each: not its set's first order
            assert keys != first.get(frozenset(keys), sorted(keys))
        for reader in (saver, MnemosyneSaver(repo)):
            got = reader.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
            assert got is not None
            assert _order(got.checkpoint["channel_values"]["rows"]) == _order(value)


# -- node content: refused exactly as the rule says --------------------------------------


def _rule(value: Any, what: str, depth: int = 0) -> None:
    """The content rule, written out on its own (as ``check_json`` was before it was made faster)."""
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        if re.search("[\ud800-\udfff]", value):
            raise InvalidInput(f"{what} is not valid UTF-8 text")
        return
    if isinstance(value, int):
        if not -(2**63) <= value <= 2**64 - 1:
            raise InvalidInput(f"{what}: integer {value} is outside the 64-bit range")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(f"{what}: {value} is not a finite number (NaN and Infinity are refused)")
        return
    if depth >= 64:
        raise InvalidInput(f"{what} is nested deeper than 64 levels")
    if isinstance(value, list):
        for item in value:
            _rule(item, what, depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInput(f"{what}: map key {key!r} is not a string")
            _rule(key, what)
            _rule(item, what, depth + 1)
        return
    raise InvalidInput(f"{what}: {type(value).__name__} is not a JSON value")


class Level(IntEnum):
    LOW = 1


class Text(str):
    pass


_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**65), 2**65),
    st.floats(),
    st.text(max_size=3),
    st.sampled_from(["\ud800", "a\udfffb", Text("sub"), Level.LOW, (1, 2), b"x", {1, 2}]),
)


def _deep(value: Any, depth: int, as_dict: bool) -> Any:
    for _ in range(depth):
        value = {"k": value} if as_dict else [value]
    return value


_CONTENT = st.one_of(
    st.recursive(
        _LEAVES,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(st.text(max_size=2), inner, max_size=3),
            st.dictionaries(st.sampled_from([1, "k", Text("t"), None]), inner, max_size=2),
            st.dictionaries(st.text(max_size=2), inner, max_size=2).map(OrderedDict),
        ),
        max_leaves=10,
    ),
    st.builds(_deep, _LEAVES | st.just([]) | st.just({}), st.integers(60, 67), st.booleans()),
)


@given(content=_CONTENT)
@settings(max_examples=examples(300), deadline=None)
def test_node_content_is_refused_exactly_as_the_rule_says(content: Any) -> None:
    try:
        _rule(content, "content")
    except InvalidInput as exc:
        with pytest.raises(InvalidInput) as refused:
            Node(id="n", content=content)
        assert str(refused.value) == str(exc)
    else:
        assert Node(id="n", content=content).content is content

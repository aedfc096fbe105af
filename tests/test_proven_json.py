"""A value walked once to find its JSON form is not walked again when its node is built (ADR 75).

The LangGraph saver decides whether each value has an exact JSON form
(``stored_values.json_form``) and then builds a node around it
(``objects.note_with_proven``), which checks the rest of the content as any node's
but skips what ``json_form`` proved. That is sound only if ``json_form`` is at
least as strict as ``check_json`` where the value sits, and if every other part
of the content, bad input included, meets the same checks, in the same order,
with the same errors, as ``Node(...)`` gives it.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import empty_checkpoint
from support.tiers import examples

from mnemosyne import InvalidInput, Node, Provenance, Repo
from mnemosyne.integrations.langgraph import MnemosyneSaver
from mnemosyne.integrations.langgraph.stored_values import MAX_JSON_DEPTH, json_form, proven
from mnemosyne.model.objects import note_with_proven
from mnemosyne.model.validation import MAX_DEPTH, check_json


class _Text(str):
    pass


class _Number(int):
    pass


# Leaves check_json refuses or json_form refuses (or both), beside ones both accept.
_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**65),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.sampled_from(["\ud800", "a\udfffb", "é", "\u202e"]),
    st.builds(_Text, st.text(max_size=3)),
    st.builds(_Number, st.integers(-5, 5)),
    st.tuples(st.integers(0, 3)),
    st.just(b"bytes"),
    st.just(uuid.UUID(int=7)),
)
_KEYS = st.one_of(
    st.text(max_size=4),
    st.sampled_from(["\ud800", "k"]),
    st.integers(0, 2),
    st.builds(_Text, st.text(max_size=2)),
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=4)),
    max_leaves=12,
)


def _error(build: Any) -> str | None:
    try:
        build()
    except InvalidInput as exc:
        return str(exc)
    return None


@given(value=_VALUES)
@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_what_json_form_accepts_check_json_accepts_where_a_node_puts_it(value: Any) -> None:
    form = json_form(value)
    if form is None:
        return
    for part in proven(form):
        for depth in range(MAX_DEPTH - MAX_JSON_DEPTH + 1):  # down to where note_with_proven still skips
            check_json(part, "content", depth)


@given(
    value=_VALUES,
    other=_VALUES,
    channel=st.one_of(st.text(max_size=4), st.sampled_from(["\ud800", "ok"]), st.integers(0, 2)),
    node_id=st.sampled_from(["a/b", "", "a//b", "x\ud800", "threads/t/c"]),
)
@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_node_built_around_proven_values_is_the_node_or_the_error_node_gives(
    value: Any, other: Any, channel: Any, node_id: str
) -> None:
    form = json_form(value)
    fields = form if form is not None else {"serde": "x", "bytes": ""}
    content = {"channel": channel, **fields, "other": other}  # "other": never proven
    provenance = Provenance(source="langgraph")
    made: list[Node] = []
    want = _error(lambda: made.append(Node(id=node_id, content=content, provenance=provenance)))
    got = _error(
        lambda: made.append(note_with_proven(node_id, content, provenance, proven(fields), MAX_JSON_DEPTH))
    )
    assert got == want
    if want is None:
        assert made[0] == made[1]
        hashes: list[list[str]] = [[], []]
        errors = [
            _error(lambda node=node, out=out: out.append(node.hash))
            for node, out in zip(made, hashes, strict=True)
        ]
        assert (errors, hashes[0]) == ([errors[0]] * 2, hashes[1])  # the same id, or the same refusal


def _nested(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize("placed", [1, MAX_DEPTH - MAX_JSON_DEPTH, MAX_DEPTH - MAX_JSON_DEPTH + 1, 20])
@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH])
def test_a_proven_value_placed_too_deep_is_walked_again(placed: int, levels: int) -> None:
    value = _nested(levels)
    assert json_form(value) is not None
    if levels == MAX_JSON_DEPTH:
        assert json_form([value]) is None  # the deepest json_form accepts
    content: Any = value
    for _ in range(placed):
        content = {"in": content}
    provenance = Provenance()
    want = _error(lambda: Node(id="a", content=content, provenance=provenance))
    got = _error(lambda: note_with_proven("a", content, provenance, (value,), MAX_JSON_DEPTH))
    assert got == want
    assert (want is None) == (placed + levels <= MAX_DEPTH)


def _put(saver: MnemosyneSaver, thread: str, values: dict[str, Any], metadata: dict[str, Any]) -> None:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = {name: 1 for name in values}
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    saver.put(config, checkpoint, metadata, {name: 1 for name in values})


@pytest.mark.parametrize(
    ("thread", "values", "metadata", "message"),
    [
        ("t\ud800", {"v": 1}, {}, "not valid UTF-8"),
        ("t", {"v": 1}, {"run_id": uuid.UUID(int=1)}, "content: UUID is not a JSON value"),
        ("t", {"v": 1}, {"run_id": math.nan}, "not a finite number"),
    ],
)
def test_bad_input_to_the_saver_is_refused_as_before_and_nothing_is_stored(
    thread: str, values: dict[str, Any], metadata: dict[str, Any], message: str
) -> None:
    # Parts of a checkpoint that are not a value proven by its JSON form are checked as ever.
    with Repo.in_memory() as repo:
        saver = MnemosyneSaver(repo)
        with pytest.raises(InvalidInput, match=message):
            _put(saver, thread, values, metadata)
        assert [branch for branch in repo.branches() if branch.startswith("threads/")] == []

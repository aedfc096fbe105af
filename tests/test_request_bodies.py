"""Request bodies of the served API: read the same on every request, and checked."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemosyne import InvalidInput
from mnemosyne.integrations.server.bodies import CommitBody, SearchBody, read_body
from mnemosyne.model.jsonform import read_nodes, type_info

_words = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
_bodies = st.fixed_dictionaries(
    {"query": _words},
    optional={
        "k": st.integers(1, 500),
        "prefix": st.one_of(st.none(), _words),
        "kind": st.sampled_from(["note", "claim", None]),
        "mode": st.sampled_from(["hybrid", "lexical", "semantic"]),
    },
)


@given(_bodies, st.integers(1, 3))
def test_a_body_reads_alike_however_often_it_is_read(body, times):
    raw = json.dumps(body).encode()
    expected = msgspec.convert(body, SearchBody)
    for _ in range(times):
        assert read_body(raw, SearchBody) == expected


@given(_bodies, st.sampled_from(["limit", "q", "Query", "filters"]))
def test_a_field_the_body_does_not_take_is_refused_by_name(body, extra):
    raw = json.dumps({**body, extra: 1}).encode()
    with pytest.raises(InvalidInput, match=f"no field {extra!r}"):
        read_body(raw, SearchBody)


def test_a_type_is_described_once():
    # Describing a type resolves its annotations (hundreds of µs): a served API
    # reads a body on every request, so the description is kept.
    assert type_info(SearchBody) is type_info(SearchBody)
    assert type_info(list[SearchBody]) is type_info(list[SearchBody])
    assert [f.name for f in type_info(SearchBody).fields][:2] == ["query", "k"]  # type: ignore[attr-defined]


_good = st.builds(lambda i: {"id": f"ok{i}", "content": "a"}, st.integers(0, 99))


@given(
    st.lists(_good, max_size=5), st.lists(_good, max_size=3), st.sampled_from(["zzz", "colour", "Content"])
)
def test_a_bad_node_is_named_by_its_place_in_the_body(before, after, field):
    nodes = [*before, {"id": "bad", "content": "b", field: 1}, *after]
    with pytest.raises(InvalidInput) as refused:
        read_body(json.dumps({"put": nodes}).encode(), CommitBody)
    assert str(refused.value).startswith(f"put[{len(before)}]: unknown field {field!r}")


@given(st.integers(0, 4), st.sampled_from(["put", "delete"]))
def test_every_face_names_a_failing_item_alike(index, field):
    # The served API (put[2]), the CLI's input (stdin line 1, [2]) and MCP's arguments
    # (nodes[2], tests/test_mcp.py): a path from what holds the value, indexes from 0.
    items: list[object] = ["ok"] * 5 if field == "delete" else [{"content": "a"}] * 5
    items[index] = 7
    with pytest.raises(InvalidInput) as served:
        read_body(json.dumps({field: items}).encode(), CommitBody)
    assert str(served.value).startswith(f"{field}[{index}]: expected ")
    if field == "put":
        with pytest.raises(InvalidInput) as typed:
            read_nodes(json.dumps(items), "stdin")
        assert str(typed.value).startswith(f"stdin line 1, [{index}]: expected ")


def test_a_missing_field_and_a_wrong_value_are_named_from_the_top_of_the_body():
    with pytest.raises(InvalidInput, match=r"^SearchBody needs 'query'$"):
        read_body(b"{}", SearchBody)
    with pytest.raises(InvalidInput, match=r"^k: expected `int`, got `str`$"):
        read_body(b'{"query": "q", "k": "3"}', SearchBody)

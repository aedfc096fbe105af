"""Request bodies of the served API: read the same on every request, and checked."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemosyne import InvalidInput
from mnemosyne.integrations.server.bodies import SearchBody, read_body
from mnemosyne.model.jsonform import type_info

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

"""The MCP server's output schemas say, field by field, what the library's JSON form holds.

The schemas (``mnemosyne.integrations.mcp_results``) are what an MCP host reads
before it calls a tool; a field the library adds, renames or drops must show
here, not as a surprise to a model. Each schema is compared, recursively, with
the JSON form of a real result of the library (every key named, none missing,
the values valid for the declared types), and every schema is compared.
"""

from __future__ import annotations

import types
from datetime import UTC, datetime
from typing import Any, Union, get_args, get_origin, get_type_hints

import pytest
from pydantic import TypeAdapter
from typing_extensions import is_typeddict

from mnemosyne import Claim, Node, Provenance, Repo, to_json
from mnemosyne.integrations import mcp_results
from mnemosyne.model.jsonform import to_builtins

SCHEMAS = {
    name: value
    for name, value in vars(mcp_results).items()
    if isinstance(value, type) and is_typeddict(value) and value.__module__ == mcp_results.__name__
}


def _is_schema(hint: Any) -> bool:
    return isinstance(hint, type) and is_typeddict(hint)


def _compare(schema: type, value: Any, where: str, seen: set[str]) -> None:
    """Every key of ``value`` is a field of ``schema`` and every field a key, recursively."""
    seen.add(schema.__name__)
    assert isinstance(value, dict), f"{where}: {value!r} is not an object"
    fields = get_type_hints(schema)
    assert set(fields) == set(value), (
        f"{where} ({schema.__name__}): the schema lacks {sorted(set(value) - set(fields))}, "
        f"the JSON form lacks {sorted(set(fields) - set(value))}"
    )
    for name, hint in fields.items():
        _compare_value(hint, value[name], f"{where}.{name}", seen)


def _compare_value(hint: Any, value: Any, where: str, seen: set[str]) -> None:
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        options = [option for option in get_args(hint) if option is not type(None)]
        if value is None:
            assert type(None) in get_args(hint), f"{where}: null where {hint} allows none"
            return
        schemas = [option for option in options if _is_schema(option) or get_origin(option) is list]
        if schemas:
            _compare_value(schemas[0], value, where, seen)
        return
    if origin is list:
        (item,) = get_args(hint)
        assert isinstance(value, list), f"{where}: {value!r} is not a list"
        for index, element in enumerate(value):
            _compare_value(item, element, f"{where}[{index}]", seen)
        return
    if _is_schema(hint):
        _compare(hint, value, where, seen)


@pytest.fixture(scope="module")
def forms() -> dict[str, list[Any]]:
    """The JSON form of real results of every kind the MCP tools return, by schema name."""
    day = datetime(2026, 6, 1, tzinfo=UTC)
    with Repo.in_memory(clock=lambda: day, embedder="hash") as repo:
        note = Node(
            id="users/mira/lang",
            content="Mira prefers German",
            provenance=Provenance(agent_step=3, observation="e1", tool_call="t", source="chat"),
            meta={"topic": "lang"},
            event_time=day,
            expires_at=datetime(2027, 1, 1, tzinfo=UTC),
        )
        first = repo.commit([note], message="e1", author="agent-7", meta={"run": "r1"})
        claim = Node(
            id="users/mira/city",
            kind="claim",
            content=Claim(subject="users/mira", predicate="city", value="Lisbon", valid_from=day),
        )
        second = repo.commit(
            [claim, Node(id="users/mira/lang", content="German, then English")], message="e2"
        )
        verified = repo.verify("users/mira/lang", by="reviewer")
        secret = repo.commit([Node(id="users/mira/secret", content="s")], message="s")
        forgot = repo.forget("users/mira/secret", "asked to", author="mira")
        again = repo.forget("users/mira/secret", "asked again", author="mira")
        hits = repo.search("German", mode="hybrid")
        context = repo.context("German")
        context_form = to_builtins(context)
        context_form["text"] = context.render()
        versions = repo.history("users/mira/lang") + repo.history("users/mira/secret")
        forms: dict[str, list[Any]] = {
            "CommitResultJSON": [to_builtins(first), to_builtins(secret)],
            "RecallJSON": [{"hits": to_builtins(hits)}],
            "ContextJSON": [context_form],
            "NodeJSON": [to_builtins(repo.get("users/mira/city"))],
            "HistoryJSON": [{"versions": to_builtins(versions)}],
            "BlameJSON": [
                to_builtins(repo.blame("users/mira/lang")),
                to_builtins(repo.blame("users/mira/city")),
            ],
            "DiffJSON": [
                to_builtins(repo.diff(first.id, second.id)),
                to_builtins(repo.diff(second.id, secret.id)),
            ],
            "LogJSON": [{"commits": to_builtins(list(repo.log()))}],
            "FactsJSON": [{"facts": to_builtins(repo.facts("users/mira"))}],
            "ForgetJSON": [to_builtins(forgot), to_builtins(again)],
            "ListJSON": [
                {
                    "nodes": to_builtins(list(repo.nodes(prefix="users/", after="users/mira/city"))),
                    "next_after": None,
                },
                {"nodes": to_builtins(list(repo.nodes()))[:1], "next_after": "users/mira/city"},
            ],
            "CommitJSON": [to_builtins(verified)],  # verify's result
        }
        removed = repo.commit(delete=["users/mira/city"], message="not erased", author="agent-7")
        forms["CommitResultJSON"].append(to_builtins(removed))  # delete's result
        assert list(removed.deleted_ids) == ["users/mira/city"] and list(verified.verified) == [
            "users/mira/lang"
        ]
        assert hits and context.items and forgot.commit is not None and again.already_erased
        assert to_json(hits[0])  # the same values the library's JSON encoder writes
        return forms


TOOL_SCHEMAS = [
    "CommitResultJSON",
    "RecallJSON",
    "ContextJSON",
    "NodeJSON",
    "HistoryJSON",
    "BlameJSON",
    "DiffJSON",
    "LogJSON",
    "FactsJSON",
    "ForgetJSON",
    "ListJSON",
    "CommitJSON",
]
"""The schemas a tool returns (the others are parts of these)."""


@pytest.mark.parametrize("name", TOOL_SCHEMAS)
def test_a_tools_output_schema_names_every_field_of_the_json_form(
    forms: dict[str, list[Any]], name: str
) -> None:
    schema = SCHEMAS[name]
    for index, form in enumerate(forms[name]):
        _compare(schema, form, f"{name}[{index}]", set())
        TypeAdapter(schema).validate_python(form, strict=False)  # and each value has its declared type


def test_every_schema_is_compared_with_a_real_result(forms: dict[str, list[Any]]) -> None:
    seen: set[str] = set()
    for name, found in forms.items():
        for form in found:
            _compare(SCHEMAS[name], form, name, seen)
    assert seen == set(SCHEMAS), f"not compared with any result: {sorted(set(SCHEMAS) - seen)}"


def test_the_comparison_notices_a_field_the_schema_lacks(forms: dict[str, list[Any]]) -> None:
    form = dict(forms["NodeJSON"][0], added_later=1)
    with pytest.raises(AssertionError, match=r"the schema lacks \['added_later'\]"):
        _compare(SCHEMAS["NodeJSON"], form, "NodeJSON", set())
    form = {key: value for key, value in forms["NodeJSON"][0].items() if key != "hash"}
    with pytest.raises(AssertionError, match=r"the JSON form lacks \['hash'\]"):
        _compare(SCHEMAS["NodeJSON"], form, "NodeJSON", set())

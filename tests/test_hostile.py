"""Hostile and malformed input, through the CLI and the Python API.

Whatever comes in - JSON of the wrong shape, duplicate keys, NaN, bytes that are
not UTF-8, nesting without end, oversized nodes, bad ids, bad revisions, paths
that are no store - the API raises a specific :class:`MnemoError` (never a bare
``ValueError``/``TypeError``/``KeyError``/``lmdb.Error``), the CLI prints one
``error:`` line with the exit code docs/cli.md documents and no traceback, and the
store is exactly as it was (fsck ok, same HEAD, same log, no object written).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from mnemo_cli.app import app
from support.components import POSTGRES
from support.tiers import examples
from typer.testing import CliRunner, Result

from mnemosyne import (
    Claim,
    ClaimConflict,
    CorruptObject,
    InvalidInput,
    MergeConflict,
    MnemoError,
    Node,
    NotFound,
    Provenance,
    Repo,
)
from mnemosyne.model import codec
from mnemosyne.model.validation import MAX_DEPTH, MAX_ID_BYTES, MAX_NODE_BYTES

runner = CliRunner()
FUZZ = settings(
    max_examples=examples(40),
    deadline=None,
    # the store fixture is shared on purpose: every example checks that it is unchanged
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
T0 = datetime(2026, 6, 1, tzinfo=UTC)

# -- helpers --------------------------------------------------------------------


def cli(path: Path, *args: str, input: str | bytes | None = None) -> Result:
    return runner.invoke(app, ["--repo", str(path), *args], input=input)


def assert_cli_error(result: Result, code: int, fragment: str = "") -> str:
    """Exit ``code``, one ``error:`` line on stderr (mentioning ``fragment``), nothing on stdout."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == code, (result.exit_code, result.output)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines
    assert fragment.lower() in lines[0].lower(), (fragment, lines[0])
    assert "Traceback" not in result.output
    assert result.stdout == ""
    return lines[0]


def state(path: Path) -> tuple[Any, ...]:
    """What must not change when input is refused: HEAD, log, branches, objects, fsck."""
    with Repo.open(path, readonly=True) as repo:
        report = repo.fsck()
        assert report.ok, report.problems
        tip = repo.resolve("HEAD").id
        return (repo.head, tip, len(list(repo.log())), repo.branch_tips(), report.objects)


class Store:
    """A small store with two branches, driven through the CLI and the API."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with Repo.init(path, clock=_ticking()) as repo:
            repo.commit(
                [
                    Node(id="users/mira/lang", content="de", provenance=Provenance(agent_step=1)),
                    Node(
                        id="mira/deadline/e1",
                        kind="claim",
                        content=Claim("mira", "deadline", "2026-07-15", T0),
                    ),
                ],
                message="first",
                author="seed",
            )
            repo.branch("side")
            repo.commit([Node(id="users/mira/lang", content="fr")], message="second", author="seed")
        self.before = state(path)
        self.pristine = (path / "data.mdb").read_bytes()

    def unchanged(self) -> None:
        assert state(self.path) == self.before

    def restore(self) -> None:
        """Put the store back if a test changed it, so one failure does not fail every later test."""
        if state(self.path) != self.before:
            (self.path / "data.mdb").write_bytes(self.pristine)


def _ticking():
    now = [T0]

    def clock() -> datetime:
        now[0] += timedelta(seconds=1)
        return now[0]

    return clock


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return Store(tmp_path_factory.mktemp("hostile") / "store")


@pytest.fixture
def store(shared_store: Store) -> Iterator[Store]:
    yield shared_store
    shared_store.restore()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MNEMO_DIR", raising=False)
    monkeypatch.setenv("MNEMO_AUTHOR", "tester")


def commit_refused(store: Store, text: str | bytes, fragment: str = "") -> str:
    line = assert_cli_error(cli(store.path, "commit", "-m", "hostile", input=text), 2, fragment)
    store.unchanged()
    return line


# -- JSON values --------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
# built rather than filtered, so hypothesis does not discard most of what it draws
numbers = st.integers(-(2**63), 2**63) | st.floats(allow_nan=False, allow_infinity=False)
arrays = st.lists(json_values, max_size=3)
objects = st.dictionaries(st.text(max_size=5), json_values, max_size=3)
not_strings = st.booleans() | numbers | arrays | objects
not_objects = st.booleans() | numbers | arrays | st.text(max_size=8)
not_integers = (
    st.booleans() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8) | arrays | objects
)
not_times = not_strings | st.sampled_from(
    [
        "",
        "yesterday",
        "2026-13-01T00:00:00Z",
        "2026-06-01T00:00:00",
        "9999-12-31T23:00:00-05:00",
        "0001-01-01T00:00:00+05:00",
        "2026-06-01T25:00:00Z",
    ]
)

BASE_NODE = {"id": "fuzz/node", "content": "v"}
BASE_CLAIM = {"subject": "mira", "predicate": "deadline", "value": 1, "valid_from": "2026-06-01T00:00:00Z"}

# field -> (strategy of wrong values, a word the error must contain)
WRONG_FIELDS: dict[str, tuple[st.SearchStrategy[Any], str]] = {
    "id": (not_strings, "id"),
    "kind": (not_strings | st.text(max_size=8).filter(lambda v: v not in ("note", "claim")), "kind"),
    "provenance": (not_objects, "provenance"),
    "event_time": (not_times, "event_time"),
    "expires_at": (not_times, "expires_at"),
    "meta": (not_objects, "meta"),
    "hash": (not_strings, "hash"),
}
WRONG_PROVENANCE: dict[str, st.SearchStrategy[Any]] = {
    "agent_step": not_integers | st.sampled_from([2**64, -(2**63) - 1, 2**80]),
    "observation": not_strings,
    "tool_call": not_strings,
    "source": not_strings,
}
WRONG_CLAIM: dict[str, st.SearchStrategy[Any]] = {
    "subject": not_strings | st.sampled_from(["", "a\x00b", "line\nbreak"]),
    "predicate": not_strings | st.sampled_from(["", "\x1f"]),
    "valid_from": not_times,
    "valid_to": not_times.filter(lambda v: v is not None),
    "confidence": st.sampled_from([-0.1, 1.5, "high", True, [], {}, 1e308]),
    "evidence": st.sampled_from(["a string", [1], [""], [None], {"a": 1}, 5]),
}


@FUZZ
@given(data=st.data())
def test_a_wrong_type_in_any_node_field_is_refused(store, data):
    field = data.draw(st.sampled_from(sorted(WRONG_FIELDS)), label="field")
    wrong, word = WRONG_FIELDS[field]
    value = data.draw(wrong, label="value")
    node = {**BASE_NODE, field: value}
    line = commit_refused(store, json.dumps(node), word)
    assert "line 1" in line  # says where
    # the API refuses the same value as InvalidInput (times arrive as datetimes there)
    if field not in ("hash",) and not (field in ("event_time", "expires_at") and isinstance(value, str)):
        kwargs = {k: v for k, v in node.items() if k != "hash"}
        if field == "provenance" and isinstance(value, list):
            kwargs["provenance"] = tuple(value)
        with pytest.raises(InvalidInput):
            Node(**kwargs)


@FUZZ
@given(data=st.data())
def test_a_wrong_type_in_provenance_is_refused(store, data):
    field = data.draw(st.sampled_from(sorted(WRONG_PROVENANCE)), label="field")
    value = data.draw(WRONG_PROVENANCE[field], label="value")
    commit_refused(store, json.dumps({**BASE_NODE, "provenance": {field: value}}), f"provenance.{field}")
    with pytest.raises(InvalidInput):
        Provenance(**{field: value})


@FUZZ
@given(data=st.data())
def test_a_wrong_claim_field_is_refused(store, data):
    field = data.draw(st.sampled_from(sorted(WRONG_CLAIM)), label="field")
    value = data.draw(WRONG_CLAIM[field], label="value")
    claim = {**BASE_CLAIM, field: value}
    commit_refused(store, json.dumps({"id": "fuzz/claim", "kind": "claim", "content": claim}), "claim")
    if field in ("valid_from", "valid_to") and isinstance(value, str):
        return  # strings are the CLI's spelling of times; the API takes datetimes
    with pytest.raises(InvalidInput):
        Claim(**{**BASE_CLAIM, "valid_from": T0, field: value})


@FUZZ
@given(content=st.booleans() | numbers | st.text(max_size=8) | st.just({"subject": "s"}) | st.just(["s"]))
def test_claim_content_that_is_no_claim_is_refused(store, content):
    commit_refused(store, json.dumps({"id": "fuzz/claim", "kind": "claim", "content": content}), "claim")


@FUZZ
@given(
    start=st.datetimes(
        min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
    ),
    back=st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=3650)),
)
def test_a_claim_that_ends_before_it_starts_is_refused(store, start, back):
    end = start - back
    claim = {**BASE_CLAIM, "valid_from": start.isoformat(), "valid_to": end.isoformat()}
    commit_refused(
        store, json.dumps({"id": "fuzz/claim", "kind": "claim", "content": claim}), "valid_to must be after"
    )
    with pytest.raises(InvalidInput, match="valid_to must be after"):
        Claim("mira", "deadline", 1, start, valid_to=end)


@FUZZ
@given(
    where=st.sampled_from(["node", "provenance", "content"]),
    name=st.text(min_size=1, max_size=12).filter(
        lambda n: (
            n not in ("id", "content", "kind", "provenance", "event_time", "meta", "expires_at", "hash")
            and n not in ("agent_step", "observation", "tool_call", "source")
            and n not in ("subject", "predicate", "value", "valid_from", "valid_to", "confidence", "evidence")
        )
    ),
)
def test_unknown_fields_are_refused(store, where, name):
    if where == "node":
        node = {**BASE_NODE, name: 1}
    elif where == "provenance":
        node = {**BASE_NODE, "provenance": {name: 1}}
    else:
        node = {"id": "fuzz/claim", "kind": "claim", "content": {**BASE_CLAIM, name: 1}}
    line = commit_refused(store, json.dumps(node))
    assert "unknown field" in line or "Object contains unknown field" in line or repr(name) in line, line


# -- ids ----------------------------------------------------------------------------

bad_ids = st.one_of(
    st.just(""),
    st.text(min_size=1, max_size=5).map(lambda s: f"a/{s}/../b"),
    st.text(min_size=1, max_size=5).map(lambda s: f"{s}//x"),
    st.sampled_from(["/lead", "trail/", "..", ".", "a/./b", "a/..", "../a", "//", "a///b"]),
    st.tuples(st.text(max_size=4), st.characters(codec="utf-8", categories=["Cc"]), st.text(max_size=4)).map(
        "".join
    ),
    st.integers(MAX_ID_BYTES + 1, MAX_ID_BYTES + 40).map(lambda n: "x" * n),
    st.just("é" * (MAX_ID_BYTES // 2 + 1)),  # 2 bytes each: over the limit in bytes, not characters
    st.just("bad\ud800surrogate"),
)


@FUZZ
@given(bad=bad_ids)
def test_bad_ids_are_refused_everywhere(store, bad):
    with pytest.raises(InvalidInput):
        Node(id=bad, content=1)  # the empty id too: only an omitted id is generated
    with Repo.open(store.path, readonly=True) as repo:
        for read in (repo.get, repo.history, repo.blame):
            with pytest.raises(InvalidInput):
                read(bad)
        with pytest.raises(InvalidInput):
            list(repo.log(node=bad))
    if "\ud800" in bad:
        return  # argv and JSON text cannot carry a lone surrogate as such
    commit_refused(store, json.dumps({"id": bad, "content": 1}), "id")
    for args in (("show", bad), ("history", bad), ("rm", bad, "-m", "x"), ("log", "--node", bad)):
        assert_cli_error(cli(store.path, *args), 2, "id")
    store.unchanged()


def test_an_empty_id_is_refused_where_an_omitted_one_is_generated(store):
    with pytest.raises(InvalidInput, match="id must not be empty"):
        Node(id="", content=1)
    with pytest.raises(InvalidInput):
        _ = Node(content=1).hash  # no id yet: no hash either
    commit_refused(store, '{"id": "", "content": 1}', "id must not be empty")


def test_an_id_with_an_escaped_lone_surrogate_is_refused(store):
    commit_refused(store, '{"id": "a\\ud800b", "content": 1}', "UTF-8")
    commit_refused(store, '{"id": "a", "content": "\\udfff"}', "UTF-8")
    commit_refused(store, '{"id": "a", "content": 1, "meta": {"\\ud800": 1}}', "UTF-8")


# -- duplicate keys, NaN, encodings, nesting ------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '{"id": "dup", "content": 1, "id": "other"}',
        '{"id": "dup", "content": 1, "content": 2}',
        '{"id": "dup", "content": {"a": 1, "a": 2}}',
        '{"id": "dup", "content": [1, {"deep": {"k": 1, "k": 1}}]}',
        '{"id": "dup", "content": 1, "meta": {"sensitivity": "low", "sensitivity": "high"}}',
        '{"id": "dup", "content": 1, "provenance": {"source": "a", "source": "b"}}',
        '{"id": "dup", "kind": "claim", "content": {"subject": "s", "predicate": "p", "value": 1, '
        '"value": 2, "valid_from": "2026-01-01"}}',
        '[{"id": "ok", "content": 1}, {"id": "dup", "content": 1, "content": 1}]',
        '{"id": "ok", "content": 1}\n{"id": "dup", "kind": "note", "kind": "note", "content": 1}',
    ],
)
def test_duplicate_keys_are_refused_not_silently_merged(store, text):
    line = commit_refused(store, text, "duplicate key")
    assert "line" in line


@pytest.mark.parametrize(
    "text",
    [
        '{"id": "n", "content": NaN}',
        '{"id": "n", "content": Infinity}',
        '{"id": "n", "content": -Infinity}',
        '{"id": "n", "content": [1, {"x": NaN}]}',
        '{"id": "n", "content": 1, "meta": {"score": Infinity}}',
        '{"id": "n", "content": 1, "provenance": {"agent_step": NaN}}',
        '{"id": "n", "content": 1, "hash": NaN}',
        '{"id": "n", "kind": "claim", "content": {"subject": "s", "predicate": "p", "value": NaN, '
        '"valid_from": "2026-01-01"}}',
    ],
)
def test_nan_and_infinity_literals_are_refused(store, text):
    commit_refused(store, text, "NaN and Infinity are refused")


@pytest.mark.parametrize("number", ["1e400", "-1e400"])
def test_floats_that_overflow_to_infinity_are_refused(store, number):
    commit_refused(store, f'{{"id": "n", "content": {number}}}', "not a finite number")


def test_nan_and_infinity_are_refused_by_the_api():
    for bad in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises(InvalidInput):
            Node(id="n", content=bad)
        with pytest.raises(InvalidInput):
            Node(id="n", content=[{"x": bad}])
        with pytest.raises(InvalidInput):
            Node(id="n", content=1, meta={"m": bad})
        with pytest.raises(InvalidInput):
            Claim("s", "p", bad, T0)
        with pytest.raises(InvalidInput):
            Claim("s", "p", 1, T0, confidence=bad)


@FUZZ
@given(
    prefix=st.sampled_from(['{"id": "u", "content": "', '{"id": "', '[{"id": "u", "content": 1}, "']),
    junk=st.binary(min_size=1, max_size=8).filter(lambda b: not _is_utf8(b)),
)
def test_bytes_that_are_not_utf8_are_refused(store, tmp_path_factory, prefix, junk):
    text = prefix.encode() + junk + b'"}'
    commit_refused(store, text, "not UTF-8")
    file = tmp_path_factory.mktemp("bytes") / "nodes.json"
    file.write_bytes(text)
    line = assert_cli_error(cli(store.path, "commit", "-m", "x", str(file)), 2, "not UTF-8")
    assert str(file) in line
    store.unchanged()


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@pytest.mark.parametrize("opener,closer", [("[", "]"), ('{"a": ', "}")])
def test_nesting_deeper_than_max_depth_is_refused(store, opener, closer):
    def nested(depth: int) -> str:
        return opener * depth + "0" + closer * depth

    # MAX_DEPTH containers are accepted (a control: the limit is not lower than documented) ...
    with Repo.in_memory() as repo:
        repo.commit([Node(id="deep", content=json.loads(nested(MAX_DEPTH)))])
    # ... one more is refused, in content and in meta
    commit_refused(store, f'{{"id": "deep", "content": {nested(MAX_DEPTH + 1)}}}', "nested deeper")
    commit_refused(
        store, f'{{"id": "deep", "content": 1, "meta": {{"m": {nested(MAX_DEPTH)}}}}}', "nested deeper"
    )
    # so deep that the JSON parser itself would overflow the stack
    commit_refused(store, f'{{"id": "deep", "content": {nested(200_000)}}}', "nested too deeply")


def test_deep_python_values_are_refused_by_the_api_without_recursion_errors():
    value: Any = 0
    for _ in range(100_000):
        value = [value]
    with pytest.raises(InvalidInput, match="nested deeper"):
        Node(id="deep", content=value)
    with Repo.in_memory() as repo:
        with pytest.raises(InvalidInput, match="nested deeper"):
            repo.commit([Node(id="x", content=1)], meta={"m": value})


@FUZZ
@given(text=st.text(max_size=60))
def test_arbitrary_text_as_commit_input_never_crashes(store, text):
    result = cli(store.path, "commit", "-m", "fuzz", input=text)
    assume(result.exit_code != 0)  # the odd valid node: nothing to check here
    assert_cli_error(result, 2)
    store.unchanged()


@FUZZ
@given(value=json_values)
def test_arbitrary_json_as_commit_input_is_refused_or_committed(store, value):
    result = cli(store.path, "commit", "-m", "fuzz", input=json.dumps(value))
    assert result.exit_code != 0 or isinstance(value, dict | list), value
    assume(result.exit_code != 0)
    assert_cli_error(result, 2)
    store.unchanged()


# -- size limits --------------------------------------------------------------------


def _overhead() -> int:
    return len(codec.encode(Node(id="big", content="x" * 70_000))) - 70_000


def test_max_node_bytes_is_enforced_on_commit_at_the_boundary():
    at_limit = "x" * (MAX_NODE_BYTES - _overhead())
    assert len(codec.encode(Node(id="big", content=at_limit))) == MAX_NODE_BYTES
    with Repo.in_memory() as repo:
        first = repo.commit([Node(id="big", content=at_limit)], message="at the limit")
        with pytest.raises(InvalidInput, match="at most"):
            repo.commit([Node(id="big", content=at_limit + "y")], message="one byte over")
        with pytest.raises(InvalidInput, match="at most"):  # meta counts too
            repo.commit([Node(id="big2", content="v", meta={"blob": at_limit})])
        assert repo.resolve("HEAD").id == first.id
        assert len(repo.get("big").content) == len(at_limit)


def test_an_oversized_node_is_refused_by_the_cli(store):
    huge = json.dumps({"id": "huge", "content": "x" * (MAX_NODE_BYTES + 1)})
    commit_refused(store, huge, "at most")


def test_an_oversized_merge_resolution_is_refused(tmp_path):
    with Repo.init(tmp_path / "s") as repo:
        repo.commit([Node(id="k", content="base")])
        repo.branch("other")
        repo.commit([Node(id="k", content="ours")])
        repo.switch("other")
        repo.commit([Node(id="k", content="theirs")])
        repo.switch("main")
        before = repo.resolve("HEAD").id
        giant = Node(id="k", content="x" * (MAX_NODE_BYTES + 1))
        with pytest.raises(InvalidInput, match="at most"):
            repo.merge("other", resolutions={"k": giant})
        assert repo.resolve("HEAD").id == before
        assert repo.fsck().ok


# -- revisions ---------------------------------------------------------------------------

BAD_REVISIONS = [
    # (revision, exception, exit code)
    ("abc", NotFound, 3),  # too short for a prefix, and no such branch
    ("a", NotFound, 3),
    ("zzzz", NotFound, 3),  # not hex
    ("ghij1234", NotFound, 3),
    ("0" * 64, NotFound, 3),  # a full id of no object
    ("deadbeef", NotFound, 3),  # an unknown prefix
    ("HEAD@{not a time}", InvalidInput, 2),
    ("main@{yesterday}", InvalidInput, 2),
    ("main@{2026-13-01}", InvalidInput, 2),
    ("main@{}", InvalidInput, 2),
    ("main@{", InvalidInput, 2),
    ("@{2026-01-01}", InvalidInput, 2),
    ("main@{1990-01-01}", NotFound, 3),  # before the branch existed
    ("nope@{2026-06-01}", NotFound, 3),
    ("HEAD~x", InvalidInput, 2),
    ("HEAD~1000", NotFound, 3),
    ("HEAD^2", NotFound, 3),
    ("", InvalidInput, 2),
    ("no/such/branch", NotFound, 3),
]


@pytest.mark.parametrize("rev,error,code", BAD_REVISIONS)
def test_bad_revisions_are_refused_by_the_api(store, rev, error, code):
    with Repo.open(store.path) as repo:
        calls = [
            lambda: repo.resolve(rev),
            lambda: repo.get("users/mira/lang", at=rev),
            lambda: list(repo.nodes(at=rev)),
            lambda: list(repo.log(at=rev)),
            lambda: repo.diff(rev, "HEAD"),
            lambda: repo.blame("users/mira/lang", at=rev),
            lambda: repo.facts("mira", at=rev),
            lambda: repo.branch("fresh", at=rev),
            lambda: repo.reset("side", rev),
            lambda: repo.merge(rev),
            lambda: repo.revert(rev),
            lambda: repo.commit([Node(id="n", content=1)], parent=rev),
        ]
        for call in calls:
            with pytest.raises(error):
                call()
    store.unchanged()


@pytest.mark.parametrize("rev,error,code", BAD_REVISIONS)
def test_bad_revisions_are_refused_by_the_cli(store, rev, error, code):
    for args in (
        ("log", rev),
        ("show", "users/mira/lang", "--at", rev),
        ("ls", "--at", rev),
        ("diff", rev, "HEAD"),
        ("blame", "users/mira/lang", "--at", rev),
        ("branch", "fresh", "--from", rev),
        ("reset", "side", rev),
        ("revert", rev),
        ("merge", rev),
    ):
        assert_cli_error(cli(store.path, *args), code)
    assert_cli_error(
        cli(store.path, "commit", "-m", "x", "--parent", rev, input='{"id": "n", "content": 1}'), code
    )
    store.unchanged()


@pytest.mark.parametrize(
    "when", ["not a time", "2026-02-30", "2026-06-01T00:00:00", "9999-12-31T23:00:00-05:00"]
)
def test_bad_as_of_times_are_refused_by_the_cli(store, when):
    for args in (
        ("log", "--as-of", when),
        ("ls", "--as-of", when),
        ("show", "users/mira/lang", "--as-of", when),
    ):
        assert_cli_error(cli(store.path, *args), 2)
    assert_cli_error(cli(store.path, "facts", "mira", "--valid-at", when), 2)
    store.unchanged()


@pytest.fixture(scope="module")
def ambiguous(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, list[str]]:
    """A store with two commits whose ids share their first 4 hex characters."""
    path = tmp_path_factory.mktemp("ambiguous") / "store"
    seen: dict[str, str] = {}
    with Repo.init(path, clock=_ticking(), sync=False) as repo:
        for i in range(5000):
            made = repo.commit([Node(id="counter", content=i)], message=str(i))
            prefix = made.id[:4]
            if prefix in seen:
                return path, prefix, [seen[prefix], made.id]
            seen[prefix] = made.id
    raise AssertionError("no two commits shared a prefix")  # pragma: no cover


def test_an_ambiguous_prefix_is_refused_and_a_longer_one_resolves(ambiguous):
    path, prefix, ids = ambiguous
    with Repo.open(path) as repo:
        tip = repo.resolve("HEAD").id
        with pytest.raises(InvalidInput, match="ambiguous"):
            repo.resolve(prefix)
        with pytest.raises(InvalidInput, match="ambiguous"):
            repo.reset("main", prefix)
        assert repo.resolve("HEAD").id == tip
        for full in ids:
            longer = full[: next(n for n in range(5, 65) if sum(i.startswith(full[:n]) for i in ids) == 1)]
            assert repo.resolve(longer).id == full
            assert repo.resolve(longer.upper()).id == full
    for args in (("log", prefix), ("show", "counter", "--at", prefix), ("reset", "main", prefix)):
        assert_cli_error(runner.invoke(app, ["--repo", str(path), *args]), 2, "ambiguous")
    with Repo.open(path, readonly=True) as repo:
        assert repo.resolve("HEAD").id == tip


@FUZZ
@given(rev=st.text(max_size=20))
def test_arbitrary_revisions_raise_only_mnemo_errors(store, rev):
    with Repo.open(store.path, readonly=True) as repo:
        for call in (
            lambda: repo.resolve(rev),
            lambda: list(repo.log(at=rev, limit=3)),
            lambda: repo.get("users/mira/lang", at=rev),
            lambda: repo.diff(rev, "main"),
        ):
            try:
                call()
            except (NotFound, InvalidInput):
                pass
    result = cli(store.path, "log", "-n", "1", "--", rev)
    assert result.exit_code in (0, 2, 3), result.output
    if result.exit_code:
        assert_cli_error(result, result.exit_code)


# -- the API with arguments of the wrong type ------------------------------------------

WRONG_VALUES = [None, 5, -1, 1.5, float("nan"), True, b"bytes", [], ["a"], {}, {"a": 1}, object(), T0, ("a",)]


def _api_calls(repo: Repo) -> dict[str, Any]:
    """Each entry: a call taking one argument that is not what the API wants."""
    node = Node(id="q", content=1)
    return {
        "get(id)": lambda v: repo.get(v),
        "get(at)": lambda v: repo.get("users/mira/lang", at=v),
        "get(as_of)": lambda v: repo.get("users/mira/lang", as_of=v),
        "nodes(at)": lambda v: list(repo.nodes(at=v)),
        "nodes(prefix)": lambda v: list(repo.nodes(prefix=v)),
        "nodes(as_of)": lambda v: list(repo.nodes(as_of=v)),
        "log(at)": lambda v: list(repo.log(at=v)),
        "log(node)": lambda v: list(repo.log(node=v)),
        "log(limit)": lambda v: list(repo.log(limit=v)),
        "log(as_of)": lambda v: list(repo.log(as_of=v)),
        "history(id)": lambda v: repo.history(v),
        "history(at)": lambda v: repo.history("users/mira/lang", at=v),
        "facts(valid_at)": lambda v: repo.facts("mira", valid_at=v),
        "blame(id)": lambda v: repo.blame(v),
        "diff(a)": lambda v: repo.diff(v, "HEAD"),
        "diff(as_of)": lambda v: repo.diff("main", "side", as_of=v),
        "resolve(rev)": lambda v: repo.resolve(v),
        "branch(name)": lambda v: repo.branch(v),
        "branch(at)": lambda v: repo.branch("fresh", at=v),
        "branch(author)": lambda v: repo.branch("fresh", author=v),
        "delete_branch(name)": lambda v: repo.delete_branch(v),
        "delete_branch(author)": lambda v: repo.delete_branch("side", author=v),
        "switch(name)": lambda v: repo.switch(v),
        "reset(branch)": lambda v: repo.reset(v, "HEAD"),
        "reset(to)": lambda v: repo.reset("side", v),
        "reset(author)": lambda v: repo.reset("side", "main", author=v),
        "merge(source)": lambda v: repo.merge(v),
        "merge(into)": lambda v: repo.merge("side", into=v),
        "merge(resolutions)": lambda v: repo.merge("side", resolutions=v),
        "merge(strategy)": lambda v: repo.merge("side", strategy=v),
        "merge(message)": lambda v: repo.merge("side", message=v),
        "merge(author)": lambda v: repo.merge("side", author=v),
        "revert(commit)": lambda v: repo.revert(v),
        "revert(author)": lambda v: repo.revert("HEAD", author=v),
        "commit(put)": lambda v: repo.commit(put=v),
        "commit(delete)": lambda v: repo.commit(delete=v),
        "commit(message)": lambda v: repo.commit([node], message=v),
        "commit(author)": lambda v: repo.commit([node], author=v),
        "commit(branch)": lambda v: repo.commit([node], branch=v),
        "commit(parent)": lambda v: repo.commit([node], parent=v),
        "commit(meta)": lambda v: repo.commit([node], meta=v),
        "commit(on_claim_conflict)": lambda v: repo.commit([node], on_claim_conflict=v),
        "drop_tenant(name)": lambda v: repo.drop_tenant(v),
        "Node(id)": lambda v: Node(id=v, content=1),
        "Node(content)": lambda v: Node(id="a", content=v),
        "Node(kind)": lambda v: Node(id="a", content=1, kind=v),
        "Node(provenance)": lambda v: Node(id="a", content=1, provenance=v),
        "Node(event_time)": lambda v: Node(id="a", content=1, event_time=v),
        "Node(meta)": lambda v: Node(id="a", content=1, meta=v),
        "Node(expires_at)": lambda v: Node(id="a", content=1, expires_at=v),
        "Claim(subject)": lambda v: Claim(v, "p", 1, T0),
        "Claim(value)": lambda v: Claim("s", "p", v, T0),
        "Claim(valid_from)": lambda v: Claim("s", "p", 1, v),
        "Claim(confidence)": lambda v: Claim("s", "p", 1, T0, confidence=v),
        "Claim(evidence)": lambda v: Claim("s", "p", 1, T0, evidence=v),
        "claim node(content)": lambda v: Node(id="a", kind="claim", content=v),
        "Repo.open(path)": lambda v: Repo.open(v),
        "Repo.open(tenant)": lambda v: Repo.open(repo.path, tenant=v),
    }


def test_api_arguments_of_the_wrong_type_raise_only_mnemo_errors(tmp_path):
    """Every call with every wrong value: nothing but MnemoError escapes; a refusal writes nothing."""
    store = Store(tmp_path / "store")
    escaped = []
    with Repo.open(store.path) as repo:

        def refs() -> tuple[Any, ...]:
            return (repo.head, repo.branch_tips(), len(list(repo.log())))

        for name, call in _api_calls(repo).items():
            for value in WRONG_VALUES:
                before = refs()
                try:
                    result = call(value)
                except MnemoError:
                    assert refs() == before, (name, value)
                    continue
                except Exception as exc:  # what we are looking for
                    escaped.append(f"{name} with {value!r}: {type(exc).__name__}: {exc}")
                    continue
                if isinstance(result, Repo):
                    result.close()
        report = repo.fsck()
    assert escaped == []
    assert report.ok, report.problems


@pytest.mark.parametrize("backend", ["lmdb", POSTGRES])
@pytest.mark.parametrize("author", [None, 5, b"x", ["x"], "bad\ud800"])
def test_authors_and_messages_that_are_no_text_never_poison_the_store(request, tmp_path, author, backend):
    """A reflog entry or commit with a non-string author would break every later read."""
    where = request.getfixturevalue("pg_url") if backend == "postgres" else tmp_path / "s"
    with Repo.init(where) as repo:
        repo.commit([Node(id="k", content="base")])
        repo.branch("other")
        repo.commit([Node(id="k", content="ours"), Node(id="o", content=1)])
        repo.switch("other")
        repo.commit([Node(id="t", content="theirs")])
        repo.switch("main")
        before = (repo.resolve("HEAD").id, repo.branch_tips(), len(list(repo.log())))
        writes = [
            lambda: repo.branch("x", author=author),
            lambda: repo.reset("other", "main", author=author),
            lambda: repo.delete_branch("other", author=author),
            lambda: repo.merge("other", author=author),
            lambda: repo.merge("other", message=author),
            lambda: repo.commit([Node(id="n", content=1)], author=author),
            lambda: repo.commit([Node(id="n", content=1)], message=author),
            lambda: repo.revert("HEAD", author=author),
        ]
        for write in writes:
            if write is writes[4] and author is None:
                continue  # message=None means the default merge message
            with pytest.raises(InvalidInput):
                write()
        assert (repo.resolve("HEAD").id, repo.branch_tips(), len(list(repo.log()))) == before
        assert repo.fsck().ok
        assert repo.merge("other", author="fine").commit is not None  # the store still works


def test_text_args_that_are_not_utf8_are_refused_by_the_cli(store):
    bad = "\udcff"  # how Python spells a non-UTF-8 byte from argv
    node = '{"id": "n", "content": 1}'
    assert_cli_error(cli(store.path, "commit", "-m", bad, input=node), 2, "UTF-8")
    assert_cli_error(cli(store.path, "commit", "-m", "x", "--author", bad, input=node), 2)
    assert_cli_error(cli(store.path, "branch", "fresh", "--author", bad), 2)
    assert_cli_error(cli(store.path, "show", f"a{bad}"), 2)
    assert_cli_error(cli(store.path, "branch", f"b{bad}"), 2)
    store.unchanged()


def test_merge_resolutions_of_the_wrong_shape(tmp_path):
    with Repo.init(tmp_path / "s") as repo:
        repo.commit([Node(id="k", content="base")])
        repo.branch("other")
        repo.commit([Node(id="k", content="ours")])
        repo.switch("other")
        repo.commit([Node(id="k", content="theirs")])
        repo.switch("main")
        tip = repo.resolve("HEAD").id
        for resolutions, error in (
            ({"k": "mine"}, InvalidInput),
            ({"k": 5}, InvalidInput),
            ({"k": Node(id="other", content=1)}, InvalidInput),
            ({5: "ours"}, InvalidInput),
            ({"nope": "ours"}, MergeConflict),
            ("ours", InvalidInput),
            (["k"], InvalidInput),
        ):
            with pytest.raises(error):
                repo.merge("other", resolutions=resolutions)
        assert repo.resolve("HEAD").id == tip
        with pytest.raises(ClaimConflict):  # and claims still guard themselves
            repo.commit(
                [
                    Node(id="c1", kind="claim", content=Claim("s", "p", 1, T0)),
                    Node(id="c2", kind="claim", content=Claim("s", "p", 2, T0)),
                ]
            )
        assert repo.resolve("HEAD").id == tip
        assert repo.fsck().ok


# -- paths that are no store ------------------------------------------------------------


def _directory_state(path: Path) -> dict[str, bytes | None]:
    if path.is_file():
        return {"": path.read_bytes()}
    return {
        str(p.relative_to(path)): p.read_bytes() if p.is_file() else None for p in sorted(path.rglob("*"))
    }


def _non_stores(root: Path, store: Store) -> dict[str, tuple[Path, type[MnemoError], int]]:
    root.mkdir()
    cases: dict[str, tuple[Path, type[MnemoError], int]] = {}
    (root / "empty").mkdir()
    cases["empty dir"] = (root / "empty", NotFound, 3)
    (root / "garbage").mkdir()
    (root / "garbage" / "data.mdb").write_bytes(os.urandom(20_000))
    cases["garbage data.mdb"] = (root / "garbage", CorruptObject, 5)
    (root / "zero").mkdir()
    (root / "zero" / "data.mdb").write_bytes(b"")
    cases["empty data.mdb"] = (root / "zero", NotFound, 3)
    (root / "textfile").write_text("not a store\n")
    cases["regular file"] = (root / "textfile", NotFound, 3)
    (root / "dirfile").mkdir()
    (root / "dirfile" / "data.mdb").mkdir()
    cases["data.mdb is a directory"] = (root / "dirfile", NotFound, 3)
    real = (store.path / "data.mdb").read_bytes()
    for cut in (100, 4096, 8192, 8192 + 100, len(real) // 2, len(real) - 4096):
        where = root / f"cut{cut}"
        where.mkdir()
        (where / "data.mdb").write_bytes(real[:cut])
        cases[f"data.mdb cut at {cut}"] = (where, CorruptObject, 5)
    return cases


def test_paths_that_are_no_store_are_refused_by_the_api_without_changing_them(tmp_path, store):
    cases = _non_stores(tmp_path / "cases", store)
    script = textwrap.dedent(
        """
        import json, sys
        from mnemosyne import MnemoError, Repo
        out = {}
        for name, path in json.loads(sys.argv[1]).items():
            for readonly in (False, True):
                try:
                    Repo.open(path, readonly=readonly).close()
                    out[f"{name}/{readonly}"] = "opened"
                except MnemoError as exc:
                    out[f"{name}/{readonly}"] = type(exc).__name__
        print(json.dumps(out))
        """
    )
    before = {name: _directory_state(path) for name, (path, _, _) in cases.items()}
    # in a child process: opening a truncated LMDB file used to kill the process with SIGBUS
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps({n: str(p) for n, (p, _, _) in cases.items()})],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, (done.returncode, done.stderr)
    outcome = json.loads(done.stdout)
    for name, (_, error, _) in cases.items():
        for readonly in (False, True):
            assert outcome[f"{name}/{readonly}"] == error.__name__, (name, readonly, outcome)
    assert {name: _directory_state(path) for name, (path, _, _) in cases.items()} == before


def test_paths_that_are_no_store_are_refused_by_the_cli(tmp_path, store):
    cases = _non_stores(tmp_path / "cases", store)
    script = textwrap.dedent(
        """
        import json, sys
        from typer.testing import CliRunner
        from mnemo_cli.app import app
        runner = CliRunner()
        out = {}
        for name, path in json.loads(sys.argv[1]).items():
            for args in (["log"], ["ls"], ["fsck"], ["show", "a"], ["branch"], ["commit", "-m", "x"]):
                result = runner.invoke(app, ["--repo", path, *args], input='{"id": "a", "content": 1}')
                out[f"{name}/{args[0]}"] = [result.exit_code, result.stderr, result.stdout,
                                            repr(result.exception)]
        print(json.dumps(out))
        """
    )
    before = {name: _directory_state(path) for name, (path, _, _) in cases.items()}
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps({n: str(p) for n, (p, _, _) in cases.items()})],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, (done.returncode, done.stderr)
    for key, (code, stderr, stdout, exception) in json.loads(done.stdout).items():
        name = key.rsplit("/", 1)[0]
        _, _, expected = cases[name]
        assert code == expected, (key, code, stderr, exception)
        assert stderr.count("\n") == 1 and stderr.startswith("error: "), (key, stderr)
        assert "Traceback" not in stderr and stdout == "", key
    assert {name: _directory_state(path) for name, (path, _, _) in cases.items()} == before


def test_init_refuses_non_empty_and_non_directory_paths(tmp_path, store):
    (tmp_path / "file").write_text("x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "other.txt").write_text("keep me")
    for target, fragment in (
        (tmp_path / "file", "not a directory"),
        (tmp_path / "full", "not empty"),
        (store.path, "already exists"),
    ):
        with pytest.raises(InvalidInput, match=fragment):
            Repo.init(target)
        assert_cli_error(runner.invoke(app, ["init", str(target)]), 2, fragment)
    assert (tmp_path / "full" / "other.txt").read_text() == "keep me"
    assert sorted(p.name for p in (tmp_path / "full").iterdir()) == ["other.txt"]
    store.unchanged()

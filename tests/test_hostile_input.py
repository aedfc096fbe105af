"""Hostile input that once escaped as a crash or left a trace (issue 22, item 18).

An integer of 100,000 digits in node JSON is refused as a 30-digit one is (exit
2, one line naming where it sits), through every reader: files and stdin,
``--meta`` and ``--equals`` values, ``from_json``, ``Node(...)`` and MCP
arguments. A failed ``import`` into a place that held no store removes what it
created, and nothing else; its errors show stray bytes in hex.
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.cli_harness import CliStore, assert_error, invoke

from mnemosyne import Claim, InvalidInput, Node, Provenance, Repo, from_json, import_store
from mnemosyne.admin.export_file import read_records, write_records
from mnemosyne.api.backup import export_store

pytestmark = pytest.mark.usefixtures("clean_cli_env")

HUGE = "9" * 100_000
"""Far past the 4,300 digits Python converts (it raises ValueError beyond)."""


@pytest.fixture
def store(tmp_path: Path) -> CliStore:
    return CliStore(tmp_path / "s.mnemo")


# -- huge integers ---------------------------------------------------------------------


def test_a_huge_integer_in_node_json_is_invalid_input_naming_where(store: CliStore, tmp_path: Path) -> None:
    (tmp_path / "big.json").write_text(f'{{"id": "a", "content": {HUGE}}}\n')
    assert_error(
        store.run("commit", "-m", "x", str(tmp_path / "big.json")),
        2,
        "big.json line 1: content: an integer of 100,000 digits is outside the 64-bit range",
    )
    # As a 30-digit one is: exit 2 too.
    assert_error(store.run("commit", "-m", "x", input='{"content": ' + "9" * 30 + "}"), 2, "64-bit range")
    # Deep in a value, in the second of several values, negative: the place is named.
    lines = '{"id": "ok", "content": 1}\n' + f'{{"id": "b", "content": "x", "meta": {{"n": [1, -{HUGE}]}}}}\n'
    assert_error(
        store.run("commit", "-m", "x", input=lines),
        2,
        "stdin line 2: meta.n[1]: an integer of 100,000 digits",
    )
    assert_error(
        store.run("commit", "-m", "x", input=f'[{{"content": 1}}, {{"content": {{"a": {HUGE}}}}}]'),
        2,
        "stdin line 1: [1].content.a: an integer of 100,000 digits",
    )
    assert store.lines("log") == []  # nothing was written


def test_the_python_api_refuses_huge_integers_as_invalid_input() -> None:
    with pytest.raises(InvalidInput, match=r"input line 1: content: an integer of 100,000 digits"):
        from_json(f'{{"id": "a", "content": {HUGE}}}', Node)
    huge = 10**5000
    claim_at = "2026-01-01T00:00:00Z"
    for build, fragment in [
        (lambda: Node(id="a", content=huge), "content: an integer of 5,001 digits"),
        (lambda: Node(id="a", content="x", meta={"n": [huge]}), "meta: an integer of 5,001 digits"),
        (lambda: Node(id="a", content=-huge), "content: an integer of 5,001 digits"),
        (lambda: Node(id="a", content=10**25), "content: integer 1" + "0" * 25 + " is outside"),
        (lambda: Provenance(agent_step=huge), "provenance.agent_step: an integer of 5,001 digits"),
        (
            lambda: Node(
                id="a",
                kind="claim",
                content={"subject": "s", "predicate": "p", "value": huge, "valid_from": claim_at},
            ),
            "claim value: an integer of 5,001 digits",
        ),
        (
            lambda: Claim("s", "p", 1, datetime(2026, 1, 1, tzinfo=UTC), confidence=huge),
            "claim confidence must be between 0 and 1",
        ),
        (lambda: Node(id="a", content="x", kind=huge), "kind must be 'note' or 'claim', not int"),  # type: ignore[arg-type]
    ]:
        with pytest.raises(InvalidInput, match=fragment):
            build()


def test_option_values_read_as_json_refuse_huge_integers(store: CliStore) -> None:
    store.put({"id": "a", "content": "alpha", "meta": {"lang": "de", "n": 3}})
    assert_error(
        store.run("search", "alpha", "--meta", f"n={HUGE}"), 2, "--meta n: an integer of 100,000 digits"
    )
    assert_error(
        store.run("search", "alpha", "--meta", "n=" + "9" * 21), 2, "--meta n: an integer of 21 digits"
    )
    # What is not JSON is text, as before; NaN is not JSON.
    assert [hit["id"] for hit in store.lines("search", "alpha", "--meta", "lang=de", "--meta", "n=3")] == [
        "a"
    ]
    assert store.run("search", "alpha", "--meta", "lang=NaN").stderr == "no memories match\n"
    head = store.lines("log")[0]["id"]
    assert_error(
        store.run("bisect", "--good", head, "--bad", head, "--equals", "a", HUGE),
        2,
        "--equals VALUE: an integer of 100,000 digits",
    )


@pytest.mark.slow  # an MCP session
def test_a_huge_integer_in_mcp_arguments_is_a_one_line_tool_error(tmp_path: Path) -> None:
    from support.components import need_module

    need_module("mcp")
    import anyio
    from mcp import Client

    from mnemosyne.integrations.mcp_server import build_server

    with Repo.init(tmp_path / "agent.mnemo") as repo:

        async def call() -> Any:
            async with Client(build_server(repo)) as client:  # type: ignore[arg-type]
                return await client.call_tool("remember", {"nodes": [{"content": 10**5000}], "message": "m"})

        result = anyio.run(call)
        assert result.is_error
        (block,) = result.content
        assert "nodes[0]: content: an integer of 5,001 digits is outside the 64-bit range" in block.text
        assert "\n" not in block.text and "ValueError" not in block.text
        assert list(repo.log()) == []


# -- a failed import ---------------------------------------------------------------------


def export_with(edit: Any) -> bytes:
    """An export of a one-commit store, its records passed through ``edit``, its digest made right."""
    with Repo.in_memory() as repo:
        repo.commit([Node(id="a", content="x")], message="one")
        out = io.BytesIO()
        export_store(repo, out)
    records = list(read_records(io.BytesIO(out.getvalue())))
    edited = io.BytesIO()
    write_records(edited, edit(records))
    return edited.getvalue()


def bad_ref(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for record in records:
        if record["kind"] == "ref" and record["key"] != b"HEAD":
            record["key"] = b"\x11\x00refs/heads/\xff"
    return records


def bad_head(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for record in records:
        if record["kind"] == "ref" and record["key"] == b"HEAD":
            record["value"] = b"\x01\x02"
    return records


def test_a_failed_import_removes_the_store_and_directories_it_created(tmp_path: Path) -> None:
    (tmp_path / "bad.mnemo").write_bytes(export_with(bad_ref))
    hexed = "1100726566732f68656164732fff (hex, 14 bytes) is not a ref name"
    assert_error(invoke("--repo", "new", "import", "bad.mnemo"), 2, hexed)
    assert_error(invoke("--repo", "deep/er/store", "import", "bad.mnemo"), 2, hexed)
    assert_error(invoke("import", "bad.mnemo"), 2, hexed)  # into ./.mnemo
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.mnemo"]

    # A directory that was there (empty) stays, empty again; what was beside it too.
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept-sibling").write_text("mine")
    assert_error(invoke("--repo", "kept", "import", "bad.mnemo"), 2, hexed)
    assert list((tmp_path / "kept").iterdir()) == []
    assert (tmp_path / "kept-sibling").read_text() == "mine"

    # The Python API cleans up as the command does.
    with pytest.raises(InvalidInput, match=r"HEAD holds 0102 \(hex, 2 bytes\), not a branch"):
        import_store(tmp_path / "api" / "store", io.BytesIO(export_with(bad_head)))
    assert not (tmp_path / "api").exists()


def test_a_failed_import_into_a_store_that_was_there_leaves_it(tmp_path: Path) -> None:
    (tmp_path / "bad.mnemo").write_bytes(export_with(bad_ref))
    assert invoke("init", "empty").exit_code == 0
    before = sorted(p.name for p in (tmp_path / "empty").iterdir())
    assert_error(invoke("--repo", "empty", "import", "bad.mnemo"), 2, "is not a ref name")
    assert sorted(p.name for p in (tmp_path / "empty").iterdir()) == before
    with Repo.open(tmp_path / "empty") as repo:
        assert repo.head == "main" and repo.branches() == []
    # And a good import still works where the failed ones were.
    (tmp_path / "good.mnemo").write_bytes(export_with(lambda records: records))
    done = invoke("--repo", "new", "--json", "import", "good.mnemo")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["ok"] is True

"""``mnemo mcp``: strict arguments, resources instead of empty promises, and list, delete, verify.

Driven by the SDK's own client as in tests/test_mcp.py (in-process, and one test
over stdio with a real ``mnemo mcp`` process). Without the ``mcp`` extra the
module is skipped, except under CI, where that is a failure.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.cli_harness import assert_error, invoke
from support.components import unavailable

from mnemosyne import Claim, InvalidInput, Node, NotFound, Repo

try:
    from mcp.client.stdio import StdioServerParameters
    from mcp.shared.exceptions import MCPError
    from mcp_types import TextResourceContents
    from support.mcp_client import Session, connected, failed, lib_form

    from mnemosyne.integrations.mcp_server import LIST_LIMIT, LIST_MAX, build_server
except ImportError as missing:
    unavailable(f"the 'mcp' extra is not installed ({missing})", module_level=True)

READS = {"recall", "context", "get", "list", "history", "blame", "diff", "log", "facts"}
CLAIM = Claim(subject="mira", predicate="city", value="Lisbon", valid_from=datetime(2026, 6, 1, tzinfo=UTC))


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Repo]:
    with Repo.init(tmp_path / "agent.mnemo") as opened:
        opened.use_embedder(None)  # these tests are about the tools, not about ranking
        yield opened


def _notes(repo: Repo, *ids: str, message: str = "notes") -> str:
    """Commit a note at each id; the commit's id."""
    return repo.commit([Node(id=i, content=f"note {i}") for i in ids], message=message).id


def _state(repo: Repo) -> tuple[Any, ...]:
    """What a write would change: every branch tip, and the redaction records."""
    tips = tuple((name, commit.id) for name, commit in repo.branch_tips())
    erased = repo.redactions(v.hash for i in ("notes/a", "notes/b", "notes/c") for v in repo.history(i))
    return tips, tuple(sorted(erased))


def _text(contents: Any) -> Any:
    """The JSON document of a resource read: one text block, as JSON."""
    (block,) = contents.contents
    assert isinstance(block, TextResourceContents) and block.mime_type == "application/json"
    return json.loads(block.text)


# -- item 4: every tool refuses an argument it does not take ----------------------------


@pytest.mark.slow  # every tool, twice
def test_every_tool_refuses_an_argument_it_does_not_take_naming_those_it_does(repo: Repo) -> None:
    first = _notes(repo, "notes/a", "notes/b", "notes/c")
    repo.commit([Node(id="claims/mira/city", kind="claim", content=CLAIM)], message="claim")
    # Arguments each tool would accept: alone, each call succeeds (checked below).
    valid: dict[str, dict[str, Any]] = {
        "remember": {"nodes": [{"id": "notes/new", "content": "new"}], "message": "m"},
        "recall": {"query": "note"},
        "context": {"query": "note", "budget_tokens": 50},
        "get": {"id": "notes/a"},
        "list": {"prefix": "notes/"},
        "history": {"id": "notes/a"},
        "blame": {"id": "notes/a"},
        "diff": {"a": first, "b": "HEAD"},
        "log": {"limit": 1},
        "facts": {"subject": "mira"},
        "delete": {"ids": ["notes/b"], "message": "m"},
        "verify": {"ids": ["notes/a"]},
        "forget": {"id": "notes/c", "reason": "r"},
    }
    before = _state(repo)
    with connected(build_server(repo, allow_erase=True)) as (agent,):
        tools = agent.tools()
        assert set(tools) == set(valid), "every tool the server lists is checked"
        for name, tool in tools.items():
            takes = list(tool.input_schema["properties"])
            assert tool.input_schema["additionalProperties"] is False, name
            text = agent.error(name, **valid[name], made_up_flag=True)
            assert text == (
                f"Error executing tool {name}: bad arguments: "
                f"unknown argument 'made_up_flag' ({name} takes {', '.join(takes)})"
            ), text
        # The three the issue names, and two unknown at once.
        assert "unknown argument 'budget' (context takes query, budget_tokens," in agent.error(
            "context", query="note", budget=5
        )
        assert agent.error("get", id="notes/a", bogus=True).endswith(
            "unknown argument 'bogus' (get takes id, at, as_of)"
        )
        assert agent.error("remember", **valid["remember"], author="mallory").endswith(
            "unknown argument 'author' (remember takes nodes, message, on_claim_conflict)"
        )
        two = agent.error("log", limit=1, since="yesterday", **{"line\nbreak": 1})
        assert "unknown arguments 'since', 'line\\nbreak' (log takes limit, node)" in two
        assert "\n" not in two
        # Nothing was written, moved or erased by any of them.
        assert _state(repo) == before
        for name in tools:  # and each call succeeds without the made-up argument
            assert not agent.call(name, **valid[name]).is_error, name
    assert repo.get("notes/b") is None and repo.get("notes/new") is not None


def test_facts_refuses_an_empty_subject_or_predicate_as_the_command_line_does(tmp_path: Path) -> None:
    store = tmp_path / "s.mnemo"
    with Repo.init(store) as repo:
        repo.commit([Node(id="claims/mira/city", kind="claim", content=CLAIM)], message="claim")
        with pytest.raises(InvalidInput) as empty:
            repo.facts("")
        with pytest.raises(InvalidInput) as no_predicate:
            repo.facts("mira", "")
        with pytest.raises(InvalidInput, match="subject must be a non-empty string"):
            repo.timeline("", "city")
        with connected(build_server(repo)) as (agent,):
            assert agent.error("facts", subject="") == failed("facts", empty.value)
            assert agent.error("facts", subject="mira", predicate="") == failed("facts", no_predicate.value)
            assert [f["node"]["content"]["value"] for f in agent.ok("facts", subject="mira")["facts"]] == [
                "Lisbon"
            ]
    assert str(empty.value) == "subject must be a non-empty string (as every claim's subject is)"
    assert_error(invoke("--repo", str(store), "facts", ""), 2, str(empty.value))
    assert_error(invoke("--repo", str(store), "facts", "mira", ""), 2, str(no_predicate.value))
    assert_error(invoke("--repo", str(store), "timeline", "mira", ""), 2, "predicate must be a non-empty")


# -- item 5: resources served, no prompts promised -------------------------------------


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_memories_and_their_history_are_resources_and_no_prompts_are_advertised(
    repo: Repo, mode: str
) -> None:
    _notes(repo, "users/mira/city")
    repo.commit([Node(id="users/mira/city", content="Lisbon, since June")], message="moved")
    repo.branch("review")
    repo.commit([Node(id="users/mira/city", content="Porto?")], message="candidate", branch="review")
    with connected(build_server(repo), build_server(repo, branch="review"), mode=mode) as (agent, review):
        capabilities = agent.capabilities()
        assert capabilities.prompts is None and capabilities.resources is not None
        assert capabilities.tools is not None
        with pytest.raises(MCPError, match="Method not found"):
            agent.request("list_prompts")
        templates = agent.request("list_resource_templates").resource_templates
        assert {(t.name, t.uri_template, t.mime_type) for t in templates} == {
            ("memory", "mnemo://memory/{+id}", "application/json"),
            ("history", "mnemo://history/{+id}", "application/json"),
        }
        assert all(t.description for t in templates)
        memory = _text(agent.request("read_resource", "mnemo://memory/users/mira/city"))
        assert memory == lib_form(repo.get("users/mira/city")) == agent.ok("get", id="users/mira/city")
        versions = _text(agent.request("read_resource", "mnemo://history/users/mira/city"))
        assert versions == {"versions": lib_form(repo.history("users/mira/city"))}
        assert [v["status"] for v in versions["versions"]] == ["current", "superseded"]
        # The server's branch, as for the tools.
        assert _text(review.request("read_resource", "mnemo://memory/users/mira/city"))["content"] == "Porto?"
        with pytest.raises(MCPError, match=r"^users/mira/nowhere is not in HEAD$"):
            agent.request("read_resource", "mnemo://memory/users/mira/nowhere")
        with pytest.raises(MCPError, match="has no history in review"):
            review.request("read_resource", "mnemo://history/users/nobody")
        with pytest.raises(MCPError, match=r"^id .bad//id. has an empty"):
            agent.request("read_resource", "mnemo://memory/bad//id")


# -- item 6: list, delete, verify ------------------------------------------------------


def test_list_browses_ids_under_a_prefix_a_page_at_a_time(repo: Repo) -> None:
    mira = [f"users/mira/n{i:02}" for i in range(LIST_LIMIT + 5)]
    _notes(repo, *mira, "users/tom/a", "notes/z")
    with connected(build_server(repo)) as (agent,):
        first = agent.ok("list", prefix="users/mira/")
        assert [n["id"] for n in first["nodes"]] == mira[:LIST_LIMIT]
        assert first["nodes"] == lib_form(list(repo.nodes(prefix="users/mira/")))[:LIST_LIMIT]
        assert first["next_after"] == mira[LIST_LIMIT - 1]
        rest = agent.ok("list", prefix="users/mira/", after=first["next_after"])
        assert [n["id"] for n in rest["nodes"]] == mira[LIST_LIMIT:] and rest["next_after"] is None
        small = agent.ok("list", limit=2)
        assert [n["id"] for n in small["nodes"]] == ["notes/z", mira[0]] and small["next_after"] == mira[0]
        exact = agent.ok("list", prefix="users/tom/", limit=1)
        assert [n["id"] for n in exact["nodes"]] == ["users/tom/a"] and exact["next_after"] is None
        assert agent.ok("list", prefix="users/mira/", after="users/zz") == {"nodes": [], "next_after": None}
        assert agent.ok("list", prefix="nobody/") == {"nodes": [], "next_after": None}
        for bad in (0, LIST_MAX + 1):
            assert agent.error("list", limit=bad) == failed(
                "list", InvalidInput(f"limit must be from 1 to {LIST_MAX}, not {bad}")
            )
        # An earlier snapshot, as get reads one.
        old = repo.resolve().id
        repo.commit(delete=["users/tom/a"], message="gone")
        assert [n["id"] for n in agent.ok("list", prefix="users/tom/")["nodes"]] == []
        assert [n["id"] for n in agent.ok("list", prefix="users/tom/", at=old)["nodes"]] == ["users/tom/a"]


def test_nodes_after_starts_past_an_id_without_reading_from_the_start(repo: Repo) -> None:
    _notes(repo, "a/1", "a/2", "a/3", "b/1")
    assert [n.id for n in repo.nodes(after="a/2")] == ["a/3", "b/1"]
    assert [n.id for n in repo.nodes(prefix="a/", after="a/1")] == ["a/2", "a/3"]
    assert [n.id for n in repo.nodes(prefix="b/", after="a/9")] == ["b/1"]  # before the prefix: all of it
    assert [n.id for n in repo.nodes(prefix="a/", after="a/3")] == []
    with pytest.raises(InvalidInput, match="after must be a string"):
        list(repo.nodes(after=3))  # type: ignore[arg-type]


def test_delete_removes_ids_in_a_commit_and_history_keeps_them(repo: Repo) -> None:
    written = _notes(repo, "notes/a", "notes/b", "notes/c")
    with connected(build_server(repo), names=("agent-7",)) as (agent,):
        removed = agent.ok("delete", ids=["notes/a", "notes/b"], message="outdated")
        assert removed["deleted_ids"] == ["notes/a", "notes/b"] and removed["put_ids"] == []
        assert removed["author"] == "agent-7" and removed["message"] == "outdated"
        assert removed["parents"] == [written] and removed["created"] is True
        assert removed == lib_form(repo.resolve()) | {
            "put_ids": [],
            "modified_ids": [],
            "deleted_ids": ["notes/a", "notes/b"],
            "created": True,
        }
        assert agent.error("get", id="notes/a") == failed("get", NotFound("notes/a is not in HEAD"))
        assert [n["id"] for n in agent.ok("list")["nodes"]] == ["notes/c"]
        # Not erased: the earlier snapshot still holds it, and history shows the removal.
        assert agent.ok("get", id="notes/a", at=written)["content"] == "note notes/a"
        versions = agent.ok("history", id="notes/a")["versions"]
        assert [v["status"] for v in versions] == ["deleted"]
        assert versions[0]["ended_by"] == removed["id"]
        assert repo.redactions(v["hash"] for v in versions) == {}
        # An id not in the branch: nothing is removed, not even the ids that are there.
        text = agent.error("delete", ids=["notes/c", "notes/a"], message="again")
        assert text.startswith("Error executing tool delete: ") and "notes/a" in text and "\n" not in text
        assert agent.error("delete", ids=[], message="m") == failed(
            "delete", InvalidInput("ids: give at least one id to delete")
        )
        assert repo.resolve().id == removed["id"] and repo.get("notes/c") is not None
        # And an id deleted can be remembered again.
        agent.ok("remember", nodes=[{"id": "notes/a", "content": "back"}], message="back")
        assert [v["status"] for v in agent.ok("history", id="notes/a")["versions"]] == ["current", "deleted"]


def test_delete_and_verify_write_to_the_servers_branch_with_its_author(repo: Repo) -> None:
    _notes(repo, "notes/a", "notes/b")
    main = repo.resolve().id
    repo.branch("review")
    with connected(build_server(repo, branch="review", author="curator"), names=("agent-7",)) as (agent,):
        removed = agent.ok("delete", ids=["notes/a"], message="drop")
        checked = agent.ok("verify", ids=["notes/b"])
    assert removed["author"] == checked["author"] == "curator"
    assert repo.resolve().id == main and repo.get("notes/a") is not None
    assert repo.resolve("review").id == checked["id"] and repo.get("notes/a", at="review") is None


def test_verify_records_a_confirmation_without_a_new_version(repo: Repo) -> None:
    _notes(repo, "notes/a", "notes/b")
    tip = repo.resolve()
    with connected(build_server(repo), names=("checker",)) as (agent,):
        hash_before = agent.ok("get", id="notes/a")["hash"]
        checked = agent.ok("verify", ids=["notes/a", "notes/b"], note="asked Mira")
        assert checked == lib_form(repo.resolve())
        assert checked["verified"] == ["notes/a", "notes/b"] and checked["author"] == "checker"
        assert checked["message"] == "asked Mira" and checked["tree"] == tip.tree
        assert agent.ok("get", id="notes/a")["hash"] == hash_before
        (version,) = agent.ok("history", id="notes/a")["versions"]
        assert version["verified"]["id"] == checked["id"]
        hits = agent.ok("recall", query="note", verified_within="1h")["hits"]
        assert {hit["confirmed_at"] for hit in hits} == {checked["record_time"]}
        default = agent.ok("verify", ids=["notes/a"])
        assert default["message"] == "verify notes/a"
        # A missing id: nothing is recorded.
        text = agent.error("verify", ids=["notes/a", "notes/missing"])
        assert text.startswith("Error executing tool verify: ") and "notes/missing" in text
        assert "\n" not in text
        assert agent.error("verify", ids=[]).startswith("Error executing tool verify: ")
        assert repo.resolve().id == default["id"]


def test_a_read_only_store_is_served_its_reading_tools_only(tmp_path: Path) -> None:
    store = tmp_path / "agent.mnemo"
    with Repo.init(store) as repo:
        _notes(repo, "notes/a")
    with Repo.open(store, readonly=True) as repo, connected(build_server(repo, allow_erase=True)) as (agent,):
        tools = agent.tools()
        assert set(tools) == READS
        assert all(tool.annotations.read_only_hint for tool in tools.values())
        assert "read-only here" in (agent.client.instructions or "")
        assert "remember" not in (agent.client.instructions or "")
        assert [n["id"] for n in agent.ok("list")["nodes"]] == ["notes/a"]
        assert _text(agent.request("read_resource", "mnemo://memory/notes/a"))["content"] == "note notes/a"
        assert "unknown tool" in agent.error("delete", ids=["notes/a"], message="m").lower()


def test_the_command_says_on_stderr_when_it_serves_a_read_only_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "agent.mnemo"
    Repo.init(store).close()
    writable = invoke("--repo", str(store), "mcp", input="")  # stdin closed: the server stops at once
    assert writable.exit_code == 0 and writable.stderr == ""
    access = os.access  # as a process that may not write the store sees it (root may write anything)
    monkeypatch.setattr(os, "access", lambda path, mode: mode != os.W_OK and access(path, mode))
    served = invoke("--repo", str(store), "mcp", input="")
    assert served.exit_code == 0 and served.stdout == ""
    assert served.stderr == f"warning: {store} is read-only here: serving the reading tools only\n"


# -- over stdio, as a host runs it -----------------------------------------------------


@pytest.mark.slow
def test_a_mnemo_mcp_process_refuses_unknown_arguments_and_serves_resources(tmp_path: Path) -> None:
    store = tmp_path / "agent.mnemo"
    with Repo.init(store) as repo:
        _notes(repo, "users/mira/city")
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mnemo_cli", "--repo", str(store), "mcp", "--author", "curator"],
        env={"MNEMO_EMBEDDER": "none"},
        cwd=tmp_path,
    )
    with connected(server) as (agent,):
        assert isinstance(agent, Session)
        assert agent.capabilities().prompts is None and agent.capabilities().resources is not None
        assert agent.error("context", query="city", budget=10).endswith(
            "unknown argument 'budget' (context takes query, budget_tokens, allowed_for, "
            "max_sensitivity, verified_within)"
        )
        page = agent.ok("list", prefix="users/")
        assert [n["id"] for n in page["nodes"]] == ["users/mira/city"] and page["next_after"] is None
        memory = _text(agent.request("read_resource", "mnemo://memory/users/mira/city"))
        assert memory["content"] == "note users/mira/city"
        assert agent.ok("verify", ids=["users/mira/city"])["author"] == "curator"
        assert agent.ok("delete", ids=["users/mira/city"], message="moved away")["author"] == "curator"
    with Repo.open(store) as repo:
        assert [c.message for c in repo.log()] == ["moved away", "verify users/mira/city", "notes"]
        assert repo.get("users/mira/city") is None and len(repo.history("users/mira/city")) == 1

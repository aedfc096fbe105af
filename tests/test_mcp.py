"""``mnemo mcp``: the store's tools over the Model Context Protocol, driven by the SDK's own client.

Most tests connect in-process (the SDK's ``Client`` runs an ``MCPServer`` in the
same event loop); one starts two real ``mnemo mcp`` processes over stdio on one
store. Without the ``mcp`` extra the module is skipped, except under CI, where
that is a failure.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cli_harness import assert_error, invoke
from support.components import unavailable

from mnemosyne import NotFound, Redacted, Repo

try:
    from mcp.client.stdio import StdioServerParameters
    from support.mcp_client import connected, failed, lib_form

    from mnemosyne.integrations.mcp_server import build_server
except ImportError as missing:
    unavailable(f"the 'mcp' extra is not installed ({missing})", module_level=True)

READS = {"recall", "context", "get", "list", "history", "blame", "diff", "log", "facts"}
WRITES = {"remember", "delete", "verify"}


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Repo]:
    with Repo.init(tmp_path / "agent.mnemo") as opened:
        yield opened


# -- the tools ------------------------------------------------------------------------


def test_tools_are_listed_with_typed_schemas_and_forget_only_when_erasure_is_allowed(repo: Repo) -> None:
    with connected(build_server(repo), build_server(repo, allow_erase=True)) as (plain, erasing):
        listed, with_forget = plain.tools(), erasing.tools()
    assert set(listed) == READS | WRITES
    assert set(with_forget) == READS | WRITES | {"forget"}
    for tool in with_forget.values():
        assert tool.description and tool.output_schema["type"] == "object", tool.name
        assert tool.annotations.read_only_hint is (tool.name in READS), tool.name
    assert with_forget["forget"].annotations.destructive_hint is True
    node = listed["remember"].input_schema["properties"]["nodes"]["items"]
    assert node["required"] == ["content"] and node["additionalProperties"] is False
    assert set(node["properties"]) == {
        "id",
        "content",
        "kind",
        "provenance",
        "event_time",
        "meta",
        "expires_at",
        "hash",
    }
    recall = listed["recall"].input_schema
    assert recall["required"] == ["query"] and recall["properties"]["k"]["type"] == "integer"
    assert set(listed["get"].output_schema["required"]) >= {"id", "content", "provenance", "hash"}


def test_remember_recall_history_blame_diff_log_forget_round_trip(repo: Repo) -> None:
    key = "users/mira/prefs/language"
    with connected(build_server(repo, allow_erase=True), names=("agent-7",)) as (agent,):
        first = agent.ok(
            "remember", nodes=[{"id": key, "content": "Mira prefers German."}], message="learned"
        )
        second = agent.ok(
            "remember",
            nodes=[
                {"id": key, "content": "Mira now prefers French.", "provenance": {"agent_step": 9}},
                {"content": "Tom writes in English."},  # no id: one is generated
            ],
            message="she switched",
        )
        assert first["put_ids"] == [key] and first["created"] is True and first["author"] == "agent-7"
        assert second["put_ids"][0] == key and len(second["put_ids"]) == 2
        assert second["parents"] == [first["id"]]
        assert second == lib_form(next(repo.log(limit=1))) | {
            "put_ids": second["put_ids"],
            "modified_ids": [key],  # she switched: the language's version is replaced
            "deleted_ids": [],
            "created": True,
        }
        again = agent.ok("remember", nodes=[{"id": key, "content": "Mira now prefers French."}], message="x")
        assert again["created"] is True  # a different provenance (another call) is a new version
        # What this agent just wrote is what a recall returns: the current version, never the old one.
        hits = agent.ok("recall", query="which language does Mira prefer", k=3)["hits"]
        assert [hit["id"] for hit in hits] == [key]
        assert hits[0]["node"]["content"] == "Mira now prefers French."
        assert hits[0] == lib_form(repo.search("which language does Mira prefer", k=3)[0])
        assert agent.ok("recall", query="German")["hits"] == []
        assert agent.ok("recall", query="English", prefix="users/")["hits"] == []

        context = agent.ok("context", query="Mira language", budget_tokens=40)
        assert context["items"][0]["id"] == key and context["tokens"] <= 40
        assert context["text"].startswith(
            f"[{key}@{context['items'][0]['hash'][:7]}] Mira now prefers French."
        )

        versions = agent.ok("history", id=key)["versions"]
        assert [v["status"] for v in versions] == ["current", "superseded", "superseded"]
        assert [v["commit"]["message"] for v in versions] == ["x", "she switched", "learned"]
        assert versions == lib_form(repo.history(key))

        blame = agent.ok("blame", id=key)
        assert blame["commit"]["id"] == again["id"] and blame["commit"]["author"] == "agent-7"
        assert blame["node"]["provenance"]["source"] == "mcp"
        assert blame == lib_form(repo.blame(key))

        diff = agent.ok("diff", a=first["id"], b=second["id"])
        (change,) = diff["modified"]
        assert (change["old"]["content"], change["new"]["content"]) == (
            "Mira prefers German.",
            "Mira now prefers French.",
        )
        assert [c["id"] for c in diff["added"]] == [second["put_ids"][1]] and diff["removed"] == []

        log = agent.ok("log", limit=2)["commits"]
        assert [c["id"] for c in log] == [again["id"], second["id"]]
        assert [c["message"] for c in agent.ok("log", node=second["put_ids"][1])["commits"]] == [
            "she switched"
        ]

        report = agent.ok("forget", id=key, reason="asked to forget")
        assert {r["hash"] for r in report["redactions"]} == {v["hash"] for v in versions}
        assert all(
            r["author"] == "agent-7" and r["reason"] == "asked to forget" for r in report["redactions"]
        )
        assert report["commit"]["message"] == f"forget {key}: asked to forget"
        assert agent.error("get", id=key) == failed("get", NotFound(f"{key} is not in HEAD"))
        with pytest.raises(Redacted) as erased:
            repo.get(key, at=first["id"])
        assert agent.error("get", id=key, at=first["id"]) == failed("get", erased.value)
        assert [v["status"] for v in agent.ok("history", id=key)["versions"]] == ["redacted"] * 3
        assert agent.ok("recall", query="French")["hits"] == []


def test_facts_read_claims_by_valid_time_and_as_of(repo: Repo) -> None:
    def claim(event: str, value: str, valid_from: str) -> dict[str, Any]:
        content = {"subject": "mira", "predicate": "city", "value": value, "valid_from": valid_from}
        return {"id": f"claims/mira/city/{event}", "kind": "claim", "content": content}

    with connected(build_server(repo)) as (agent,):
        first = agent.ok("remember", nodes=[claim("a", "Berlin", "2026-06-01")], message="Berlin")
        agent.ok("remember", nodes=[claim("b", "Lisbon", "2026-06-10")], message="Lisbon")
        now = agent.ok("facts", subject="mira", predicate="city", valid_at="2026-06-20")["facts"]
        assert [f["node"]["content"]["value"] for f in now] == ["Lisbon"]
        assert now[0]["supersedes"] == "claims/mira/city/a"
        assert now == lib_form(repo.facts("mira", "city", valid_at="2026-06-20"))
        then = agent.ok("facts", subject="mira", valid_at="2026-06-20", as_of=first["record_time"])["facts"]
        assert [f["node"]["content"]["value"] for f in then] == ["Berlin"]
        # The same valid_from with another value is refused, unless the call names a policy.
        text = agent.error("remember", nodes=[claim("c", "Porto", "2026-06-10")], message="Porto")
        assert (
            text.startswith("Error executing tool remember: ")
            and "claims/mira/city/c" in text
            and "\n" not in text
        )
        kept = agent.ok(
            "remember", nodes=[claim("c", "Porto", "2026-06-10")], message="both", on_claim_conflict="keep"
        )
        assert kept["created"] is True
        values = {
            f["node"]["content"]["value"]
            for f in agent.ok("facts", subject="mira", valid_at="2026-06-20")["facts"]
        }
        assert values == {"Lisbon", "Porto"}


# -- provenance and author --------------------------------------------------------------


def test_an_mcp_write_records_its_tool_call_and_keeps_what_the_caller_gave(repo: Repo) -> None:
    given = {"agent_step": 4, "observation": "e1", "tool_call": "search#12", "source": "email"}
    pinned = {"id": "notes/pinned", "content": "as written", "provenance": {"source": "web"}}
    start = repo.commit(put=[], allow_empty=True, message="start")
    with connected(build_server(repo), names=("planner",)) as (agent,):
        made = agent.ok(
            "remember",
            nodes=[
                {"id": "notes/bare", "content": "no provenance"},
                {
                    "id": "notes/partial",
                    "content": "a source",
                    "provenance": {"source": "chat", "tool_call": None},
                },
                {"id": "notes/full", "content": "all given", "provenance": given},
                pinned | {"hash": lib_form(_node(pinned))["hash"]},
            ],
            message="remember four",
        )
        bare, partial, full, exact = (
            agent.ok("get", id=f"notes/{n}") for n in ("bare", "partial", "full", "pinned")
        )
    call = bare["provenance"]["tool_call"]
    assert call.startswith("remember#") and call != "remember#"
    assert bare["provenance"] == {"agent_step": None, "observation": None, "tool_call": call, "source": "mcp"}
    assert partial["provenance"] == {
        "agent_step": None,
        "observation": None,
        "tool_call": call,
        "source": "chat",
    }
    assert full["provenance"] == given
    assert exact["provenance"] == {
        "agent_step": None,
        "observation": None,
        "tool_call": None,
        "source": "web",
    }
    assert exact["hash"] == lib_form(_node(pinned))["hash"]
    assert made["author"] == "planner" and made["parents"] == [start.id]
    assert repo.blame("notes/bare").commit.author == "planner"


def _node(value: dict[str, Any]) -> Any:
    from mnemosyne.model.jsonform import node_from_builtins

    return node_from_builtins(value, "test")


def test_the_author_is_the_configured_one_else_the_clients_name_else_the_fallback(repo: Repo) -> None:
    note = [{"id": "notes/who", "content": "someone wrote this"}]
    with connected(
        build_server(repo, author="curator"),
        build_server(repo, fallback_author="ops"),
        build_server(repo, fallback_author="ops"),
        names=("claude-desktop", "claude-desktop", " "),
    ) as (configured, named, nameless):
        assert configured.ok("remember", nodes=note, message="1")["author"] == "curator"
        assert (
            named.ok("remember", nodes=[note[0] | {"content": "2"}], message="2")["author"]
            == "claude-desktop"
        )
        assert nameless.ok("remember", nodes=[note[0] | {"content": "3"}], message="3")["author"] == "ops"
    # The handshake of the older protocol (initialize's clientInfo) names the client too.
    with connected(build_server(repo), names=("legacy-host",), mode="legacy") as (legacy,):
        made = legacy.ok("remember", nodes=[note[0] | {"content": "4"}], message="4")
        assert made["author"] == "legacy-host"
        assert legacy.ok("get", id="notes/who")["provenance"]["tool_call"].startswith("remember#")


# -- errors -----------------------------------------------------------------------------


def test_bad_arguments_are_tool_errors_with_the_librarys_one_line_message(repo: Repo) -> None:
    from mnemosyne import InvalidInput

    c1 = repo.commit(put=[_node({"id": "notes/a", "content": "a"})], message="a")
    with connected(build_server(repo)) as (agent,):
        assert agent.error("get", id="notes/missing") == failed(
            "get", NotFound("notes/missing is not in HEAD")
        )
        assert agent.error("history", id="notes/missing") == failed(
            "history", NotFound("notes/missing has no history in HEAD")
        )
        for tool, arguments, call in [
            ("blame", {"id": "notes/missing"}, lambda: repo.blame("notes/missing")),
            ("diff", {"a": "HEAD", "b": "no-such-branch"}, lambda: repo.diff("HEAD", "no-such-branch")),
            ("get", {"id": "notes/a", "as_of": "yesterday"}, lambda: repo.get("notes/a", as_of="yesterday")),
            ("get", {"id": "bad//id"}, lambda: repo.get("bad//id")),
            ("recall", {"query": "a", "k": 0}, lambda: repo.search("a", k=0)),
            ("log", {"limit": -1}, lambda: list(repo.log(limit=-1))),
            (
                "facts",
                {"subject": "mira", "valid_at": "2026-13-01"},
                lambda: repo.facts("mira", valid_at="2026-13-01"),
            ),
        ]:
            with pytest.raises((NotFound, InvalidInput)) as expected:
                call()
            text = agent.error(tool, **arguments)
            assert text == failed(tool, expected.value) and "\n" not in text, (tool, text)
        # Node JSON is read by the library's strict reader, in its words, naming the node.
        text = agent.error(
            "remember",
            nodes=[{"id": "notes/b", "content": "b"}, {"content": "c", "colour": "red"}],
            message="m",
        )
        assert text == failed(
            "remember",
            InvalidInput(
                "nodes[1]: unknown field 'colour' "
                "(a node has id, content, kind, provenance, event_time, meta, expires_at, hash)"
            ),
        )
        assert "content" in agent.error("remember", nodes=[{"id": "notes/b"}], message="m")
        assert "provenance" in agent.error(
            "remember", nodes=[{"content": "b", "provenance": "chat"}], message="m"
        )
        wrong_hash = agent.error(
            "remember", nodes=[{"id": "notes/b", "content": "b", "hash": "ab" * 32}], message="m"
        )
        assert "does not match the node described" in wrong_hash
        assert agent.error("remember", nodes=[], message="m").endswith(
            "nodes: give at least one node to remember"
        )
        # Arguments of the wrong type are refused by the SDK's validation, also as a one-line tool
        # error naming the field, never quoting the value given.
        assert agent.error("recall", query="a", k="many") == (
            "Error executing tool recall: bad arguments: k: "
            "Input should be a valid integer, unable to parse string as an integer"
        )
        assert agent.error("get") == "Error executing tool get: bad arguments: id: Field required"
        secret = agent.error("get", id=["passport", "X123"])
        assert "\n" not in secret and "X123" not in secret and secret.startswith("Error executing tool get: ")
        assert agent.error("remember", nodes="not a list", message="m").startswith(
            "Error executing tool remember: bad arguments: nodes: "
        )
        assert "unknown tool" in agent.error("forget", id="notes/a", reason="r").lower()
        # Nothing was written by any of them, and the server still serves.
        assert repo.resolve().id == c1.id
        assert agent.ok("get", id="notes/a")["content"] == "a"


def test_a_branch_server_reads_and_writes_its_branch(repo: Repo) -> None:
    repo.commit(put=[_node({"id": "notes/a", "content": "on main"})], message="main")
    repo.branch("review/run-1")
    with connected(build_server(repo, branch="review/run-1")) as (agent,):
        made = agent.ok("remember", nodes=[{"id": "notes/a", "content": "on review"}], message="candidate")
        assert agent.ok("get", id="notes/a")["content"] == "on review"
        assert agent.ok("get", id="notes/a", at="main")["content"] == "on main"
        assert [v["status"] for v in agent.ok("history", id="notes/a")["versions"]] == [
            "current",
            "superseded",
        ]
    assert repo.get("notes/a").content == "on main"
    assert repo.resolve("review/run-1").id == made["id"]
    with pytest.raises(NotFound, match="no branch 'nope'"):
        build_server(repo, branch="nope")


def test_the_command_refuses_a_missing_branch_before_serving(tmp_path: Path) -> None:
    Repo.init(tmp_path / "s.mnemo").close()
    assert_error(
        invoke("--repo", str(tmp_path / "s.mnemo"), "mcp", "--branch", "nope"), 3, "no branch 'nope'"
    )
    assert_error(invoke("--repo", str(tmp_path / "missing"), "mcp"), 3, "missing")


# -- over stdio, as a host runs it ----------------------------------------------------


@pytest.mark.slow
def test_two_mnemo_mcp_processes_on_one_store_see_each_others_writes(tmp_path: Path) -> None:
    store = tmp_path / "shared.mnemo"
    Repo.init(store).close()

    def server(*options: str) -> StdioServerParameters:
        return StdioServerParameters(
            command=sys.executable,
            args=["-m", "mnemo_cli", "--repo", str(store), "mcp", *options],
            env={"MNEMO_EMBEDDER": "none"},  # no model to load: this test is about processes
            cwd=tmp_path,
        )

    with connected(
        server(), server("--allow-erase", "--author", "curator"), names=("agent-a", "agent-b")
    ) as (a, b):
        assert "forget" not in a.tools() and "forget" in b.tools()
        wrote = a.ok(
            "remember", nodes=[{"id": "users/mira/city", "content": "Mira moved to Lisbon."}], message="a"
        )
        assert wrote["author"] == "agent-a"
        # B, another process with its own handle, sees A's commit at its next call.
        seen = b.ok("get", id="users/mira/city")
        assert seen["content"] == "Mira moved to Lisbon." and seen["provenance"]["source"] == "mcp"
        assert [hit["id"] for hit in b.ok("recall", query="Lisbon")["hits"]] == ["users/mira/city"]
        assert b.ok("blame", id="users/mira/city")["commit"]["author"] == "agent-a"
        assert [hit["id"] for hit in a.ok("recall", query="Lisbon")["hits"]] == ["users/mira/city"]
        answered = b.ok(
            "remember", nodes=[{"id": "users/mira/city", "content": "Mira is back in Berlin."}], message="b"
        )
        assert answered["author"] == "curator" and answered["parents"] == [wrote["id"]]
        assert [c["id"] for c in a.ok("log")["commits"]] == [answered["id"], wrote["id"]]
        # A's handle searched before B wrote; its next calls still see B's version, not its own.
        assert a.ok("recall", query="Lisbon")["hits"] == []
        assert a.ok("recall", query="Berlin")["hits"][0]["hash"] == a.ok("get", id="users/mira/city")["hash"]
        assert a.error("get", id="users/mira/nowhere").endswith("users/mira/nowhere is not in HEAD")
        b.ok("forget", id="users/mira/city", reason="asked")
        assert "was erased at" in a.error("get", id="users/mira/city", at=wrote["id"])
    with Repo.open(store) as repo:
        assert [c.author for c in repo.log()] == ["curator", "curator", "agent-a"]


def test_recall_and_context_pass_use_sensitivity_and_freshness_through(repo: Repo) -> None:
    nodes = [
        {"id": "m/support", "content": "Mira likes green tea", "meta": {"allowed_for": ["support"]}},
        {"id": "m/personal", "content": "Mira drinks tea at night", "meta": {"sensitivity": "personal"}},
        {"id": "m/public", "content": "tea is served at nine", "meta": {"sensitivity": "public"}},
    ]
    repo.use_embedder(None)
    with connected(build_server(repo)) as (agent,):
        agent.ok("remember", nodes=nodes, message="tea")
        repo.verify("m/public", by="checker")

        def recalled(**scope: Any) -> set[str]:
            return {hit["id"] for hit in agent.ok("recall", query="tea", **scope)["hits"]}

        assert recalled() == {"m/support", "m/personal", "m/public"}
        assert recalled(allowed_for="billing") == {"m/personal", "m/public"}
        assert recalled(max_sensitivity="internal") == {"m/support", "m/public"}
        assert recalled(verified_within="1d") == {"m/support", "m/personal", "m/public"}
        assert recalled(verified_within="0s") == set()  # nothing was confirmed at this very instant
        hits = agent.ok("recall", query="tea", max_sensitivity="public")["hits"]
        assert [h["id"] for h in hits] == ["m/public"]
        assert hits == lib_form(repo.search("tea", max_sensitivity="public"))
        assert hits[0]["confirmed_at"] == lib_form(repo.blame("m/public").verified.record_time)
        items = agent.ok("context", query="tea", allowed_for="support", max_sensitivity="internal")["items"]
        assert {item["id"] for item in items} == {"m/support", "m/public"}  # no list: any use
        assert "not on the scale" in agent.error("recall", query="tea", max_sensitivity="secret")
        assert "not a duration" in agent.error("context", query="tea", verified_within="a while")

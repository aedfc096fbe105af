"""``mnemo facts``, ``timeline`` and ``tenant``, in-process through Typer's CliRunner.

The passport scenario of issue 2: claims arriving out of valid-time order in
tenant ``acme``, read back at several valid times and as a timeline.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.cli_harness import CliStore, assert_error, invoke

pytestmark = pytest.mark.usefixtures("clean_cli_env")

NODE_KEYS = ["id", "content", "kind", "provenance", "event_time", "meta", "expires_at", "hash"]
COMMIT_KEYS = ["id", "tree", "parents", "record_time", "author", "message", "meta", "verified"]
FACT_KEYS = ["id", "node", "commit", "effective_from", "effective_to", "supersedes", "confirmed_at"]
HEX64 = re.compile(r"[0-9a-f]{64}")
PASSPORT = "acme/mira/passport_deadline"


def claim(node_id: str, valid_from: str, value: Any, observation: str | None = None) -> dict[str, Any]:
    content = {"subject": "mira", "predicate": "passport_deadline", "value": value, "valid_from": valid_from}
    return {
        "id": node_id,
        "kind": "claim",
        "content": content,
        "provenance": {"observation": observation, "source": "chat"},
    }


Store = CliStore


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "agent.mnemo")


@pytest.fixture
def passport(store: Store) -> tuple[Store, dict[str, str]]:
    """Tenant acme with e1, e2 and the late e0; the commit of each."""
    assert store.ok("tenant", "create", "acme") == "Created tenant acme\n"
    acme = Store(store.path, tenant="acme")
    commits = {
        "e1": acme.put(claim(f"{PASSPORT}/e1", "2026-06-01T09:00:00Z", "2026-07-15", "e1"), message="e1"),
        "e2": acme.put(claim(f"{PASSPORT}/e2", "2026-06-03T10:00:00Z", "2026-06-30", "e2"), message="e2"),
        "e0": acme.put(claim(f"{PASSPORT}/e0", "2026-05-30T08:00:00Z", "2026-08-01", "e0"), message="e0"),
    }
    return acme, commits


# -- facts ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("valid_at", "expected"),
    [
        ("2026-06-04", ["e2"]),
        ("2026-06-02", ["e1"]),
        ("2026-05-31", ["e0"]),
        ("2026-05-31T08:00:00Z", ["e0"]),
        ("2026-05-29", []),
    ],
)
def test_passport_facts_at_valid_times(passport, valid_at: str, expected: list[str]) -> None:
    acme, commits = passport
    found = acme.lines("facts", "mira", "passport_deadline", "--valid-at", valid_at)
    assert [fact["id"].rsplit("/", 1)[1] for fact in found] == expected
    for fact in found:
        assert list(fact) == FACT_KEYS
        assert list(fact["node"]) == NODE_KEYS
        assert list(fact["commit"]) == COMMIT_KEYS
        assert fact["node"]["id"] == fact["id"]
        name = fact["id"].rsplit("/", 1)[1]
        assert fact["commit"]["id"] == commits[name]
        assert fact["node"]["provenance"]["observation"] == name
        assert fact["effective_from"] == fact["node"]["content"]["valid_from"]
    # without the predicate: every predicate of the subject (here just the one)
    assert acme.lines("facts", "mira", "--valid-at", valid_at) == found


def test_passport_facts_human(passport) -> None:
    acme, _ = passport
    out = acme.ok("facts", "mira", "passport_deadline", "--valid-at", "2026-06-04")
    (line,) = out.splitlines()
    assert line.startswith('passport_deadline = "2026-06-30"  valid 2026-06-03T10:00:00Z..  ')
    hash7 = acme.lines("facts", "mira", "--valid-at", "2026-06-04")[0]["node"]["hash"][:7]
    assert f"{PASSPORT}/e2  {hash7}  observation=e2 source=chat" in line
    assert acme.ok("facts", "mira", "--valid-at", "2026-05-29") == ""


def test_facts_as_of_and_at_read_older_beliefs(passport) -> None:
    acme, commits = passport
    # at the commit of e2 (before e0 arrived), nothing was known for 05-31
    assert acme.lines("facts", "mira", "--valid-at", "2026-05-31", "--at", commits["e2"]) == []
    found = acme.lines("facts", "mira", "--valid-at", "2026-06-04", "--at", commits["e1"])
    assert [n["id"] for n in found] == [f"{PASSPORT}/e1"]
    assert found[0]["commit"]["id"] == commits["e1"]
    recorded = acme.lines("log", "-n", "1", commits["e2"])[0]["record_time"]
    as_of = acme.lines("facts", "mira", "--valid-at", "2026-05-31", "--as-of", recorded)
    assert as_of == []
    assert_error(acme.run("facts", "mira", "--valid-at", "soon"), 2, "not an RFC 3339 time")
    assert_error(acme.run("facts", "mira", "--at", "nowhere"), 3, "nowhere")


def test_facts_valid_to_leaves_a_gap(store: Store) -> None:
    node = claim("c/1", "2026-01-01", "x")
    node["content"]["valid_to"] = "2026-02-01"
    store.put(node)
    assert [n["id"] for n in store.lines("facts", "mira", "--valid-at", "2026-01-15")] == ["c/1"]
    assert store.lines("facts", "mira", "--valid-at", "2026-02-01") == []
    assert "valid 2026-01-01T00:00:00Z..2026-02-01T00:00:00Z" in store.ok(
        "facts", "mira", "--valid-at", "2026-01-15"
    )


def test_a_fourth_claim_starting_with_another_needs_a_policy(passport) -> None:
    acme, _ = passport
    clash = json.dumps(claim(f"{PASSPORT}/e3", "2026-06-03T10:00:00Z", "2026-09-09"))
    assert_error(acme.run("commit", "-m", "e3", input=clash), 2, f"{PASSPORT}/e3")
    acme.ok("commit", "-m", "e3", "--on-claim-conflict", "replace", input=clash)
    found = acme.lines("facts", "mira", "--valid-at", "2026-06-04")
    assert [(f["id"], f["node"]["content"]["value"]) for f in found] == [(f"{PASSPORT}/e3", "2026-09-09")]


def test_kept_claims_are_both_facts(store: Store) -> None:
    store.put(claim("c/1", "2026-06-03", "a"))
    store.put(claim("c/2", "2026-06-03", "b"), extra=("--on-claim-conflict", "keep"))
    assert [n["id"] for n in store.lines("facts", "mira", "--valid-at", "2026-06-04")] == ["c/1", "c/2"]


# -- timeline ----------------------------------------------------------------------


def test_passport_timeline_json(passport) -> None:
    acme, commits = passport
    found = acme.lines("timeline", "mira", "passport_deadline")
    assert [entry["id"].rsplit("/", 1)[1] for entry in found] == ["e0", "e1", "e2"]
    for entry in found:
        assert list(entry) == FACT_KEYS
        assert list(entry["commit"]) == COMMIT_KEYS
        assert HEX64.fullmatch(entry["node"]["hash"]) and entry["node"]["id"] == entry["id"]
        assert entry["commit"]["id"] == commits[entry["id"].rsplit("/", 1)[1]]
        assert entry["commit"]["record_time"].endswith("Z")
    e0, e1, e2 = found
    assert (e0["effective_from"], e0["effective_to"]) == ("2026-05-30T08:00:00Z", "2026-06-01T09:00:00Z")
    assert (e1["effective_from"], e1["effective_to"]) == ("2026-06-01T09:00:00Z", "2026-06-03T10:00:00Z")
    assert (e2["effective_from"], e2["effective_to"]) == ("2026-06-03T10:00:00Z", None)
    assert e2["supersedes"] == f"{PASSPORT}/e1"
    assert e1["supersedes"] is None
    assert e0["supersedes"] is None  # it arrived last, but slots in before the others


def test_passport_timeline_human_table(passport) -> None:
    acme, commits = passport
    header, *rows = acme.ok("timeline", "mira", "passport_deadline").splitlines()
    assert header.split() == ["FROM", "TO", "VALUE", "ID", "HASH", "COMMIT", "RECORDED", "SUPERSEDES"]
    assert len(rows) == 3
    cells = rows[2].split()
    assert cells[:4] == ["2026-06-03T10:00:00Z", "-", '"2026-06-30"', f"{PASSPORT}/e2"]
    assert cells[5] == commits["e2"][:7]
    assert cells[-1] == f"{PASSPORT}/e1"
    assert rows[0].split()[-1] == "-"


def test_timeline_at_and_empty(passport) -> None:
    acme, commits = passport
    before = acme.lines("timeline", "mira", "passport_deadline", "--at", commits["e2"])
    assert [entry["id"] for entry in before] == [f"{PASSPORT}/e1", f"{PASSPORT}/e2"]
    assert acme.ok("timeline", "mira", "nothing") == ""
    assert acme.lines("timeline", "nobody", "passport_deadline") == []
    assert invoke("timeline", "--help").exit_code == 0
    missing = acme.run("timeline", "mira")
    assert missing.exit_code == 2


# -- tenants -------------------------------------------------------------------------


def test_tenant_list_create_and_separation(store: Store) -> None:
    assert store.ok("tenant", "list") == "* default\n"
    store.ok("tenant", "create", "acme")
    assert store.doc("tenant", "create", "beta") == {"tenant": "beta", "created": True}
    assert store.lines("tenant", "list") == [
        {"name": "acme", "current": False},
        {"name": "beta", "current": False},
        {"name": "default", "current": True},
    ]
    acme = Store(store.path, tenant="acme")
    assert acme.ok("tenant", "list") == "* acme\n  beta\n  default\n"
    acme.put({"id": "k", "content": 1})
    assert store.lines("ls") == []
    assert [n["id"] for n in acme.lines("ls")] == ["k"]
    assert_error(store.run("tenant", "create", "acme"), 2, "tenant 'acme' already exists")
    assert_error(store.run("tenant", "create", "Bad!"), 2, "not a tenant name")


def test_tenant_drop_needs_yes_and_never_the_default(store: Store) -> None:
    store.ok("tenant", "create", "acme")
    acme = Store(store.path, tenant="acme")
    acme.put({"id": "k", "content": 1})
    assert_error(store.run("tenant", "drop", "acme"), 2, "pass --yes")
    assert [n["id"] for n in acme.lines("ls")] == ["k"]  # nothing dropped
    assert_error(store.run("tenant", "drop", "default", "--yes"), 2, "default tenant cannot be dropped")
    assert_error(store.run("tenant", "drop", "nope", "--yes"), 3, "no tenant named 'nope'")
    # dropping from a handle bound to the tenant itself still works: the CLI uses the default one
    dropped = acme.doc("tenant", "drop", "acme", "--yes")
    assert dropped["dropped"] == "acme" and dropped["keys"] > 0
    assert store.ok("tenant", "list") == "* default\n"
    assert_error(acme.run("ls"), 3, "no tenant named 'acme'")
    store.ok("tenant", "create", "acme")
    assert acme.lines("ls") == []  # a new tenant under an old name starts empty
    assert store.ok("tenant", "drop", "acme", "--yes").startswith("Dropped tenant acme (")


def test_tenant_help() -> None:
    listed = invoke("--help").stdout
    assert re.search(r"^  tenant\s+\S", listed, re.MULTILINE)
    for sub in ("list", "create", "drop"):
        result = invoke("tenant", sub, "--help")
        assert result.exit_code == 0, sub
        assert result.stdout.startswith(f"Usage: mnemo tenant {sub} "), sub
    assert "--yes" in invoke("tenant", "drop", "--help").stdout

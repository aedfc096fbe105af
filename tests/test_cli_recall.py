"""``mnemo search``, ``context``, ``reads``, ``config`` and the recall half of ``reindex``.

In-process through Typer's CliRunner. Where a semantic embedder is needed the
tiny deterministic ``hash`` embedder stands in (by ``config set`` or by
``MNEMO_EMBEDDER`` in the runner's environment), never the real model: it is slow.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mnemo_cli.cmd_recall import parse_meta
from support.cli_harness import CliStore, assert_error, invoke

from mnemosyne import InvalidInput
from mnemosyne.store.settings import KEYS

HEX64 = re.compile(r"[0-9a-f]{64}")
RFC3339_Z = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
HIT_KEYS = ["id", "hash", "node", "score", "lexical_rank", "semantic_rank", "confirmed_at"]
NODE_KEYS = ["id", "content", "kind", "provenance", "event_time", "meta", "expires_at", "hash"]
CONTEXT_KEYS = ["query", "budget_tokens", "tokens", "items"]
ITEM_KEYS = [
    "id",
    "hash",
    "text",
    "tokens",
    "score",
    "claim_in_force",
    "confirmed_at",
    "event_time",
    "context_for",
]
READ_KEYS = ["run_id", "time", "kind", "query", "ids", "hashes"]


class Store(CliStore):
    """The CLI store, committing as ``agent``."""

    author = "agent"

    def ids(self, *args: str, **env: str) -> list[str]:
        """The ids ``search`` returns, best first."""
        return [hit["id"] for hit in self.lines("search", *args, **env)]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MNEMO_DIR", raising=False)
    monkeypatch.delenv("MNEMO_EMBEDDER", raising=False)
    monkeypatch.setenv("MNEMO_AUTHOR", "tester")


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


MIRA = {
    "id": "users/mira/passport",
    "content": "Mira must renew her passport before the July deadline",
    "provenance": {"agent_step": 3, "observation": "e1", "tool_call": None, "source": "chat"},
}
LANG = {"id": "users/mira/lang", "content": {"language": "Portuguese"}, "meta": {"sensitivity": "personal"}}
BO = {"id": "users/bo/passport", "content": "Bo lost his passport at the airport", "meta": {"priority": 2}}
CLAIM = {
    "id": "users/mira/deadline/e1",
    "kind": "claim",
    "content": {
        "subject": "mira",
        "predicate": "passport",
        "value": "renewal due July",
        "valid_from": "2026-06-01T00:00:00Z",
    },
}


@pytest.fixture
def memories(store: Store) -> Store:
    store.put(MIRA, LANG, BO, CLAIM, message="observe")
    return store


# -- search ----------------------------------------------------------------------------


def test_search_finds_a_memory_by_its_words_without_an_embedder(memories: Store) -> None:
    hits = memories.lines("search", "renew passport")
    assert hits[0]["id"] == "users/mira/passport"
    assert {hit["id"] for hit in hits} <= {"users/mira/passport", "users/bo/passport", CLAIM["id"]}
    assert "users/mira/lang" not in {hit["id"] for hit in hits}
    for hit in hits:
        assert list(hit) == HIT_KEYS
        assert list(hit["node"]) == NODE_KEYS
        assert hit["hash"] == hit["node"]["hash"] and HEX64.fullmatch(hit["hash"])
        assert isinstance(hit["score"], float) and hit["score"] > 0
        assert isinstance(hit["lexical_rank"], int) and hit["semantic_rank"] is None
    first = hits[0]
    assert first["lexical_rank"] == 1
    assert first["node"]["content"] == MIRA["content"]
    assert first["node"]["provenance"] == MIRA["provenance"]
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


def test_search_human_output(memories: Store) -> None:
    result = memories.result("search", "renew passport", "-k", "1")
    (line,) = result.stdout.splitlines()
    hit = memories.lines("search", "renew passport", "-k", "1")[0]
    assert line.startswith(f"{hit['score']:.4f}  users/mira/passport  {hit['hash'][:7]}  Mira must renew")
    assert line.endswith("(agent_step=3 observation=e1 source=chat)")
    none = memories.result("search", "zeppelin")
    assert none.stdout == "" and "no memories match" in none.stderr


def test_search_k_limits_and_empty_store(store: Store) -> None:
    assert store.lines("search", "anything") == []
    store.put(*({"id": f"n/{i}", "content": f"apple number {i}"} for i in range(5)))
    assert len(store.lines("search", "apple", "-k", "3")) == 3
    assert len(store.lines("search", "apple")) == 5
    assert store.run("search", "apple", "-k", "0").exit_code == 2  # a usage error


def test_hybrid_search_with_the_store_embedder_has_semantic_ranks(store: Store) -> None:
    assert store.result("config", "set", "embedder", "hash").stdout == "embedder = hash\n"
    store.put(MIRA, LANG, BO, CLAIM)
    hits = store.lines("search", "renew passport")
    assert hits[0]["id"] == "users/mira/passport"
    assert hits[0]["lexical_rank"] == 1 and hits[0]["semantic_rank"] == 1
    assert all(isinstance(hit["semantic_rank"], int) for hit in hits)
    lexical = store.lines("search", "renew passport", "--mode", "lexical")
    assert lexical and all(hit["semantic_rank"] is None for hit in lexical)
    semantic = store.lines("search", "renew passport", "--mode", "semantic")
    assert semantic[0]["id"] == "users/mira/passport"
    assert all(hit["lexical_rank"] is None and hit["semantic_rank"] for hit in semantic)


def test_mnemo_embedder_in_the_environment_overrides_the_setting(store: Store) -> None:
    store.put(MIRA, BO)
    # The first search indexes (and, with the variable set, embeds) what was written.
    hits = store.lines("search", "renew passport", MNEMO_EMBEDDER="hash")
    assert hits[0]["semantic_rank"] == 1
    assert store.result("config", "get", "embedder").stdout == "none\n"
    assert all(hit["semantic_rank"] is None for hit in store.lines("search", "renew passport"))
    noted = store.result("config", "get", "embedder", MNEMO_EMBEDDER="hash")
    assert noted.stdout == "none\n" and "MNEMO_EMBEDDER=hash overrides" in noted.stderr
    # Only the commands that search or embed load an embedder, so only they judge the variable.
    assert store.run("ls", MNEMO_EMBEDDER="bogus").exit_code == 0
    assert_error(
        store.run("search", "x", MNEMO_EMBEDDER="bogus"), 2, "MNEMO_EMBEDDER: unknown embedder 'bogus'"
    )
    assert_error(store.run("search", "x", MNEMO_EMBEDDER="hash-x"), 2, "MNEMO_EMBEDDER: unknown embedder")


def test_semantic_mode_without_an_embedder_is_refused(memories: Store) -> None:
    assert_error(memories.run("search", "passport", "--mode", "semantic"), 2, "needs an embedder")
    assert memories.run("search", "passport", "--mode", "fuzzy").exit_code == 2


def test_an_embedder_set_late_covers_old_memories_after_reindex(memories: Store) -> None:
    assert memories.lines("search", "passport")  # indexed with no embedder
    set_late = memories.result("config", "set", "embedder", "hash")
    assert "mnemo reindex" in set_late.stderr
    assert memories.doc("reindex")["recall"] == 4
    assert memories.lines("search", "renew passport")[0]["semantic_rank"] == 1


# -- what search never returns -----------------------------------------------------------


def test_superseded_deleted_expired_and_erased_versions_never_appear(store: Store) -> None:
    store.put({"id": "a/edited", "content": "zebra old stripes"})
    store.put({"id": "a/edited", "content": "zebra new stripes"})
    store.put({"id": "a/deleted", "content": "zebra gone"})
    store.result("rm", "a/deleted", "-m", "drop")
    store.put({"id": "a/expired", "content": "zebra stale", "expires_at": "2001-01-01T00:00:00Z"})
    store.put({"id": "a/secret", "content": "zebra secret"})
    store.put({"id": "a/kept", "content": "zebra kept"})
    old_secret = store.lines("search", "secret")[0]["hash"]
    store.result("forget", "a/secret", "--reason", "asked")
    store.put({"id": "a/secret", "content": "zebra replacement"})  # the id again, new content
    for env in ({}, {"MNEMO_EMBEDDER": "hash"}):
        hits = store.lines("search", "zebra stripes gone stale secret old", "-k", "50", **env)
        assert sorted(hit["id"] for hit in hits) == ["a/edited", "a/kept", "a/secret"], env
        by_id = {hit["id"]: hit["node"]["content"] for hit in hits}
        assert by_id["a/edited"] == "zebra new stripes"
        assert by_id["a/secret"] == "zebra replacement"
        assert old_secret not in {hit["hash"] for hit in hits}
    assert store.lines("search", "old") == []
    assert store.lines("search", "gone") == []


# -- filters -----------------------------------------------------------------------------


def test_prefix_kind_and_meta_filter(memories: Store) -> None:
    assert memories.ids("passport", "--prefix", "users/bo/") == ["users/bo/passport"]
    assert set(memories.ids("passport", "--prefix", "users/mira/")) == {"users/mira/passport", CLAIM["id"]}
    assert memories.ids("passport", "--kind", "claim") == [CLAIM["id"]]
    assert CLAIM["id"] not in memories.ids("passport", "--kind", "note")
    assert memories.ids("portuguese", "--meta", "sensitivity=personal") == ["users/mira/lang"]
    assert memories.ids("portuguese", "--meta", "sensitivity=public") == []
    # VALUE is JSON when it parses: 2 is a number, "2" (quoted) is text.
    assert memories.ids("passport", "--meta", "priority=2") == ["users/bo/passport"]
    assert memories.ids("passport", "--meta", 'priority="2"') == []
    assert memories.ids("passport", "--meta", "priority=2", "--meta", "sensitivity=personal") == []


def test_valid_at_keeps_claims_in_force(memories: Store) -> None:
    # "due" is the claim's word alone ("renewal" stems as the note's "renew").
    assert memories.ids("due", "--valid-at", "2026-07-01") == [CLAIM["id"]]
    assert memories.ids("due", "--valid-at", "2026-05-01") == []


def test_at_and_as_of_search_an_older_snapshot(store: Store) -> None:
    first = store.put({"id": "k", "content": "walrus tusk"})
    store.put({"id": "k", "content": "narwhal horn"}, {"id": "j", "content": "walrus again"})
    when = store.lines("log")[-1]["record_time"]
    assert store.ids("walrus") == ["j"]
    assert store.ids("walrus", "--at", first) == ["k"]
    assert store.ids("walrus", "--at", "HEAD~1") == ["k"]
    assert store.ids("walrus", "--as-of", when) == ["k"]
    assert store.ids("narwhal", "--as-of", when) == []
    assert_error(store.run("search", "walrus", "--at", "nosuchbranch"), 3, "")
    assert_error(store.run("search", "walrus", "--as-of", "yesterday-ish"), 2, "")


def test_meta_options_are_parsed_or_refused(store: Store) -> None:
    assert parse_meta(["a=1", "b=x", "c=", 'd={"e": [1]}', "f=a=b", "g=true"]) == {
        "a": 1,
        "b": "x",
        "c": "",
        "d": {"e": [1]},
        "f": "a=b",
        "g": True,
    }
    with pytest.raises(InvalidInput):
        parse_meta(["novalue"])
    with pytest.raises(InvalidInput):
        parse_meta(["=1"])
    with pytest.raises(InvalidInput):
        parse_meta(["a=1", "a=2"])
    assert_error(store.run("search", "x", "--meta", "novalue"), 2, "expected KEY=VALUE")


# -- context -----------------------------------------------------------------------------


def test_context_fits_the_budget_and_cites_ids(memories: Store) -> None:
    roomy = memories.doc("context", "passport renewal", "--budget", "500")
    assert list(roomy) == CONTEXT_KEYS
    assert roomy["query"] == "passport renewal" and roomy["budget_tokens"] == 500
    assert len(roomy["items"]) >= 2
    for item in roomy["items"]:
        assert list(item) == ITEM_KEYS and HEX64.fullmatch(item["hash"])
    assert roomy["tokens"] == sum(item["tokens"] for item in roomy["items"]) <= 500
    claim = next(item for item in roomy["items"] if item["id"] == CLAIM["id"])
    assert claim["claim_in_force"] is True
    assert [item["score"] for item in roomy["items"]] == sorted(
        (item["score"] for item in roomy["items"]), reverse=True
    )  # best first (no claim here is out of force)

    tight = memories.doc("context", "passport renewal", "--budget", "20")
    assert 0 < tight["tokens"] <= 20
    assert len(tight["items"]) < len(roomy["items"])

    human = memories.result("context", "passport renewal", "--budget", "500")
    lines = human.stdout.splitlines()
    assert lines == [f"[{item['id']}@{item['hash'][:7]}] {item['text']}" for item in roomy["items"]]
    assert human.stderr == f"{roomy['tokens']} of 500 tokens, {len(roomy['items'])} memories\n"

    empty = memories.result("context", "zeppelin", "--budget", "5")
    assert empty.stdout == "" and empty.stderr == "0 of 5 tokens, 0 memories\n"
    assert memories.run("context", "x", "--budget", "0").exit_code == 2


def test_context_filters(memories: Store) -> None:
    doc = memories.doc("context", "passport", "--prefix", "users/bo/")
    assert [item["id"] for item in doc["items"]] == ["users/bo/passport"]
    later = memories.doc("context", "due", "--valid-at", "2026-05-01")
    assert later["items"] == []


# -- the read log --------------------------------------------------------------------------


def test_run_id_records_reads_and_forget_scrubs_them(memories: Store) -> None:
    found = memories.lines("search", "passport", "--run-id", "run-1")
    built = memories.doc("context", "portuguese", "--run-id", "run-1")
    memories.lines("search", "airport", "--run-id", "run-2")
    log = memories.lines("reads", "run-1")
    assert [list(record) for record in log] == [READ_KEYS, READ_KEYS]
    assert [(r["run_id"], r["kind"], r["query"]) for r in log] == [
        ("run-1", "search", "passport"),
        ("run-1", "context", "portuguese"),
    ]
    assert all(RFC3339_Z.fullmatch(record["time"]) for record in log)
    assert log[0]["ids"] == [hit["id"] for hit in found]
    assert log[0]["hashes"] == [hit["hash"] for hit in found]
    assert log[1]["hashes"] == [item["hash"] for item in built["items"]]
    assert [r["query"] for r in memories.lines("reads", "run-2")] == ["airport"]
    assert memories.lines("reads", "never-used") == []

    human = memories.result("reads", "run-1").stdout.splitlines()
    assert len(human) == 2
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ  search   \"passport\"  ", human[0])
    assert human[0].endswith(" ".join(f"{hit['id']}@{hit['hash'][:7]}" for hit in found))

    erased = next(hit for hit in found if hit["id"] == "users/bo/passport")["hash"]
    memories.result("forget", "users/bo/passport", "--reason", "asked")
    after = memories.lines("reads", "run-1")[0]
    assert erased not in after["hashes"] and "users/bo/passport" not in after["ids"]
    assert len(after["ids"]) == len(after["hashes"]) == len(found) - 1
    assert memories.lines("reads", "run-2")[0]["hashes"] == []
    assert memories.result("reads", "run-2").stdout.rstrip().endswith("(nothing)")


# -- config ------------------------------------------------------------------------------


def test_config_get_set_list(store: Store) -> None:
    assert store.result("config", "get", "embedder").stdout == "none\n"
    assert store.doc("config", "get", "embedder") == {"key": "embedder", "value": "none"}
    assert store.lines("config", "list") == [
        {"key": key, "value": default, "default": default} for key, default in sorted(KEYS.items())
    ]
    assert store.doc("config", "set", "embedder", "hash-16") == {"key": "embedder", "value": "hash-16"}
    assert store.result("config", "get", "embedder").stdout == "hash-16\n"
    assert "embedder = hash-16  (default none)" in store.result("config", "list").stdout
    store.result("config", "set", "embedder", "none")
    assert store.result("config", "list").stdout == "".join(f"{key} = {KEYS[key]}\n" for key in sorted(KEYS))


def test_config_refuses_bad_keys_and_values(store: Store) -> None:
    assert_error(store.run("config", "set", "embedder", "bogus"), 2, "unknown embedder 'bogus'")
    assert_error(store.run("config", "set", "embedder", "hash-x"), 2, "unknown embedder 'hash-x'")
    assert_error(store.run("config", "set", "embedder", "hash-1"), 2, "DIM from 2 to")
    assert_error(store.run("config", "get", "colour"), 2, "unknown setting 'colour'")
    assert_error(store.run("config", "set", "colour", "red"), 2, "unknown setting 'colour'")
    assert store.result("config", "get", "embedder").stdout == "none\n"
    assert store.run("config").exit_code == 2  # no subcommand: usage
    assert_error(store.run("config", "set", "recall.require_allowed_for", "yes"), 2, "true or false")
    assert_error(store.run("config", "set", "recall.sensitivity_levels", "public"), 2, "two or more")
    assert_error(store.run("config", "set", "recall.sensitivity_levels", "a,b,a"), 2, "distinct")
    assert_error(store.run("config", "set", "recall.unlabeled_sensitivity", "a,b"), 2, "one level")


def test_config_is_one_per_store_shared_by_its_tenants(store: Store) -> None:
    assert invoke("--repo", str(store.path), "--tenant", "acme", "init").exit_code == 0
    store.result("config", "set", "embedder", "hash")
    acme = invoke("--repo", str(store.path), "--tenant", "acme", "config", "get", "embedder")
    assert acme.exit_code == 0 and acme.stdout == "hash\n"


# -- reindex -----------------------------------------------------------------------------


def test_reindex_reports_recall_counts(memories: Store) -> None:
    doc = memories.doc("reindex")
    assert list(doc) == ["entries", "recall"]
    assert doc["entries"] > 0 and doc["recall"] == 4
    human = memories.result("reindex").stdout.splitlines()
    assert human == [f"Reindexed: {doc['entries']} entries written", "Recall: 4 node versions indexed"]
    memories.put({"id": "users/mira/passport", "content": "renewed in June"})
    assert memories.doc("reindex")["recall"] == 5  # every stored version, superseded ones too
    assert memories.ids("june") == ["users/mira/passport"]


def test_reindex_vectors_needs_an_embedder_and_recomputes(memories: Store) -> None:
    assert_error(memories.run("reindex", "--vectors"), 2, "needs an embedder")
    assert memories.doc("reindex", "--vectors", MNEMO_EMBEDDER="hash")["recall"] == 4
    hits = memories.lines("search", "renew passport", MNEMO_EMBEDDER="hash")
    assert hits[0]["semantic_rank"] == 1


# -- help --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "fragment"),
    [
        (["search"], "--mode"),
        (["context"], "--budget"),
        (["reads"], "RUN_ID"),
        (["config", "get"], "KEY"),
        (["config", "set"], "minilm"),
        (["config", "list"], "JSON Lines"),
        (["reindex"], "--vectors"),
    ],
)
def test_recall_commands_have_help(command: list[str], fragment: str) -> None:
    result = invoke(*command, "--help")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"Usage: mnemo {' '.join(command)} ")
    assert fragment in result.stdout


def test_root_help_lists_the_commands_and_mnemo_embedder() -> None:
    listed = invoke("--help").stdout
    for command in ("search", "context", "reads", "config"):
        assert re.search(rf"^  {command}\s+\S", listed, re.MULTILINE), command
    assert "MNEMO_EMBEDDER" in listed

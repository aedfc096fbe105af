"""``mnemo merge``, ``contradictions``, ``bisect``, ``fsck`` and ``reindex`` through CliRunner."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.cli_harness import CliStore, assert_error, invoke

from mnemosyne import Repo
from mnemosyne.store.kv.base import Space

pytestmark = pytest.mark.usefixtures("clean_cli_env")

NODE_KEYS = ["id", "content", "kind", "provenance", "event_time", "meta", "expires_at", "hash"]
MERGE_KEYS = ["commit", "conflicts", "contradictions", "fast_forward", "up_to_date", "previous"]
COMMIT_KEYS = ["id", "tree", "parents", "record_time", "author", "message", "meta", "verified"]
FSCK_KEYS = ["ok", "problems", "objects", "commits", "reindexed", "repaired"]
HEX64 = re.compile(r"[0-9a-f]{64}")


def claim(node_id: str, value: Any, valid_from: str = "2026-06-01") -> dict[str, Any]:
    content = {"subject": "mira", "predicate": "lang", "value": value, "valid_from": valid_from}
    return {"id": node_id, "kind": "claim", "content": content}


class Store(CliStore):
    """The CLI store, plus reading one node's content."""

    def content(self, node_id: str) -> Any:
        return self.doc("show", node_id)["content"]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "agent.mnemo")


@pytest.fixture
def diverged(store: Store) -> Store:
    """main and side both changed ``k`` (a conflict) and each added an id of its own."""
    store.put({"id": "k", "content": "base"}, {"id": "shared", "content": 0}, message="base")
    store.ok("branch", "side")
    store.put({"id": "k", "content": "ours"}, {"id": "mine", "content": 1}, message="ours")
    store.put(
        {"id": "k", "content": "theirs"}, {"id": "yours", "content": 2}, message="theirs", branch="side"
    )
    return store


# -- merge ------------------------------------------------------------------------


def test_merge_conflict_resolve_and_log_session(diverged: Store) -> None:
    store = diverged
    tip = store.lines("log", "-n", "1")[0]["id"]
    stopped = store.run("merge", "side")
    assert stopped.exit_code == 1
    assert stopped.stdout == "CONFLICT (edit/edit): k\n"
    assert "--resolve" in stopped.stderr and "--strategy" in stopped.stderr
    assert "Traceback" not in stopped.output
    assert store.lines("log", "-n", "1")[0]["id"] == tip  # nothing written
    assert store.content("k") == "ours"

    as_json = store.run("merge", "side", as_json=True)
    assert as_json.exit_code == 1
    document = json.loads(as_json.stdout)
    assert list(document) == MERGE_KEYS
    assert document["commit"] is None and document["fast_forward"] is False
    assert document["up_to_date"] is False
    assert document["previous"] == store.lines("log", "-n", "1")[0]  # main's tip, unmoved
    assert document["contradictions"] == []
    (conflict,) = document["conflicts"]
    assert list(conflict) == ["id", "kind", "base", "ours", "theirs", "base_hash", "ours_hash", "theirs_hash"]
    assert (conflict["id"], conflict["kind"]) == ("k", "edit/edit")
    assert [conflict[side]["content"] for side in ("base", "ours", "theirs")] == ["base", "ours", "theirs"]
    assert list(conflict["ours"]) == NODE_KEYS

    done = store.run("merge", "side", "--resolve", "k=theirs", "-m", "take theirs", "--author", "agent-9")
    assert done.exit_code == 0, done.output
    assert re.fullmatch(r"\[main [0-9a-f]{7}\] take theirs\n", done.stdout)
    assert store.content("k") == "theirs"
    assert [n["id"] for n in store.lines("ls")] == ["k", "mine", "shared", "yours"]
    merged = store.lines("log", "-n", "1")[0]
    assert (merged["message"], merged["author"]) == ("take theirs", "agent-9")
    assert len(merged["parents"]) == 2 and merged["parents"][0] == tip
    human = store.ok("log", "-n", "1")
    assert re.search(r"^Merge:  [0-9a-f]{7} [0-9a-f]{7}$", human, re.MULTILINE)
    # the version of k now current was written on side (as git log PATH shows it)
    theirs = store.lines("log", "side", "-n", "1")[0]["id"]
    assert store.lines("log", "--node", "k", "-n", "1")[0]["id"] == theirs
    assert store.doc("blame", "k")["commit"]["id"] == theirs
    assert "Already up to date." in store.ok("merge", "side")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--strategy", "ours"), "ours"),
        (("--strategy", "theirs"), "theirs"),
        (("--resolve", "k=base"), "base"),
    ],
)
def test_merge_strategies_and_base(diverged: Store, args: tuple[str, ...], expected: str) -> None:
    tip = diverged.lines("log", "-n", "1")[0]
    document = diverged.doc("merge", "side", *args)
    assert HEX64.fullmatch(document["commit"]["id"]) and document["conflicts"] == []
    assert list(document["commit"]) == COMMIT_KEYS
    assert document["commit"] == diverged.lines("log", "-n", "1")[0]
    assert document["commit"]["parents"][0] == tip["id"] and document["previous"] == tip
    assert diverged.content("k") == expected


def test_merge_resolve_delete(diverged: Store) -> None:
    diverged.ok("merge", "side", "--resolve", "k=delete")
    assert [n["id"] for n in diverged.lines("ls")] == ["mine", "shared", "yours"]


def test_merge_bad_resolutions(diverged: Store) -> None:
    assert_error(diverged.run("merge", "side", "--resolve", "k=maybe"), 2, "'maybe' is not one of")
    assert_error(diverged.run("merge", "side", "--resolve", "k"), 2, "expected ID=CHOICE")
    assert_error(
        diverged.run("merge", "side", "--resolve", "k=ours", "--resolve", "k=theirs"), 2, "more than once"
    )
    assert_error(diverged.run("merge", "side", "--resolve", "mine=ours"), 2, "stale resolutions")
    assert diverged.run("merge", "side", "--strategy", "both").exit_code == 2
    assert_error(diverged.run("merge", "nowhere"), 3, "nowhere")
    assert_error(diverged.run("merge", "side", "--into", "ghost"), 3, "no branch named 'ghost'")
    assert diverged.content("k") == "ours"


def test_clean_json_key_merge(store: Store) -> None:
    store.put({"id": "profile", "content": {"lang": "de", "city": "Bonn", "pet": "cat"}}, message="base")
    store.ok("branch", "side")
    store.put({"id": "profile", "content": {"lang": "fr", "city": "Bonn", "pet": "cat"}}, message="lang")
    store.put({"id": "profile", "content": {"lang": "de", "city": "Köln", "pet": "cat"}}, branch="side")
    document = store.doc("merge", "side")
    assert document["conflicts"] == [] and document["fast_forward"] is False
    assert HEX64.fullmatch(document["commit"]["id"])
    assert store.content("profile") == {"lang": "fr", "city": "Köln", "pet": "cat"}
    assert len(store.lines("log", "-n", "1")[0]["parents"]) == 2


def test_fast_forward_and_up_to_date(store: Store) -> None:
    base = store.put({"id": "a", "content": 1})
    store.ok("branch", "side")
    ahead = store.put({"id": "b", "content": 2}, branch="side")
    base_commit, ahead_commit = store.lines("log", "main")[0], store.lines("log", "side")[0]
    assert (base_commit["id"], ahead_commit["id"]) == (base, ahead)
    document = store.doc("merge", "side")
    assert document == {
        "commit": ahead_commit,
        "conflicts": [],
        "contradictions": [],
        "fast_forward": True,
        "up_to_date": False,
        "previous": base_commit,
    }
    assert store.lines("log", "-n", "1")[0]["id"] == ahead
    again = store.doc("merge", "side")
    assert again == {
        "commit": ahead_commit,
        "conflicts": [],
        "contradictions": [],
        "fast_forward": False,
        "up_to_date": True,
        "previous": ahead_commit,
    }
    store.ok("branch", "old", "--from", base)
    out = store.ok("merge", "main", "--into", "old")
    assert out.splitlines() == [
        f"Updating {base[:7]}..{ahead[:7]}",
        f"Fast-forward: old is now at {ahead[:7]} m",
    ]
    assert store.ok("merge", "old") == "Already up to date.\n"


# -- contradictions ----------------------------------------------------------------


def test_contradiction_reported_by_merge_and_listed(store: Store) -> None:
    store.put({"id": "seed", "content": 0})
    store.ok("branch", "side")
    store.put(claim("c/a", "de"), message="a says de")
    store.put(claim("c/b", "fr"), message="b says fr", branch="side")
    assert store.lines("contradictions") == []

    merged = store.run("merge", "side")
    assert merged.exit_code == 0, merged.output
    assert merged.stderr == 'warning: contradiction on mira lang: c/a = "de" vs c/b = "fr"\n'
    assert re.fullmatch(r"\[main [0-9a-f]{7}\] Merge side into main\n", merged.stdout)

    (found,) = store.lines("contradictions")
    assert list(found) == ["subject", "predicate", "claims", "record"]
    assert HEX64.fullmatch(found["record"])
    assert (found["subject"], found["predicate"]) == ("mira", "lang")
    assert [node["id"] for node in found["claims"]] == ["c/a", "c/b"]
    assert all(list(node) == NODE_KEYS for node in found["claims"])
    human = store.ok("contradictions").splitlines()
    assert human[0] == "mira lang:"
    assert human[1].startswith("  c/a  ") and '= "de" from 2026-06-01T00:00:00Z' in human[1]
    # both claims stand until a commit settles it; before the merge there was none
    assert [n["id"] for n in store.lines("facts", "mira", "lang", "--valid-at", "2026-06-02")] == [
        "c/a",
        "c/b",
    ]
    assert store.lines("contradictions", "main~1") == []
    store.ok("rm", "c/b", "-m", "b was wrong")
    assert store.ok("contradictions") == ""
    assert [n["id"] for n in store.lines("facts", "mira", "--valid-at", "2026-06-02")] == ["c/a"]


def test_merge_json_lists_contradictions(store: Store) -> None:
    store.put({"id": "seed", "content": 0})
    store.ok("branch", "side")
    store.put(claim("c/a", "de"))
    store.put(claim("c/b", "fr"), branch="side")
    result = store.run("merge", "side", as_json=True)
    assert result.exit_code == 0 and result.stderr == ""
    document = json.loads(result.stdout)
    (found,) = document["contradictions"]
    assert (found["subject"], found["predicate"]) == ("mira", "lang")
    assert HEX64.fullmatch(found["record"])
    assert store.lines("contradictions") == [found]
    assert len(document["commit"]["parents"]) == 2
    assert sorted(node["content"]["value"] for node in found["claims"]) == ["de", "fr"]


# -- bisect ------------------------------------------------------------------------


@pytest.fixture
def drifting(store: Store) -> tuple[Store, list[str]]:
    """Eight commits; ``lang`` goes wrong (fr) at commit 5 and ``tmp`` appears at commit 3."""
    commits = []
    for step in range(8):
        nodes: list[dict[str, Any]] = [{"id": "counter", "content": step}]
        if step in (0, 5):
            nodes.append(
                {
                    "id": "users/mira/lang",
                    "content": "de" if step == 0 else "fr",
                    "provenance": {"agent_step": step, "observation": f"obs-{step}"},
                }
            )
        if step == 3:
            nodes.append({"id": "tmp", "content": {"n": 1}})
        commits.append(store.put(*nodes, message=f"step {step}"))
    return store, commits


def test_bisect_equals_finds_the_commit_and_blames(drifting) -> None:
    store, commits = drifting
    document = store.doc("bisect", "--good", commits[0], "--bad", "main", "--equals", "users/mira/lang", "fr")
    assert list(document) == ["commit", "blame"]
    assert list(document["commit"]) == COMMIT_KEYS
    assert document["commit"]["id"] == commits[5]
    assert document["commit"]["message"] == "step 5"
    blame = document["blame"]
    assert (blame["id"], blame["commit"]) == ("users/mira/lang", document["commit"])
    assert blame["node"]["provenance"]["observation"] == "obs-5"
    # VALUE parsed as JSON when it parses: '"fr"' is the same string
    again = store.doc(
        "bisect", "--good", commits[0], "--bad", commits[7], "--equals", "users/mira/lang", '"fr"'
    )
    assert again["commit"]["id"] == commits[5]
    human = store.ok("bisect", "--good", commits[0], "--bad", "main", "--equals", "users/mira/lang", "fr")
    assert human.startswith(f"{commits[5][:7]} is the first bad commit\ncommit {commits[5][:7]}\n")
    assert "provenance: agent_step=5 observation=obs-5" in human


def test_bisect_present_absent_and_json_values(drifting) -> None:
    store, commits = drifting
    present = store.doc("bisect", "--good", commits[0], "--bad", "main", "--present", "tmp")
    assert present["commit"]["id"] == commits[3] and present["blame"]["commit"]["id"] == commits[3]
    counter = store.doc("bisect", "--good", commits[0], "--bad", commits[6], "--equals", "counter", "6")
    assert counter["commit"]["id"] == commits[6]  # 6 is JSON: the number, not the string
    store.ok("rm", "tmp", "-m", "drop tmp")
    gone = store.doc("bisect", "--good", commits[7], "--bad", "main", "--absent", "tmp")
    assert gone["blame"] is None
    assert gone["commit"]["message"] == "drop tmp"
    human = store.run("bisect", "--good", commits[7], "--bad", "main", "--absent", "tmp")
    assert human.exit_code == 0 and "no blame" in human.stderr


def test_bisect_errors(drifting) -> None:
    store, commits = drifting
    assert_error(store.run("bisect", "--good", commits[0], "--bad", "main"), 2, "exactly one of")
    both = store.run("bisect", "--good", commits[0], "--bad", "main", "--present", "tmp", "--absent", "tmp")
    assert_error(both, 2, "exactly one of")
    assert_error(
        store.run("bisect", "--good", commits[0], "--bad", "main", "--present", "nothing"), 2, "does not hold"
    )
    assert_error(
        store.run("bisect", "--good", commits[6], "--bad", "main", "--equals", "users/mira/lang", "fr"),
        2,
        "already holds",
    )
    assert_error(
        store.run("bisect", "--good", commits[5], "--bad", commits[2], "--present", "tmp"), 2, "ancestor"
    )
    assert store.run("bisect", "--bad", "main", "--present", "tmp").exit_code == 2  # --good is required


# -- fsck and reindex ----------------------------------------------------------------


def test_fsck_ok(store: Store) -> None:
    store.put({"id": "a", "content": 1})
    store.put(claim("c/1", "de"))
    document = store.doc("fsck")
    assert list(document) == FSCK_KEYS
    assert document["ok"] is True and document["problems"] == []
    assert document["reindexed"] is None  # no repair ran
    assert document["commits"] == 2 and document["objects"] > 2
    assert re.fullmatch(r"checked \d+ objects, 2 commits: ok\n", store.ok("fsck"))


def test_fsck_finds_a_damaged_index_and_repair_fixes_it(store: Store) -> None:
    store.put({"id": "a", "content": 1})
    with Repo.open(store.path) as repo:
        repo.kv.transact(lambda t: t.put(Space.INDEX, b"\x00\x00\x00\x00cjunk", b""))

    damaged = store.run("fsck", as_json=True)
    assert damaged.exit_code == 1
    document = json.loads(damaged.stdout)
    assert document["ok"] is False
    (problem,) = document["problems"]
    assert list(problem) == ["kind", "object", "message"]
    assert problem["kind"] == "index" and "1 extra" in problem["message"]
    human = store.run("fsck")
    assert human.exit_code == 1
    assert human.stdout.startswith("index: derived indexes disagree")
    assert human.stdout.rstrip().endswith("1 problem(s)")

    repaired = store.run("fsck", "--repair", as_json=True)
    assert repaired.exit_code == 0, repaired.output
    document = json.loads(repaired.stdout)
    assert document["ok"] is True and document["problems"] == []
    assert isinstance(document["reindexed"], int) and document["reindexed"] > 0
    assert [p["kind"] for p in document["repaired"]] == ["index"]  # what the repair fixed
    assert store.doc("fsck")["ok"] is True
    assert store.doc("fsck", "--repair")["reindexed"] is None  # nothing to repair


def test_fsck_repair_human_and_reindex(store: Store) -> None:
    store.put({"id": "a", "content": 1})
    with Repo.open(store.path) as repo:
        repo.kv.transact(lambda t: t.put(Space.INDEX, b"\x00\x00\x00\x00cjunk", b""))
    repaired = store.run("fsck", "--repair")
    assert repaired.exit_code == 0, repaired.output
    assert re.fullmatch(
        r"repairing index: derived indexes disagree .*\n"
        r"rebuilt the derived indexes \(\d+ entries written\) and checked again\n",
        repaired.stderr,
    )
    assert repaired.stdout.endswith(": ok\n")
    written = store.doc("reindex")["entries"]
    assert isinstance(written, int) and written > 0
    assert store.ok("reindex") == f"Reindexed: {written} entries written\nRecall: 1 node version indexed\n"
    assert store.doc("fsck")["ok"] is True


def test_fsck_repair_leaves_other_problems(store: Store) -> None:
    store.put({"id": "a", "content": "precious"})
    node_hash = store.doc("show", "a")["hash"]
    with Repo.open(store.path) as repo:
        key = b"\x00\x00\x00\x00" + bytes.fromhex(node_hash)
        repo.kv.transact(lambda t: t.put(Space.OBJECTS, key, b"not the bytes"))
    result = store.run("fsck", "--repair")
    assert result.exit_code == 1
    assert f"corrupt {node_hash[:7]}: bytes do not match the hash" in result.stdout
    assert "cannot repair" in result.stderr


def test_new_commands_have_help() -> None:
    listed = invoke("--help").stdout
    for command in ("merge", "bisect", "contradictions", "facts", "timeline", "fsck", "reindex", "tenant"):
        assert re.search(rf"^  {command}\s+\S", listed, re.MULTILINE), command
        result = invoke(command, "--help")
        assert result.exit_code == 0, command
        assert result.stdout.startswith(f"Usage: mnemo {command} "), command

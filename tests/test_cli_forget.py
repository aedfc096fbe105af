"""``mnemo forget`` and ``mnemo gc``, and erased versions in the other commands.

In-process through Typer's CliRunner, plus one run of the real executable that
forgets a canary, collects and compacts, and then finds it in no file.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from support.cli_harness import CliStore, assert_error

from mnemosyne import Repo
from mnemosyne.model.times import parse_duration
from mnemosyne.store.kv.base import Space

HEX64 = re.compile(r"[0-9a-f]{64}")
RFC3339_Z = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
REDACTION_KEYS = ["id", "hash", "time", "author", "reason"]
COMMIT_KEYS = ["id", "tree", "parents", "record_time", "author", "message", "meta", "verified"]
GC_KEYS = [
    "objects_removed",
    "bytes_removed",
    "commits_removed",
    "pending",
    "reflog_entries_removed",
    "compacted",
    "file_bytes_before",
    "file_bytes_after",
]
SCOPE = b"\x00\x00\x00\x00"


class Store(CliStore):
    """The CLI store, committing as ``agent``."""

    author = "agent"

    def hashes(self, node_id: str, ref: str = "HEAD") -> list[str]:
        """Hashes of the versions of ``node_id``, newest first."""
        return [line["hash"] for line in self.lines("history", node_id, "--at", ref)]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MNEMO_DIR", raising=False)
    monkeypatch.setenv("MNEMO_AUTHOR", "tester")


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


@pytest.fixture
def two_branches(store: Store) -> Store:
    """``n`` written three times on main; ``side`` branched at the second version."""
    store.put({"id": "n", "content": "one"}, {"id": "other", "content": "o"}, message="1")
    store.put({"id": "n", "content": "two\nlines"}, message="2")
    store.result("branch", "side")
    store.put({"id": "n", "content": "three"}, message="3")
    return store


# -- forget ----------------------------------------------------------------------------


def test_forget_prints_the_records_and_the_commit_that_removed_the_id(two_branches: Store) -> None:
    store = two_branches
    hashes = store.hashes("n")
    head = store.lines("log")[0]["id"]
    done = store.doc("forget", "n", "--reason", "asked to", "--author", "dpo")
    assert list(done) == ["redactions", "already_erased", "commit"]
    assert done["already_erased"] == []
    assert list(done["commit"]) == COMMIT_KEYS
    assert [list(r) for r in done["redactions"]] == [REDACTION_KEYS] * 3
    assert [r["hash"] for r in done["redactions"]] == hashes
    assert {(r["id"], r["author"], r["reason"]) for r in done["redactions"]} == {("n", "dpo", "asked to")}
    assert all(RFC3339_Z.fullmatch(r["time"]) for r in done["redactions"])
    (newest, previous) = store.lines("log", "-n", "2")
    assert newest == done["commit"]
    assert (newest["parents"], previous["id"]) == ([head], head)
    assert newest["message"] == "forget n: asked to" and newest["author"] == "dpo"
    assert [n["id"] for n in store.lines("ls")] == ["other"]
    # Again: the first records stand, nothing moves.
    again = store.run("forget", "n", "--reason", "again")
    assert again.exit_code == 0 and again.stdout == ""
    assert again.stderr.splitlines() == [
        f"already erased: {full[:7]}  n  erased at {r['time'][:19]}Z by dpo: asked to"
        for full, r in zip(hashes, done["redactions"], strict=True)
    ]
    assert store.doc("forget", "n", "--reason", "again") == {
        "redactions": [],
        "already_erased": done["redactions"],
        "commit": None,
    }


def test_forget_human_output(two_branches: Store) -> None:
    store = two_branches
    hashes = store.hashes("n")
    result = store.result("forget", "n", "--reason", "gdpr", "--author", "dpo")
    lines = result.stdout.splitlines()
    assert len(lines) == 3
    for line, full in zip(lines, hashes, strict=True):
        assert re.fullmatch(rf"erased {full[:7]}  n  \S+Z  dpo  gdpr", line), line
    assert "removed from branch main in commit" in result.stderr
    assert "mnemo gc --now --compact" in result.stderr


def test_forget_one_version(two_branches: Store) -> None:
    store = two_branches
    newest, middle, oldest = store.hashes("n")
    head = store.lines("log")[0]["id"]
    done = store.doc("forget", "n", "--reason", "old", "--version", oldest[:8])
    assert [r["hash"] for r in done["redactions"]] == [oldest] and done["commit"] is None
    assert store.lines("log")[0]["id"] == head
    assert store.doc("show", "n")["content"] == "three"
    done = store.doc("forget", "n", "--reason", "current", "--version", newest)
    assert done["commit"] is not None and done["commit"]["id"] != head
    assert done["commit"]["parents"] == [head]
    assert_error(store.run("show", "n"), 3, "n is not in HEAD")
    assert store.doc("show", "n", "--at", "side")["hash"] == middle  # not erased, not current here
    assert_error(
        store.run("forget", "n", "--reason", "x", "--version", "0123456789abcdef" * 4), 3, "no such version"
    )
    too_short = store.run("forget", "n", "--reason", "x", "--version", "ab")
    assert_error(too_short, 2, "not a hash or a prefix of at least 4 hex characters")


def test_forget_refuses_bad_usage_with_one_line(store: Store) -> None:
    store.put({"id": "n", "content": "v"})
    assert_error(store.run("forget", "n"), 2, "--reason")
    assert_error(store.run("forget", "n", "--reason", "  "), 2, "--reason")
    assert_error(store.run("forget", "--reason", "r"), 2, "--expired")
    assert_error(store.run("forget", "n", "--expired"), 2, "no ID")
    assert_error(store.run("forget", "--expired", "--version", "abcd"), 2, "no ID and no --version")
    assert_error(store.run("forget", "nobody", "--reason", "r"), 3, "nobody has no versions")
    assert store.doc("show", "n")["content"] == "v"  # nothing was erased


def test_forget_several_ids_in_one_commit_or_none(two_branches: Store) -> None:
    store = two_branches
    head = store.lines("log")[0]["id"]
    assert_error(store.run("forget", "n", "nobody", "--reason", "r"), 3, "nobody has no versions")
    assert store.doc("show", "n")["content"] == "three" and store.lines("log")[0]["id"] == head
    assert_error(store.run("forget", "n", "other", "--version", "abcd", "--reason", "r"), 2, "exactly one id")
    done = store.doc("forget", "n", "other", "--reason", "asked")
    assert sorted({r["id"] for r in done["redactions"]}) == ["n", "other"]
    assert done["commit"]["parents"] == [head] and done["commit"]["message"] == "forget n, other: asked"
    assert store.lines("log")[1]["id"] == head  # one commit dropped both


def test_forget_expired(store: Store) -> None:
    store.put(
        {"id": "old", "content": "gone", "expires_at": "2001-01-01T00:00:00Z"},
        {"id": "new", "content": "stays", "expires_at": "2999-01-01T00:00:00Z"},
        {"id": "plain", "content": "stays"},
    )
    old_hash = store.doc("show", "old", "--include-expired")["hash"]
    done = store.doc("forget", "--expired", "--author", "retention")
    assert [(r["id"], r["hash"], r["reason"], r["author"]) for r in done["redactions"]] == [
        ("old", old_hash, "expired", "retention")
    ]
    assert done["commit"] == store.lines("log")[0]
    assert [n["id"] for n in store.lines("ls", "--include-expired")] == ["new", "plain"]
    assert store.doc("forget", "--expired", "--reason", "policy") == {
        "redactions": [],
        "already_erased": [],
        "commit": None,
    }
    quiet = store.run("forget", "--expired")
    assert quiet.exit_code == 0 and "no version is past its expires_at" in quiet.stderr


# -- erased versions in the other commands ---------------------------------------------


def test_show_of_an_erased_version_is_one_line_and_exit_3(two_branches: Store) -> None:
    store = two_branches
    store.result("forget", "n", "--reason", "asked to", "--author", "dpo")
    result = store.run("show", "n", "--at", "side")
    assert_error(result, 3, "was erased at ")
    assert "by dpo: asked to" in result.stderr
    assert_error(store.run("--json", "show", "n", "--at", "side"), 3, "by dpo: asked to")


def test_history_shows_erased_versions_as_redacted(two_branches: Store) -> None:
    store = two_branches
    newest, middle, oldest = store.hashes("n")
    store.result("forget", "n", "--reason", "r", "--version", oldest)
    lines = store.lines("history", "n")
    assert [(line["hash"], line["status"]) for line in lines] == [
        (newest, "current"),
        (middle, "superseded"),
        (oldest, "redacted"),
    ]
    assert lines[2]["node"] is None and HEX64.fullmatch(lines[2]["commit"]["id"])
    assert lines[2]["commit"]["message"] == "1"
    record = lines[2]["redaction"]
    assert list(record) == REDACTION_KEYS
    assert (record["id"], record["hash"], record["author"], record["reason"]) == ("n", oldest, "tester", "r")
    assert lines[0]["redaction"] is None and lines[1]["redaction"] is None
    assert lines[0]["node"]["content"] == "three"
    human = store.result("history", "n").stdout.splitlines()
    assert human[2].startswith(f"{oldest[:7]}  redacted")
    assert human[2].endswith(f"(erased at {record['time'][:19]}Z by tester: r)")
    assert "(erased" not in human[0] + human[1]


def test_diff_shows_an_erased_side_as_redacted(two_branches: Store) -> None:
    store = two_branches
    newest, middle, oldest = store.hashes("n")
    store.result("forget", "n", "--reason", "r", "--version", oldest)
    text = store.result("diff", "HEAD~2", "HEAD~1").stdout.splitlines()
    assert text[0] == "~ n"
    assert text[1] == f"    -[redacted] {oldest[:7]}"
    assert text[2:] == ["    +two", "    +lines"]
    document = store.doc("diff", "HEAD~2", "HEAD~1")
    assert (document["added"], document["removed"]) == ([], [])
    (change,) = document["modified"]
    assert (change["id"], change["old"], change["old_hash"], change["redacted"]) == ("n", None, oldest, True)
    assert (change["new"]["content"], change["new_hash"]) == ("two\nlines", middle)
    (live,) = store.doc("diff", "HEAD~1", "HEAD")["modified"]
    assert (live["old_hash"], live["new_hash"], live["redacted"]) == (middle, newest, False)
    store.result("forget", "n", "--reason", "r")
    both = store.result("diff", "side", "HEAD~1").stdout.splitlines()  # three (erased) vs two (erased)
    assert both == ["~ n", f"    -[redacted] {middle[:7]}", f"    +[redacted] {newest[:7]}"]
    gone = store.result("diff", "HEAD~1", "HEAD").stdout.splitlines()
    assert gone == ["- n", f"    -[redacted] {newest[:7]}"]
    assert store.doc("diff", "HEAD~1", "HEAD") | {"a": "", "b": ""} == {
        "a": "",
        "b": "",
        "added": [],
        "removed": [
            {"id": "n", "old": None, "new": None, "old_hash": newest, "new_hash": None, "redacted": True}
        ],
        "modified": [],
    }


def test_blame_of_an_erased_current_version(two_branches: Store) -> None:
    store = two_branches
    writer = store.lines("log", "side")[0]
    middle = store.hashes("n", "side")[0]
    store.result("forget", "n", "--reason", "asked to", "--author", "dpo")
    document = store.doc("blame", "n", "--at", "side")
    assert (document["node"], document["redacted"], document["lines"]) == (None, True, [])
    assert (document["id"], document["hash"], document["commit"]) == ("n", middle, writer)
    assert (document["commit"]["author"], document["commit"]["message"]) == ("agent", "2")
    record = document["redaction"]
    assert list(record) == REDACTION_KEYS
    assert (record["id"], record["hash"], record["author"]) == ("n", middle, "dpo")
    assert record["reason"] == "asked to"
    result = store.result("blame", "n", "--at", "side")
    text = result.stdout
    assert f"commit:     {writer['id'][:7]}" in text
    assert f"hash:       {middle[:7]} [redacted]" in text
    assert "provenance: [redacted]" in text
    assert f"(erased) erased at {record['time'][:19]}Z by dpo: asked to" in text
    assert "two" not in text
    live = store.doc("blame", "other")
    assert live["redacted"] is False and live["node"]["content"] == "o" and live["lines"]


def test_bisect_blames_an_erased_version_as_redacted(store: Store) -> None:
    good = store.put({"id": "a", "content": "1"})
    store.put({"id": "x", "content": "bad"})
    store.put({"id": "a", "content": "2"})
    store.result("branch", "probe")  # keeps the erased version's hash; main drops the id
    erased = store.hashes("x")[0]
    store.result("forget", "x", "--reason", "r")
    document = store.doc("bisect", "--good", good, "--bad", "probe", "--present", "x")
    assert document["commit"]["parents"] == [good]
    blamed = document["blame"]
    assert (blamed["redacted"], blamed["node"], blamed["hash"]) == (True, None, erased)
    assert blamed["commit"] == document["commit"]
    assert blamed["redaction"]["hash"] == erased and blamed["lines"] == []
    text = store.result("bisect", "--good", good, "--bad", "probe", "--present", "x").stdout
    assert f"hash:       {erased[:7]} [redacted]" in text
    assert f"(erased) erased at {blamed['redaction']['time'][:19]}Z by tester: r" in text


# -- gc ----------------------------------------------------------------------------------


def test_gc_reports_what_it_removed(store: Store) -> None:
    first = store.put({"id": "a", "content": "a"}, message="1")
    store.put({"id": "b", "content": "only in an orphan"}, message="2")
    store.result("reset", "main", first)
    store.put({"id": "d", "content": "d"}, message="3")
    report = store.doc("gc")
    assert list(report) == GC_KEYS
    assert report == dict.fromkeys(GC_KEYS, 0) | {
        "compacted": False,
        "file_bytes_before": None,
        "file_bytes_after": None,
    }  # the reflog still reaches the orphan
    pruned = store.doc("gc", "--grace", "1h", "--expire-reflog", "0s")
    assert pruned["reflog_entries_removed"] == 3  # of four: the newest stays
    assert pruned["objects_removed"] == 0 and pruned["pending"] >= 3  # commit, tree, node
    removed = store.doc("gc", "--now")
    assert removed["objects_removed"] == pruned["pending"] and removed["pending"] == 0
    assert removed["commits_removed"] == 1 and removed["bytes_removed"] > 0
    text = store.result("gc", "--now", "--compact").stdout.splitlines()
    assert text[0] == "removed 0 objects (0 commits), 0 bytes"
    assert text[1] == "kept 0 unreachable objects until their grace period ends"
    assert re.fullmatch(r"compacted the store file: (\d+) -> (\d+) bytes \((\d+) bytes saved\)", text[2])
    compacted = store.doc("gc", "--now", "--compact")
    assert compacted["compacted"] is True
    assert compacted["file_bytes_after"] <= compacted["file_bytes_before"]
    assert [n["id"] for n in store.lines("ls")] == ["a", "d"]
    assert store.doc("fsck")["ok"] is True


def test_gc_refuses_bad_durations(store: Store) -> None:
    assert_error(store.run("gc", "--grace", "14"), 2, "--grace: '14' is not a duration")
    assert_error(store.run("gc", "--grace", "1.5h"), 2, "--grace")
    assert_error(store.run("gc", "--expire-reflog", "soon"), 2, "--expire-reflog")
    assert_error(store.run("gc", "--now", "--grace", "1d"), 2, "not both")


def test_parse_duration() -> None:
    assert parse_duration("14d", "--grace") == timedelta(days=14)
    assert parse_duration("12h", "--grace") == timedelta(hours=12)
    assert parse_duration("30m", "--grace") == timedelta(minutes=30)
    assert parse_duration("0s", "--grace") == timedelta(0)
    assert parse_duration("2w", "--grace") == timedelta(weeks=2)
    assert parse_duration("1d12h30m", "--grace") == timedelta(days=1, hours=12, minutes=30)
    for bad in ("", "14", "d", "1.5h", "-1d", "14 d", " 14d", "14D", "1y"):
        with pytest.raises(ValueError, match="is not a duration"):
            parse_duration(bad, "--grace")


HOLDER = """
import sys, time
from mnemosyne import Repo
repo = Repo.open(sys.argv[1])
print("open", flush=True)
time.sleep(60)
"""


def test_gc_compact_while_another_process_has_the_store_open(store: Store) -> None:
    store.put({"id": "n", "content": "v"})
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(store.path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        result = store.run("gc", "--now", "--compact")
        assert_error(result, 2, "compaction needs the store to itself: another process has it open")
    finally:
        holder.terminate()
        holder.wait(timeout=10)
    assert store.doc("gc", "--now", "--compact")["compacted"] is True


# -- corruption ------------------------------------------------------------------------


def test_a_corrupt_version_is_exit_5_and_fsck_names_it(store: Store) -> None:
    store.put({"id": "n", "content": "fine"}, {"id": "m", "content": "also fine"})
    target = store.doc("show", "n")["hash"]
    with Repo.open(store.path) as repo:

        def corrupt(txn: Any) -> None:
            key = SCOPE + bytes.fromhex(target)
            data = txn.get(Space.OBJECTS, key)
            txn.put(Space.OBJECTS, key, data[:-1] + bytes([data[-1] ^ 1]))

        repo.kv.transact(corrupt)
    assert_error(store.run("show", "n"), 5, f"object {target} is corrupt")
    report = store.run("--json", "fsck")
    assert report.exit_code == 1
    problems = json.loads(report.stdout)["problems"]
    assert [(p["kind"], p["object"]) for p in problems] == [("corrupt", target)]
    assert store.doc("show", "m")["content"] == "also fine"


# -- the real executable -----------------------------------------------------------------


@pytest.mark.slow
def test_forget_gc_compact_in_a_real_process_leaves_no_canary(tmp_path: Path) -> None:
    canary = f"canary-{uuid.uuid4().hex}"
    env = {k: v for k, v in os.environ.items() if k not in ("MNEMO_DIR", "MNEMO_AUTHOR")}

    def mnemo(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mnemo_cli", "--repo", str(tmp_path / "s"), *args],
            input=input,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )

    assert mnemo("init").returncode == 0
    for text in (f"{canary} one", f"{canary} two"):
        node = json.dumps({"id": "diary", "content": text, "meta": {"secret": canary}})
        assert mnemo("commit", "-m", "write", input=node).returncode == 0
    claim = {
        "id": "claims/1",
        "kind": "claim",
        "content": {"subject": canary, "predicate": "p", "value": 1, "valid_from": "2026-06-01T00:00:00Z"},
    }
    assert mnemo("commit", "-m", "claim", input=json.dumps(claim)).returncode == 0
    data = tmp_path / "s" / "data.mdb"
    assert canary.encode() in data.read_bytes()
    for node_id in ("diary", "claims/1"):
        done = mnemo("--json", "forget", node_id, "--reason", "asked", "--author", "dpo")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["commit"] is not None
    gc = mnemo("--json", "gc", "--now", "--compact")
    assert gc.returncode == 0, gc.stderr
    assert json.loads(gc.stdout)["compacted"] is True
    for file in (tmp_path / "s").rglob("*"):
        if file.is_file():
            assert canary.encode() not in file.read_bytes(), file
    history = mnemo("--json", "history", "diary")
    assert history.returncode == 0 and canary not in history.stdout
    assert [json.loads(line)["status"] for line in history.stdout.splitlines()] == ["redacted"] * 2
    facts = mnemo("facts", canary)
    assert (facts.returncode, facts.stdout) == (0, "")
    shown = mnemo("show", "diary", "--at", "HEAD~2")
    assert shown.returncode == 3
    assert shown.stderr.startswith("error: version ") and shown.stderr.endswith("by dpo: asked\n")
    assert mnemo("fsck").returncode == 0


def test_a_merge_conflict_with_an_erased_side_says_which_side(two_branches: Store) -> None:
    store = two_branches
    store.put({"id": "n", "content": "side"}, message="s", branch="side")
    side_hash = store.hashes("n", "side")[0]
    store.result("forget", "n", "--reason", "r", "--version", side_hash)
    stopped = store.run("merge", "side")
    assert stopped.exit_code == 1, stopped.output
    assert stopped.stdout == "CONFLICT (edit/edit): n (theirs: erased)\n"
    document = store.run("merge", "side", as_json=True)
    assert document.exit_code == 1
    (conflict,) = json.loads(document.stdout)["conflicts"]
    assert (conflict["theirs"], conflict["theirs_hash"]) == (None, side_hash)
    assert conflict["ours"]["content"] == "three" and conflict["ours_hash"] == store.hashes("n")[0]

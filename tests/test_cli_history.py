"""``mnemo history`` for people: each version says what ended it, as its JSON does (issue 22, item 12)."""

from __future__ import annotations

from pathlib import Path

from support.cli_harness import CliStore


def test_history_shows_the_commit_that_ended_each_version_and_what_replaced_it(tmp_path: Path) -> None:
    store = CliStore(tmp_path / "s.mnemo")
    store.put({"id": "k", "content": "one"}, message="first")
    store.put({"id": "k", "content": "two"}, message="second")
    store.ok("rm", "k", "-m", "gone", "--author", "tester")
    store.put({"id": "k", "content": "three"}, message="back")
    versions = store.lines("history", "k")
    assert [v["status"] for v in versions] == ["current", "deleted", "superseded"]
    lines = store.ok("history", "k").splitlines()
    assert len(lines) == len(versions)
    current, deleted, superseded = zip(lines, versions, strict=True)
    assert "ended by" not in current[0] and "superseded by" not in current[0]
    line, version = deleted
    assert line.endswith(f"  second  (ended by {version['ended_by'][:7]})")
    line, version = superseded
    assert line.endswith(
        f"  first  (ended by {version['ended_by'][:7]}, superseded by {version['superseded_by'][:7]})"
    )
    # What ended a version is the commit that wrote its successor, or removed the id.
    assert version["ended_by"] == deleted[1]["commit"]["id"]
    assert version["superseded_by"] == deleted[1]["hash"]


def test_an_erased_version_says_what_ended_it_and_who_erased_it(tmp_path: Path) -> None:
    store = CliStore(tmp_path / "s.mnemo")
    store.put({"id": "p", "content": "C01X00T47"}, message="read off the scan")
    store.ok("forget", "p", "--reason", "asked", "--author", "dpo")
    (version,) = store.lines("history", "p")
    assert version["status"] == "redacted" and version["ended_by"] is not None
    (line,) = store.ok("history", "p").splitlines()
    assert f"read off the scan  (ended by {version['ended_by'][:7]})  (erased at " in line
    assert line.endswith("by dpo: asked)")

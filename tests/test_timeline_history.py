"""Repo.timeline_history: the commits of a branch where one (subject, predicate) timeline changed.

Rows follow the branch's first-parent history, so a claim counts where it
reached the branch: the commit that wrote it, the merge that brought it in, the
source's commits for a fast-forward or a clone.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.clocks import Clock

from mnemosyne import Claim, InvalidInput, Node, NotFound, Repo, TimelineChange, from_json, to_json


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def city(event: str, value: str, valid_from: str, valid_to: str | None = None) -> Node:
    claim = Claim(
        "mira", "city", value, valid_from=at(valid_from), valid_to=at(valid_to) if valid_to else None
    )
    return Node(id=f"claims/mira/city/{event}", kind="claim", content=claim)


def rows(changes: list[TimelineChange]) -> list[tuple[str, list[str]]]:
    return [(c.commit.message, [f.id.rsplit("/", 1)[1] for f in c.timeline]) for c in changes]


def test_commits_that_wrote_changed_or_removed_a_claim_are_rows_others_are_not():
    with Repo.in_memory(clock=Clock()) as repo:
        repo.commit([city("a", "Berlin", "2026-06-01")], message="a")
        repo.commit([Node(id="notes/x", content="unrelated")], message="note")
        repo.commit(
            [
                Node(
                    id="claims/mira/pet/1",
                    kind="claim",
                    content=Claim("mira", "pet", "cat", at("2026-06-01")),
                )
            ],
            message="another predicate",
        )
        repo.commit([city("b", "Lisbon", "2026-06-08")], message="b")
        repo.commit([city("a", "Berlin", "2026-06-01", "2026-06-05")], message="a ends")
        repo.commit(delete=["claims/mira/city/b"], message="b was wrong")
        changes = repo.timeline_history("mira", "city")
        assert rows(changes) == [
            ("a", ["a"]),
            ("b", ["a", "b"]),
            ("a ends", ["a", "b"]),
            ("b was wrong", ["a"]),
        ]
        for change in changes:  # each row is the timeline at its commit
            assert change.timeline == repo.timeline("mira", "city", at=change.commit.id)
            assert change.contradictions == []
        assert changes[2].timeline[0].effective_to == at("2026-06-05")
        assert rows(repo.timeline_history("mira", "city", limit=2)) == rows(changes)[-2:]
        assert repo.timeline_history("mira", "city", limit=0) == []
        assert repo.timeline_history("mira", "nothing") == []
        assert from_json(to_json(changes[1]), TimelineChange) == changes[1]


def test_a_merge_that_brings_claims_in_is_the_row_and_names_the_contradiction_until_resolved():
    with Repo.in_memory(clock=Clock()) as repo:
        repo.commit([city("a", "Berlin", "2026-06-01")], message="a")
        repo.branch("side")
        repo.commit([city("b", "Lisbon", "2026-06-08")], message="lisbon")
        repo.commit([city("c", "Porto", "2026-06-08")], message="porto", branch="side")
        merged = repo.merge("side")
        assert merged.commit is not None and merged.contradictions
        repo.commit(
            [city("c", "Porto", "2026-06-08", "2026-06-09")],
            message="porto was a day trip",
            on_claim_conflict="keep",
        )
        changes = repo.timeline_history("mira", "city")
        # The side branch's own commit is not on main's first-parent line: the merge is.
        assert rows(changes) == [
            ("a", ["a"]),
            ("lisbon", ["a", "b"]),
            ("Merge side into main", ["a", "b", "c"]),
            ("porto was a day trip", ["a", "b", "c"]),
        ]
        merge_row = changes[2]
        assert merge_row.commit.id == merged.commit.id
        (found,) = merge_row.contradictions
        assert {n.id for n in found.claims} == {"claims/mira/city/b", "claims/mira/city/c"}
        assert found == repo.contradictions(at=merged.commit.id)[0]
        assert changes[3].contradictions == []  # the correction resolved it
        # The side branch's own history has its commit as the row.
        assert rows(repo.timeline_history("mira", "city", at="side")) == [("a", ["a"]), ("porto", ["a", "c"])]


def test_a_fast_forward_brings_the_source_commits_as_rows():
    with Repo.in_memory(clock=Clock()) as repo:
        repo.commit([city("a", "Berlin", "2026-06-01")], message="a")
        repo.branch("side")
        repo.commit([city("b", "Lisbon", "2026-06-08")], message="b", branch="side")
        repo.commit([city("c", "Porto", "2026-06-15")], message="c", branch="side")
        assert repo.merge("side").fast_forward
        assert rows(repo.timeline_history("mira", "city")) == [
            ("a", ["a"]),
            ("b", ["a", "b"]),
            ("c", ["a", "b", "c"]),
        ]


def test_a_clone_has_the_source_history_as_rows_and_as_of_reads_the_branch_then(tmp_path: Path):
    clock = Clock()
    with Repo.init(tmp_path / "origin.mnemo", clock=clock) as origin:
        origin.commit([city("a", "Berlin", "2026-06-01")], message="a")
        origin.commit([city("b", "Lisbon", "2026-06-08")], message="b")
        expected = rows(origin.timeline_history("mira", "city"))
    with Repo.clone(tmp_path / "origin.mnemo", tmp_path / "clone.mnemo", clock=clock) as clone:
        changes = clone.timeline_history("mira", "city")
        assert rows(changes) == expected == [("a", ["a"]), ("b", ["a", "b"])]
        written = changes[0].commit.record_time
        # The clone's main did not exist when the source wrote its commits.
        with pytest.raises(NotFound):
            clone.timeline_history("mira", "city", as_of=written)
        clone.commit([city("c", "Porto", "2026-06-15")], message="c")
        later = clone.now()
        clone.commit(delete=["claims/mira/city/c"], message="not Porto")
        assert rows(clone.timeline_history("mira", "city", as_of=later)) == [
            *expected,
            ("c", ["a", "b", "c"]),
        ]


def test_bad_arguments_are_refused_and_an_empty_branch_has_no_rows():
    with Repo.in_memory(clock=Clock()) as repo:
        assert repo.timeline_history("mira", "city") == []
        repo.commit([city("a", "Berlin", "2026-06-01")], message="a")
        for bad in (-1, 1.5, True, "2"):
            with pytest.raises(InvalidInput):
                repo.timeline_history("mira", "city", limit=bad)  # type: ignore[arg-type]
        with pytest.raises(NotFound):
            repo.timeline_history("mira", "city", at="nope")
        for subject, predicate in (("", "city"), ("mira", ""), (None, "city")):
            with pytest.raises(InvalidInput, match="must be a non-empty string"):
                repo.timeline_history(subject, predicate)  # type: ignore[arg-type]

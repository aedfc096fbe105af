"""Cheap reads faces rely on: ``Repo.tip``, ``Repo.redactions``, ``history(limit=)``."""

from __future__ import annotations

import pytest

from mnemosyne import InvalidInput, Node, Repo
from mnemosyne.store.object_store import ObjectStore


def _no_commit_read(*args: object) -> None:
    raise AssertionError("a commit read")


def test_tip_follows_the_branch_without_reading_the_commit() -> None:
    with Repo.in_memory() as repo:
        assert repo.tip("main") is None  # no commits yet
        assert repo.tip("nowhere") is None
        first = repo.commit([Node(id="a", content="1")], message="one")
        assert repo.tip("main") == first.id == repo.resolve("main").id
        repo.branch("side")
        second = repo.commit([Node(id="a", content="2")], message="two", branch="side")
        assert (repo.tip("main"), repo.tip("side")) == (first.id, second.id)
        repo.reset("side", first.id)
        assert repo.tip("side") == first.id
        with pytest.MonkeyPatch.context() as patch:  # a tip is read without reading a commit
            patch.setattr(ObjectStore, "commit", _no_commit_read)
            assert repo.tip("main") == first.id
            with pytest.raises(AssertionError, match="commit read"):
                repo.resolve("main")  # the patch is in force
        with pytest.raises(InvalidInput, match="not a valid branch name"):
            repo.tip("../x")


def test_redactions_name_the_erased_versions_only() -> None:
    with Repo.in_memory() as repo:
        repo.commit([Node(id="a", content="secret"), Node(id="b", content="kept")], message="one")
        a, b = repo.get("a"), repo.get("b")
        assert a is not None and b is not None
        assert repo.redactions([a.hash, b.hash]) == {}
        repo.forget("a", "asked to", author="dpo")
        found = repo.redactions([a.hash, b.hash])
        assert list(found) == [a.hash] and found[a.hash].author == "dpo"
        assert repo.redactions([]) == {}
        for bad in (["xyz"], [a.hash[:12]], [b"\x00" * 32]):
            with pytest.raises(InvalidInput, match="64 hex digits"):
                repo.redactions(bad)  # type: ignore[arg-type]


def test_history_limit_gives_the_newest_versions_as_the_full_history_does() -> None:
    with Repo.in_memory() as repo:
        for i in range(12):
            repo.commit([Node(id="a", content=f"v{i}")], message=f"v{i}")
            if i == 5:
                repo.commit(delete=["a"], message="gone")
        full = repo.history("a")
        assert len(full) == 12 and full[0].status == "current"
        for limit in (0, 1, 5, 7, 12, 50):
            assert repo.history("a", limit=limit) == full[:limit]
        for bad in (-1, 1.5, True, "3"):
            with pytest.raises(InvalidInput, match="limit"):
                repo.history("a", limit=bad)  # type: ignore[arg-type]

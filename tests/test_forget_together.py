"""Forgetting several ids at once: one transaction, one commit, all or nothing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemosyne import InvalidInput, Node, NotFound, Redacted, Repo

IDS = [f"people/{name}" for name in ("ana", "bo", "cy", "di")]


def _store() -> tuple[Repo, str]:
    repo = Repo.in_memory()
    first = repo.commit([Node(id=i, content=f"secret of {i}") for i in IDS[:3]], message="three")
    repo.commit([Node(id=IDS[0], content="newer secret of ana")], message="ana again")
    return repo, first.id


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(IDS), min_size=1, max_size=5))
def test_several_ids_go_together_or_not_at_all(wanted):
    repo, first = _store()
    log_before = [c.id for c in repo.log()]
    if IDS[3] in wanted:  # never written: nothing may be erased
        with pytest.raises(NotFound, match="people/di has no versions"):
            repo.forget(wanted, "asked to")
        assert [c.id for c in repo.log()] == log_before
        assert repo.erasures() == 0
        for node_id in IDS[:3]:
            assert repo.get(node_id, at=first).content == f"secret of {node_id}"
        return
    report = repo.forget(wanted, "asked to")
    distinct = set(wanted)
    assert {r.id for r in report.redactions} == distinct
    # ana has two versions; each other id one.
    assert len(report.redactions) == sum(2 if i == IDS[0] else 1 for i in distinct)
    assert report.commit is not None
    assert [c.id for c in repo.log()] == [report.commit.id, *log_before]  # one commit drops them all
    assert {c.id for c in repo.diff(log_before[0], report.commit.id).removed} == distinct
    for node_id in IDS[:3]:
        if node_id in distinct:
            with pytest.raises(Redacted, match="asked to"):
                repo.get(node_id, at=first)
        else:
            assert repo.get(node_id, at=first).content == f"secret of {node_id}"


def test_one_id_is_as_before_and_bad_calls_erase_nothing():
    repo, _ = _store()
    with pytest.raises(InvalidInput, match="at least one id"):
        repo.forget([], "asked to")
    with pytest.raises(InvalidInput, match="iterable\\), not int"):
        repo.forget(5, "asked to")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="exactly one id"):
        repo.forget(IDS[:2], "asked to", version="abcd")
    with pytest.raises(InvalidInput, match="reason"):
        repo.forget(IDS[:2], "  ")
    assert repo.erasures() == 0
    report = repo.forget(IDS[1], "asked to")
    assert [r.id for r in report.redactions] == [IDS[1]]
    assert report.commit is not None and report.commit.message == f"forget {IDS[1]}: asked to"

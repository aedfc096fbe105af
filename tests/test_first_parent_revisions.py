"""``REV~N`` through the commit graph's skip pointers: the same commit as N first-parent steps."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mnemosyne import Node, NotFound, Repo

# Each step: a commit on main, a commit on the side branch, or a merge of side into main.
steps = st.lists(st.sampled_from(["main", "main", "side", "merge"]), min_size=1, max_size=40)


def _build(repo: Repo, plan: list[str]) -> None:
    repo.commit([Node(id="root", content=0)], message="root")
    repo.branch("side")
    for at, step in enumerate(plan):
        if step == "merge":
            repo.merge("side", message=f"merge {at}", strategy="theirs")
        else:
            repo.commit([Node(id=f"{step}/{at}", content=at)], branch=step, message=f"{step} {at}")


def _walked(repo: Repo, rev: str, n: int) -> str | None:
    """The n-th first-parent ancestor, a commit at a time; None past the root."""
    commit = repo.resolve(rev)
    for _ in range(n):
        if not commit.parents:
            return None
        commit = repo.resolve(commit.parents[0])
    return commit.id


@settings(max_examples=25, deadline=None)
@given(plan=steps, data=st.data())
def test_a_far_first_parent_ancestor_is_the_one_a_walk_reaches(plan, data):
    with Repo.in_memory() as repo:
        _build(repo, plan)
        for branch in ("main", "side"):
            depth = 0
            while _walked(repo, branch, depth + 1) is not None:
                depth += 1
            for n in data.draw(st.lists(st.integers(0, depth + 2), min_size=1, max_size=4)):
                expected = _walked(repo, branch, n)
                if expected is None:
                    try:
                        repo.resolve(f"{branch}~{n}")
                    except NotFound as error:
                        assert f"has only {depth} first-parent ancestor" in str(error)
                    else:
                        raise AssertionError(f"{branch}~{n} resolved past the root")
                else:
                    assert repo.resolve(f"{branch}~{n}").id == expected
                    # Written from a commit id too, and chained.
                    assert repo.resolve(f"{repo.resolve(branch).id}~{n}").id == expected
                    if n >= 2:
                        assert repo.resolve(f"{branch}~1~{n - 1}").id == expected

"""Merges: the merge table row by row, resolutions, contradictions, criss-cross histories, bisect."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from support.clocks import T0, Clock
from support.tiers import examples

from mnemosyne import (
    Claim,
    Conflict,
    InvalidInput,
    MergeConflict,
    Node,
    NotFound,
    Provenance,
    Repo,
)

DAY = timedelta(days=1)
FAR = datetime(2100, 1, 1, tzinfo=UTC)


@pytest.fixture
def mem():
    repo = Repo.in_memory(clock=Clock())
    yield repo
    repo.close()


DELETE = object()  # the id is removed on that side
ABSENT = object()  # the id is not in the base


def snapshot(repo, **kw):
    return {n.id: n.content for n in repo.nodes(**kw)}


def ids(commits):
    return [c.id for c in commits]


def apply(repo, changes, branch, message):
    puts = [Node(id=k, content=v) for k, v in changes.items() if v is not DELETE and v is not ABSENT]
    deletes = [k for k, v in changes.items() if v is DELETE]
    return repo.commit(puts, deletes, branch=branch, message=message, allow_empty=True)


def fork(repo, base, ours, theirs):
    """Commit ``base`` on main, then ``theirs`` on branch theirs and ``ours`` on main."""
    b = apply(repo, {k: v for k, v in base.items() if v is not ABSENT}, "main", "base")
    repo.branch("theirs")
    t = apply(repo, theirs, "theirs", "theirs")
    o = apply(repo, ours, "main", "ours")
    return b, o, t


def state(repo):
    """What a merge that writes nothing must leave alone."""
    return repo.resolve("main").id, ids(repo.log()), repo.branch_tips(), snapshot(repo)


# -- the merge table ----------------------------------------------------------------------------

ROWS = [
    # name, base, ours, theirs, expected (content, DELETE for absent, or a conflict kind)
    ("unchanged", 1, 1, 1, 1),
    ("only theirs changed", 1, 1, 2, 2),
    ("only ours changed", 1, 2, 1, 2),
    ("both changed identically", 1, 2, 2, 2),
    ("both deleted", 1, DELETE, DELETE, DELETE),
    ("both added identically", ABSENT, "same", "same", "same"),
    ("only theirs added", ABSENT, ABSENT, "new", "new"),
    ("only theirs deleted", 1, 1, DELETE, DELETE),
    ("json keys merge cleanly", {"a": 1, "b": 1, "c": 1}, {"a": 2, "b": 1}, {"a": 1, "b": 2, "c": 1, "d": 4},
     {"a": 2, "b": 2, "d": 4}),
    ("json same key changed differently", {"a": 1, "b": 1}, {"a": 2, "b": 1}, {"a": 3, "b": 1}, "edit/edit"),
    ("json key removed and changed", {"a": 1}, {}, {"a": 2}, "edit/edit"),
    ("text edited differently", "x", "y", "z", "edit/edit"),
    ("json and text", {"a": 1}, {"a": 2}, "text", "edit/edit"),
    ("ours deleted, theirs edited", 1, DELETE, 2, "delete/edit"),
    ("ours edited, theirs deleted", 1, 2, DELETE, "edit/delete"),
    ("both added differently", ABSENT, 1, 2, "add/add"),
    ("both added json differently", ABSENT, {"a": 1}, {"b": 1}, "add/add"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "base", "ours", "theirs", "expected"), ROWS, ids=[r[0] for r in ROWS])
def test_merge_table_row(mem, name, base, ours, theirs, expected):
    # fillers on both sides keep the merge from being a fast-forward
    b, o, t = fork(
        mem,
        {"k": base, "filler": 0},
        {"k": ours, "ours/only": 1},
        {"k": theirs, "theirs/only": 1},
    )
    base_node = mem.get("k", at=b.id)
    ours_node = mem.get("k", at=o.id)
    theirs_node = mem.get("k", at=t.id)
    before = state(mem)
    result = mem.merge("theirs")
    assert not result.fast_forward
    if isinstance(expected, str) and "/" in expected:
        assert result.commit is None
        hashes = [node.hash if node is not None else None for node in (base_node, ours_node, theirs_node)]
        assert result.conflicts == [Conflict("k", expected, base_node, ours_node, theirs_node, *hashes)]
        assert result.conflicts[0].erased == ()
        assert state(mem) == before  # nothing written while unresolved
        return
    assert result.conflicts == []
    assert result.commit is not None and result.commit.parents == (o.id, t.id)
    assert result.previous.id == o.id and not result.up_to_date
    merged = snapshot(mem)
    assert merged.get("k", DELETE) == expected
    assert (merged["ours/only"], merged["theirs/only"], merged["filler"]) == (1, 1, 0)
    assert mem.resolve("main").id == result.commit.id


def test_json_merge_takes_meta_by_key_and_other_fields_from_the_side_that_changed_them(mem):
    p0, p1 = Provenance(agent_step=1), Provenance(agent_step=2, observation="theirs")
    expires = T0 + 30 * DAY
    base = Node(id="j", content={"a": 1, "b": 1}, meta={"x": 1, "y": 1}, provenance=p0)
    mem.commit([base])
    mem.branch("theirs")
    theirs = Node(id="j", content={"a": 1, "b": 2}, meta={"x": 1, "y": 2}, provenance=p1, expires_at=expires)
    mem.commit([theirs], branch="theirs")
    mem.commit([Node(id="j", content={"a": 2, "b": 1}, meta={"x": 2, "y": 1}, provenance=p0)])
    result = mem.merge("theirs")
    assert result.conflicts == []
    assert mem.get("j") == Node(
        id="j", content={"a": 2, "b": 2}, meta={"x": 2, "y": 2}, provenance=p1, expires_at=expires
    )
    # a key-merged claim is not a thing: claims with different values on both sides conflict
    mem.commit([Node(id="c", kind="claim", content=Claim("s", "p", {"a": 1}, T0))])
    mem.branch("claims")
    mem.commit([Node(id="c", kind="claim", content=Claim("s", "p", {"a": 2}, T0))], branch="claims")
    mem.commit([Node(id="c", kind="claim", content=Claim("s", "p", {"a": 1, "b": 1}, T0))])
    assert [c.kind for c in mem.merge("claims").conflicts] == ["edit/edit"]


def test_json_meta_clash_is_a_conflict(mem):
    mem.commit([Node(id="j", content={"a": 1}, meta={"m": 0})])
    mem.branch("theirs")
    mem.commit([Node(id="j", content={"a": 1, "t": 1}, meta={"m": 2})], branch="theirs")
    mem.commit([Node(id="j", content={"a": 1, "o": 1}, meta={"m": 1})])
    assert [(c.id, c.kind) for c in mem.merge("theirs").conflicts] == [("j", "edit/edit")]


# -- fast-forward, up to date, unborn ---------------------------------------------------------------


def test_fast_forward(mem):
    b = mem.commit([Node(id="a", content=1)])
    mem.branch("ahead")
    t1 = mem.commit([Node(id="a", content=2)], branch="ahead")
    t2 = mem.commit([Node(id="b", content=3)], branch="ahead")
    result = mem.merge("ahead")
    assert result.fast_forward and result.conflicts == [] and result.contradictions == []
    assert result.commit.id == t2.id  # no merge commit: main just moved
    assert result.previous.id == b.id and not result.up_to_date
    assert ids(mem.log()) == [t2.id, t1.id, b.id]
    assert snapshot(mem) == {"a": 2, "b": 3}
    # fast-forward to a revision that is not a branch, and into a branch that is not current
    mem.branch("behind", at=b.id)
    result = mem.merge(t1.id, into="behind")
    assert result.fast_forward and result.commit.id == t1.id
    assert mem.resolve("behind").id == t1.id
    assert mem.head == "main"
    with pytest.raises(MergeConflict):
        mem.merge("ahead", into="behind", resolutions={"a": "ours"})  # stale on a fast-forward
    assert mem.resolve("behind").id == t1.id


def test_already_up_to_date(mem):
    b = mem.commit([Node(id="a", content=1)])
    mem.branch("old")
    c = mem.commit([Node(id="a", content=2)])
    before = state(mem)
    for source in ("old", b.id, "main", c.id, "HEAD~1"):
        result = mem.merge(source)
        assert result.commit.id == c.id
        assert not result.fast_forward and result.conflicts == []
        assert result.up_to_date and result.previous.id == c.id
        assert state(mem) == before
    with pytest.raises(MergeConflict):
        mem.merge("old", resolutions={"a": "theirs"})


def test_merge_into_an_unborn_branch(mem):
    mem.branch("feat")  # from HEAD (main), which has no commits yet: neither has feat
    f1 = mem.commit([Node(id="a", content=1)], branch="feat")
    assert mem.head == "main" and mem.branches() == ["feat"]
    result = mem.merge("feat")
    assert result.fast_forward and result.commit.id == f1.id
    assert result.previous is None  # main had no commits
    assert mem.branches() == ["feat", "main"]
    assert snapshot(mem) == {"a": 1}
    with pytest.raises(NotFound):
        mem.merge("feat", into="nowhere")  # not HEAD's branch, and no such branch
    with pytest.raises(NotFound):
        mem.merge("nosuchsource")


# -- resolutions and strategies ----------------------------------------------------------------------


def conflicted(repo):
    """A fork with one conflict of every kind and some clean changes."""
    return fork(
        repo,
        {"e1": "base1", "e2": "base2", "d": "base-d", "x": "base-x", "keep": 0},
        {"e1": "ours1", "e2": "ours2", "d": DELETE, "x": "ours-x", "a": "ours-a", "o": 1},
        {"e1": "theirs1", "e2": "theirs2", "d": "theirs-d", "x": DELETE, "a": "theirs-a", "t": 1},
    )


def test_conflicts_are_listed_and_nothing_is_written(mem):
    conflicted(mem)
    before = state(mem)
    as_of_before = mem.resolve("main", as_of=FAR).id
    result = mem.merge("theirs")
    assert result.commit is None
    assert [(c.id, c.kind) for c in result.conflicts] == [
        ("a", "add/add"),
        ("d", "delete/edit"),
        ("e1", "edit/edit"),
        ("e2", "edit/edit"),
        ("x", "edit/delete"),
    ]
    d = next(c for c in result.conflicts if c.id == "d")
    assert (d.base.content, d.ours, d.theirs.content) == ("base-d", None, "theirs-d")
    a = next(c for c in result.conflicts if c.id == "a")
    assert (a.base, a.ours.content, a.theirs.content) == (None, "ours-a", "theirs-a")
    assert state(mem) == before
    assert mem.resolve("main", as_of=FAR).id == as_of_before  # no ref move logged either


def test_resolutions_of_every_kind(mem):
    b, o, t = conflicted(mem)
    result = mem.merge(
        "theirs",
        resolutions={
            "e1": "ours",
            "e2": "theirs",
            "d": "base",
            "x": "delete",
            "a": Node(content={"merged": ["ours-a", "theirs-a"]}),
        },
        message="resolved by hand",
        author="reviewer",
    )
    assert result.conflicts == []
    commit = result.commit
    assert (commit.parents, commit.message, commit.author) == ((o.id, t.id), "resolved by hand", "reviewer")
    assert snapshot(mem) == {
        "a": {"merged": ["ours-a", "theirs-a"]},
        "d": "base-d",
        "e1": "ours1",
        "e2": "theirs2",
        "keep": 0,
        "o": 1,
        "t": 1,
    }
    assert mem.get("a").id == "a"
    # the log shows the merge and both sides
    assert ids(mem.log()) == [commit.id, o.id, t.id, b.id]
    assert mem.blame("a").commit.id == commit.id


def test_bad_resolutions_are_refused_and_write_nothing(mem):
    conflicted(mem)
    before = state(mem)
    every = {"e1": "ours", "e2": "ours", "d": "ours", "x": "ours", "a": "ours"}
    with pytest.raises(MergeConflict):
        mem.merge("theirs", resolutions={"e1": "ours"})  # partial
    with pytest.raises(MergeConflict):
        mem.merge("theirs", resolutions={**every, "keep": "ours"})  # stale: keep is not in conflict
    with pytest.raises(MergeConflict):
        mem.merge("theirs", resolutions={**every, "nope": "theirs"})
    with pytest.raises(InvalidInput):
        mem.merge("theirs", resolutions={**every, "a": "mine"})
    with pytest.raises(InvalidInput):
        mem.merge("theirs", resolutions={**every, "a": Node(id="elsewhere", content=1)})
    with pytest.raises(InvalidInput):
        mem.merge("theirs", strategy="both")
    assert state(mem) == before
    assert mem.merge("theirs", resolutions=every).commit is not None


@pytest.mark.parametrize("strategy", ["ours", "theirs"])
def test_strategy_resolves_every_conflict(mem, strategy):
    _, o, t = conflicted(mem)
    result = mem.merge("theirs", strategy=strategy)
    assert result.conflicts == [] and result.commit.parents == (o.id, t.id)
    expected = {"keep": 0, "o": 1, "t": 1}
    side = snapshot(mem, at=o.id if strategy == "ours" else t.id)
    for key in ("a", "d", "e1", "e2", "x"):
        if key in side:
            expected[key] = side[key]
    assert snapshot(mem) == expected


def test_resolutions_override_the_strategy(mem):
    conflicted(mem)
    mem.merge("theirs", strategy="theirs", resolutions={"e1": "ours", "x": "base"})
    merged = snapshot(mem)
    assert (merged["e1"], merged["e2"], merged["x"], merged["a"]) == (
        "ours1",
        "theirs2",
        "base-x",
        "theirs-a",
    )
    assert "d" in merged


def test_resolution_after_a_stale_attempt_sees_a_moved_branch(mem):
    conflicted(mem)
    first = mem.merge("theirs")
    assert {c.id for c in first.conflicts} == {"a", "d", "e1", "e2", "x"}
    # meanwhile the other side settles e1 and e2 the way ours did: those conflicts disappear
    mem.commit([Node(id="e1", content="ours1"), Node(id="e2", content="ours2")], branch="theirs")
    with pytest.raises(MergeConflict):
        mem.merge("theirs", strategy="ours", resolutions={"e1": "theirs"})  # e1 no longer in conflict
    assert {c.id for c in mem.merge("theirs").conflicts} == {"a", "d", "x"}


# -- contradictions ---------------------------------------------------------------------------------


def claim(node_id, value, start, end=None, subject="mira", predicate="city"):
    return Node(id=node_id, kind="claim", content=Claim(subject, predicate, value, start, end))


def contradiction_fork(repo, ours_claim, theirs_claim, base=()):
    repo.commit([Node(id="note", content=0), *base])
    repo.branch("theirs")
    t = repo.commit([theirs_claim, Node(id="t", content=1)], branch="theirs")
    o = repo.commit([ours_claim, Node(id="o", content=1)])
    return o, t


def test_contradiction_is_reported_recorded_and_open_until_corrected(mem):
    ours = claim("claims/ours/city", "Oslo", T0)
    theirs = claim("claims/theirs/city", "Bergen", T0 + 2 * DAY)
    contradiction_fork(mem, ours, theirs)
    result = mem.merge("theirs")
    assert result.conflicts == [] and result.commit is not None  # structurally clean
    [found] = result.contradictions
    assert (found.subject, found.predicate) == ("mira", "city")
    assert {n.id for n in found.claims} == {ours.id, theirs.id}
    [open_one] = mem.contradictions()
    assert {n.hash for n in open_one.claims} == {ours.hash, theirs.hash}
    assert mem.contradictions(at=result.commit.parents[0]) == []

    # facts: both over the overlap, only ours before theirs starts
    assert {f.id for f in mem.facts("mira", "city", valid_at=T0 + 3 * DAY)} == {ours.id, theirs.id}
    assert {f.id for f in mem.facts("mira", valid_at=T0 + 3 * DAY)} == {ours.id, theirs.id}
    assert [f.id for f in mem.facts("mira", "city", valid_at=T0 + DAY)] == [ours.id]
    assert mem.facts("mira", "city", valid_at=T0 - DAY) == []

    # an unrelated commit leaves it open
    mem.commit([Node(id="unrelated", content=1)])
    assert len(mem.contradictions()) == 1
    # the merge commit's record survives as of then, and a correction resolves it
    merged_tip = mem.resolve("main").id
    mem.commit([claim(ours.id, "Oslo", T0, T0 + 2 * DAY)])  # ours ends where theirs begins
    assert mem.contradictions() == []
    assert [f.id for f in mem.facts("mira", "city", valid_at=T0 + 3 * DAY)] == [theirs.id]
    assert len(mem.contradictions(at=merged_tip)) == 1

    # deleting one claim resolves it too
    mem.reset("main", merged_tip)
    assert len(mem.contradictions()) == 1
    mem.commit(delete=[theirs.id])
    assert mem.contradictions() == []
    assert [f.id for f in mem.facts("mira", "city", valid_at=T0 + 3 * DAY)] == [ours.id]


def test_contradiction_with_identical_starts_and_merging_it_onwards(mem):
    ours = claim("c/ours", "Oslo", T0)
    theirs = claim("c/theirs", "Bergen", T0)
    contradiction_fork(mem, ours, theirs)
    mem.branch("later", at="main")  # a branch from before the merge
    merge = mem.merge("theirs")
    assert len(merge.contradictions) == 1
    assert {f.id for f in mem.facts("mira", "city", valid_at=T0)} == {ours.id, theirs.id}
    # the contradiction travels with the merge into another branch
    mem.commit([Node(id="later/work", content=1)], branch="later")
    onward = mem.merge("main", into="later")
    assert onward.contradictions == []  # not new here
    assert len(mem.contradictions(at="later")) == 1


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (claim("c/o", "Oslo", T0, T0 + DAY), claim("c/t", "Bergen", T0 + DAY)),  # adjacent, no overlap
        (claim("c/o", "Oslo", T0 + 5 * DAY), claim("c/t", "Bergen", T0, T0 + 5 * DAY)),
        (claim("c/o", "Oslo", T0), claim("c/t", "Oslo", T0 + DAY)),  # equal values
        (claim("c/o", "Oslo", T0), claim("c/t", "Bergen", T0, predicate="country")),  # other attribute
        (claim("c/o", "Oslo", T0), claim("c/t", "Bergen", T0, subject="bo")),  # other subject
    ],
)
def test_no_contradiction_without_overlap_or_disagreement(mem, ours, theirs):
    contradiction_fork(mem, ours, theirs)
    result = mem.merge("theirs")
    assert result.conflicts == [] and result.contradictions == []
    assert mem.contradictions() == []


def test_claims_from_before_the_base_do_not_contradict(mem):
    old = claim("c/old", "Oslo", T0)
    # theirs adds a disagreeing claim, ours only touches notes: nothing was introduced on both sides
    mem.commit([old])
    mem.branch("theirs")
    mem.commit([claim("c/new", "Bergen", T0 + DAY)], branch="theirs")
    mem.commit([Node(id="o", content=1)])
    assert mem.merge("theirs").contradictions == []


def test_contradictions_are_reported_alongside_conflicts(mem):
    ours = claim("c/o", "Oslo", T0)
    theirs = claim("c/t", "Bergen", T0 + DAY)
    mem.commit([Node(id="k", content=0)])
    mem.branch("theirs")
    mem.commit([theirs, Node(id="k", content=2)], branch="theirs")
    mem.commit([ours, Node(id="k", content=1)])
    result = mem.merge("theirs")
    assert result.commit is None and [c.id for c in result.conflicts] == ["k"]
    assert len(result.contradictions) == 1
    assert mem.contradictions() == []  # nothing recorded yet
    resolved = mem.merge("theirs", resolutions={"k": "ours"})
    assert len(resolved.contradictions) == 1 and len(mem.contradictions()) == 1


def test_the_same_claim_id_on_both_sides_is_a_conflict_not_a_contradiction(mem):
    mem.commit([Node(id="n", content=0)])
    mem.branch("theirs")
    mem.commit([claim("c/x", "Bergen", T0)], branch="theirs")
    mem.commit([claim("c/x", "Oslo", T0)])
    result = mem.merge("theirs")
    assert [(c.id, c.kind) for c in result.conflicts] == [("c/x", "add/add")]
    assert result.contradictions == []


# -- criss-cross histories ------------------------------------------------------------------------


def test_criss_cross_merges_cleanly(mem):
    mem.commit([Node(id="k", content=0), Node(id="shared", content={"a": 0, "b": 0})])
    mem.branch("c")
    a1 = mem.commit([Node(id="x", content=1), Node(id="shared", content={"a": 1, "b": 0})])
    c1 = mem.commit([Node(id="y", content=1)], branch="c")
    m1 = mem.merge("c")  # into main
    m2 = mem.merge(a1.id, into="c")  # into c: the criss-cross
    assert m1.commit.parents == (a1.id, c1.id) and m2.commit.parents == (c1.id, a1.id)
    mem.commit([Node(id="x", content=2)])
    mem.commit([Node(id="z", content=1), Node(id="shared", content={"a": 1, "b": 2})], branch="c")
    mem.commit([Node(id="k", content=5)], branch="c")
    final = mem.merge("c")
    assert final.conflicts == [] and final.commit is not None
    assert snapshot(mem) == {"k": 5, "shared": {"a": 1, "b": 2}, "x": 2, "y": 1, "z": 1}
    # and back the other way: a fast-forward now
    assert mem.merge("main", into="c").fast_forward
    assert snapshot(mem, at="c") == snapshot(mem)


def test_criss_cross_with_the_same_resolution_on_both_sides(mem):
    mem.commit([Node(id="k", content=0)])
    mem.branch("c")
    a1 = mem.commit([Node(id="k", content=1)])
    mem.commit([Node(id="k", content=2)], branch="c")
    mem.merge("c", strategy="ours")  # main: k = 1
    mem.merge(a1.id, into="c", strategy="theirs")  # c: k = 1 as well
    mem.commit([Node(id="p", content=1)])
    mem.commit([Node(id="q", content=1)], branch="c")
    final = mem.merge("c")
    assert final.conflicts == []
    assert snapshot(mem) == {"k": 1, "p": 1, "q": 1}


def test_criss_cross_with_different_resolutions_conflicts_against_the_old_base(mem):
    mem.commit([Node(id="k", content=0)])
    mem.branch("c")
    a1 = mem.commit([Node(id="k", content=1)])
    mem.commit([Node(id="k", content=2)], branch="c")
    mem.merge("c", strategy="ours")  # main keeps 1
    mem.merge(a1.id, into="c", strategy="ours")  # c keeps 2
    mem.commit([Node(id="p", content=1)])
    mem.commit([Node(id="q", content=1)], branch="c")
    final = mem.merge("c")
    assert [(c.id, c.kind, c.base.content, c.ours.content, c.theirs.content) for c in final.conflicts] == [
        ("k", "edit/edit", 0, 1, 2)
    ]
    mem.merge("c", resolutions={"k": "theirs"})
    assert snapshot(mem) == {"k": 2, "p": 1, "q": 1}


# -- blame and history across merges -----------------------------------------------------------------


def test_blame_and_history_follow_a_merged_value_to_the_side_that_wrote_it(mem):
    b = mem.commit([Node(id="n", content="base\nline"), Node(id="other", content=0)])
    mem.branch("side")
    s1 = mem.commit([Node(id="n", content="side\nline")], branch="side", author="side-agent")
    o1 = mem.commit([Node(id="other", content=1)], author="main-agent")
    merge = mem.merge("side", author="merger").commit
    blame = mem.blame("n")
    assert blame.commit.id == s1.id and blame.commit.author == "side-agent"
    assert [(line.text, line.commit) for line in blame.lines] == [("side", s1.id), ("line", b.id)]
    history = mem.history("n")
    assert [(v.commit.id, v.status) for v in history] == [(s1.id, "current"), (b.id, "superseded")]
    assert history[1].ended_by == s1.id
    assert ids(mem.log(node="n")) == [s1.id, b.id]
    assert mem.blame("other").commit.id == o1.id
    assert merge.id in ids(mem.log())
    # through a second level of merges
    mem.branch("third", at="main")
    mem.commit([Node(id="t", content=1)], branch="third")
    mem.commit([Node(id="u", content=1)])
    mem.merge("main", into="third")
    assert mem.blame("n", at="third").commit.id == s1.id
    assert [v.commit.id for v in mem.history("n", at="third")] == [s1.id, b.id]


def test_blame_per_field_of_a_key_merged_json_node(mem):
    mem.commit([Node(id="j", content={"a": 1, "b": 1})])
    mem.branch("side")
    s1 = mem.commit([Node(id="j", content={"a": 1, "b": 2})], branch="side")
    o1 = mem.commit([Node(id="j", content={"a": 2, "b": 1})])
    merge = mem.merge("side").commit
    blame = mem.blame("j")
    assert blame.commit.id == merge.id  # the merged value was written by the merge
    assert {line.key: line.commit for line in blame.lines} == {"a": o1.id, "b": s1.id}


# -- bisect -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def long_history():
    repo = Repo.in_memory(clock=Clock())
    commits = []
    for i in range(300):
        puts = [Node(id=f"step/{i % 7}", content=i)]
        if i == 0:
            puts.append(Node(id="belief", content="right"))
        if i == 211:
            puts.append(Node(id="belief", content="wrong"))
        commits.append(repo.commit(puts, message=f"step {i}"))
    yield repo, commits
    repo.close()


def test_bisect_finds_the_first_bad_commit_in_few_steps(long_history):
    repo, commits = long_history
    calls = []

    def wrong(commit):
        calls.append(commit.id)
        return repo.get("belief", at=commit.id).content == "wrong"

    for good_index in (0, 100, 210):
        calls.clear()
        found = repo.bisect(wrong, good=commits[good_index].id, bad="main")
        assert found.id == commits[211].id
        n = len(commits) - 1 - good_index
        assert len(calls) <= math.ceil(math.log2(n)) + 3
        assert len(set(calls)) == len(calls)
    calls.clear()
    assert repo.bisect(wrong, good=commits[210].id, bad=commits[211].id).id == commits[211].id
    assert len(calls) == 2


@pytest.mark.parametrize("first_bad", [1, 2, 150, 298, 299])
def test_bisect_boundaries(long_history, first_bad):
    repo, commits = long_history
    depth = {c.id: i for i, c in enumerate(commits)}
    calls = []

    def predicate(commit):
        calls.append(commit.id)
        return depth[commit.id] >= first_bad

    assert repo.bisect(predicate, good=commits[0].id, bad="main").id == commits[first_bad].id
    assert len(calls) <= math.ceil(math.log2(299)) + 3


def test_bisect_refuses_what_it_cannot_search(long_history):
    repo, commits = long_history

    def wrong(commit):
        return repo.get("belief", at=commit.id).content == "wrong"

    with pytest.raises(InvalidInput):
        repo.bisect(wrong, good=commits[250].id, bad=commits[100].id)  # good after bad
    with pytest.raises(InvalidInput):
        repo.bisect(wrong, good="main", bad="main")
    with pytest.raises(InvalidInput):
        repo.bisect(wrong, good=commits[0].id, bad=commits[150].id)  # never flips there
    with pytest.raises(InvalidInput):
        repo.bisect(wrong, good=commits[220].id, bad="main")  # already bad at good
    with pytest.raises(InvalidInput):
        repo.bisect(lambda c: True, good=commits[0].id, bad="main")
    with pytest.raises(NotFound):
        repo.bisect(wrong, good="nobranch", bad="main")


def test_bisect_refuses_a_good_that_is_not_a_first_parent_ancestor(mem):
    mem.commit([Node(id="v", content=0)])
    mem.branch("side")
    s1 = mem.commit([Node(id="s", content=1)], branch="side")
    for i in range(5):
        mem.commit([Node(id="v", content=i + 1)])
    with pytest.raises(InvalidInput):
        mem.bisect(lambda c: True, good=s1.id, bad="main")  # on another branch
    mem.merge("side")
    mem.commit([Node(id="v", content=99)])
    with pytest.raises(InvalidInput):
        mem.bisect(lambda c: True, good=s1.id, bad="main")  # only a second-parent ancestor
    found = mem.bisect(lambda c: mem.get("v", at=c.id).content == 99, good="main~2", bad="main")
    assert found.id == mem.resolve("main").id


def test_revert_and_reset_after_bisect():
    clock = Clock()
    repo = Repo.in_memory(clock=clock)
    commits = [repo.commit([Node(id="belief", content="right"), Node(id="n", content=0)])]
    for i in range(1, 40):
        # commit 23 only changes the belief; every other commit moves n on
        puts = [Node(id="belief", content="wrong")] if i == 23 else [Node(id="n", content=i)]
        commits.append(repo.commit(puts, message=f"step {i}"))

    def wrong(commit):
        return repo.get("belief", at=commit.id).content == "wrong"

    bad = repo.bisect(wrong, good=commits[0].id, bad="main")
    assert bad.id == commits[23].id
    revert = repo.revert(bad.id)
    assert revert.parents == (commits[-1].id,)
    assert repo.get("belief").content == "right" and repo.get("n").content == 39
    assert [c.id for c in repo.diff(commits[-1].id, revert.id).modified] == ["belief"]
    assert not wrong(revert)
    with pytest.raises(MergeConflict):
        repo.revert(commits[25].id)  # n has changed again since
    # or go back to just before the bad commit; an as-of read still knows what was there
    before_reset = revert.record_time
    repo.reset("main", f"{bad.id}~1")
    assert repo.resolve("main").id == commits[22].id
    assert repo.get("belief").content == "right" and repo.get("n").content == 22
    assert repo.get("n", as_of=before_reset).content == 39
    assert repo.resolve("main", as_of=before_reset).id == revert.id
    assert ids(repo.log(limit=2)) == [commits[22].id, commits[21].id]


# -- properties -----------------------------------------------------------------------------------

KEYS = ["k/1", "k/2", "k/3", "k/4"]
values = st.one_of(
    st.integers(0, 2),
    st.sampled_from(["x", "y"]),
    st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(0, 1), max_size=3),
)
edits = st.dictionaries(st.sampled_from(KEYS), st.one_of(values, st.just(DELETE)), max_size=4)
bases = st.dictionaries(st.sampled_from(KEYS), values, max_size=4)


def three_way_model(base, ours, theirs):
    """Per-id three-way merge of content dicts: (merged, conflicting ids)."""
    merged, conflicts = {}, set()
    missing = object()
    for key in sorted(base.keys() | ours.keys() | theirs.keys()):
        b, o, t = base.get(key, missing), ours.get(key, missing), theirs.get(key, missing)
        if o == t:
            value = o
        elif o == b:
            value = t
        elif t == b:
            value = o
        elif all(isinstance(v, dict) for v in (b, o, t)):
            value = {}
            for k in sorted(b.keys() | o.keys() | t.keys()):
                bk, ok, tk = b.get(k, missing), o.get(k, missing), t.get(k, missing)
                if ok == tk or tk == bk:
                    pick = ok
                elif ok == bk:
                    pick = tk
                else:
                    conflicts.add(key)
                    break
                if pick is not missing:
                    value[k] = pick
        else:
            conflicts.add(key)
            continue
        if value is not missing:
            merged[key] = value
    return {k: v for k, v in merged.items() if k not in conflicts}, conflicts


def applied(snap, changes):
    out = dict(snap)
    for key, value in changes.items():
        if value is DELETE:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def commit_side(repo, branch, snap, changes):
    real = {k: v for k, v in changes.items() if not (v is DELETE and k not in snap)}
    return apply(repo, real, branch, branch)


MIRROR = {
    "edit/edit": "edit/edit",
    "add/add": "add/add",
    "delete/edit": "edit/delete",
    "edit/delete": "delete/edit",
}


@settings(max_examples=examples(300), deadline=None)
@given(bases, edits, edits)
def test_merge_is_symmetric_and_matches_the_three_way_model(base, ours_edits, theirs_edits):
    repo = Repo.in_memory(clock=Clock())
    b = apply(repo, base, "main", "base")
    repo.branch("a")
    repo.branch("b")
    a = commit_side(repo, "a", base, ours_edits)
    bb = commit_side(repo, "b", base, theirs_edits)
    ours, theirs = applied(base, ours_edits), applied(base, theirs_edits)
    assert snapshot(repo, at="a") == ours and snapshot(repo, at="b") == theirs
    expected, expected_conflicts = three_way_model(base, ours, theirs)
    event("conflicts" if expected_conflicts else "clean")

    forward = repo.merge("b", into="a")
    forward_kinds = {c.id: c.kind for c in forward.conflicts}
    if forward.commit is not None and not forward.fast_forward and forward.conflicts == []:
        merged_forward = snapshot(repo, at="a")
        repo.reset("a", a.id)
    else:
        merged_forward = None
    backward = repo.merge("a", into="b")
    backward_kinds = {c.id: c.kind for c in backward.conflicts}

    assert set(forward_kinds) == set(backward_kinds) == expected_conflicts
    assert {k: MIRROR[v] for k, v in forward_kinds.items()} == backward_kinds
    if not expected_conflicts:
        assert backward.commit is not None
        assert snapshot(repo, at="b") == expected
        if merged_forward is not None:
            assert merged_forward == expected
        if a.id != b.id and bb.id != b.id:
            assert backward.commit.parents == (bb.id, a.id)
    else:
        assert forward.commit is None and backward.commit is None
        assert repo.resolve("a").id == a.id and repo.resolve("b").id == bb.id


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(edits, min_size=1, max_size=6), st.data())
def test_merging_into_itself_or_fast_forwarding_never_conflicts(history, data):
    repo = Repo.in_memory(clock=Clock())
    snaps, commits = [], []
    snap = {}
    for changes in history:
        commits.append(commit_side(repo, "main", snap, changes))
        snap = applied(snap, changes)
        snaps.append(snap)
    tip = commits[-1].id
    for source in ("main", "HEAD", tip):
        result = repo.merge(source)
        assert result.conflicts == [] and result.commit.id == tip and not result.fast_forward
    index = data.draw(st.integers(0, len(commits) - 1))
    repo.branch("old", at=commits[index].id)
    result = repo.merge("main", into="old")
    assert result.conflicts == []
    assert result.commit.id == tip
    assert result.fast_forward == (commits[index].id != tip)
    assert snapshot(repo, at="old") == snaps[-1]
    up = repo.merge(commits[index].id)  # an ancestor into main: up to date
    assert up.conflicts == [] and up.commit.id == tip and ids(repo.log()) == ids(repo.log(at="old"))


def test_a_resolution_that_removes_a_claim_leaves_no_contradiction(mem):
    mem.commit([claim("c/o", "Oslo", T0)])
    mem.branch("theirs")
    mem.commit([claim("c/t", "Bergen", T0 + DAY)], delete=["c/o"], branch="theirs")
    mem.commit([claim("c/o", "Trondheim", T0)])
    first = mem.merge("theirs")
    assert [(c.id, c.kind) for c in first.conflicts] == [("c/o", "edit/delete")]
    assert len(first.contradictions) == 1  # reported while the outcome is open
    merged = mem.merge("theirs", resolutions={"c/o": "delete"})
    assert merged.contradictions == [] and mem.contradictions() == []
    assert [f.id for f in mem.facts("mira", "city", valid_at=T0 + 2 * DAY)] == ["c/t"]
    mem.reset("main", merged.commit.parents[0])
    kept = mem.merge("theirs", resolutions={"c/o": "ours"})
    assert len(kept.contradictions) == 1 and len(mem.contradictions()) == 1


def test_merging_unrelated_histories(mem):
    mem.commit([Node(id="x", content=1), Node(id="same", content=0), Node(id="clash", content="a")])
    assert mem.branch("other", orphan=True) is None
    other = mem.commit(
        [Node(id="y", content=2), Node(id="same", content=0), Node(id="clash", content="b")], branch="other"
    )
    assert other.parents == ()  # a second root
    result = mem.merge("other", allow_unrelated_histories=True)  # refused without (as git)
    assert [(c.id, c.kind, c.base) for c in result.conflicts] == [("clash", "add/add", None)]
    result = mem.merge("other", strategy="theirs", allow_unrelated_histories=True)
    assert len(result.commit.parents) == 2
    assert snapshot(mem) == {"clash": "b", "same": 0, "x": 1, "y": 2}

"""The Repo API: commits, reads, history, blame, diffs, branches, revisions, tenants, integrity."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.clocks import T0, Clock
from support.components import POSTGRES
from support.tiers import examples

import mnemosyne
from mnemosyne import (
    Change,
    Claim,
    Commit,
    CommitResult,
    CorruptObject,
    InvalidInput,
    MergeConflict,
    MnemoError,
    Node,
    NotFound,
    Provenance,
    RefConflict,
    Repo,
    with_retry,
)
from mnemosyne.store.kv.base import Space

DEFAULT_SCOPE = b"\x00\x00\x00\x00"


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture(params=["memory", "lmdb", POSTGRES])
def repo(request, tmp_path, clock):
    if request.param == "memory":
        made = Repo.in_memory(clock=clock)
    elif request.param == "postgres":
        made = Repo.init(request.getfixturevalue("pg_url"), clock=clock, sync=False)
    else:
        made = Repo.init(tmp_path / "store", clock=clock, sync=False)
    yield made
    made.close()


@pytest.fixture
def mem(clock):
    made = Repo.in_memory(clock=clock)
    yield made
    made.close()


def ids(commits):
    return [c.id for c in commits]


def snapshot(repo, **kw):
    return {n.id: n.content for n in repo.nodes(**kw)}


def commit_fields(commit):
    """The Commit fields of a commit (a CommitResult adds put_ids, deleted_ids and created)."""
    return {name: getattr(commit, name) for name in Commit.__struct_fields__}


# -- the example of issue 2 ----------------------------------------------------------

PASSPORT = "users/mira/passport_deadline"


def test_issue_2_example(repo):
    e1 = Node(
        id=PASSPORT,
        content="2026-07-15",
        provenance=Provenance(agent_step=3, observation="e1", tool_call=None, source="chat"),
        event_time=datetime(2026, 6, 1, 9, tzinfo=UTC),
        meta={"sensitivity": "personal"},
    )
    c1 = repo.commit(put=[e1], delete=[], message="e1", author="agent-7")
    e2 = Node(
        id=PASSPORT,
        content="2026-06-30",
        provenance=Provenance(agent_step=5, observation="e2", tool_call="read_email", source="chat"),
        event_time=datetime(2026, 6, 3, 10, tzinfo=UTC),
        meta={"sensitivity": "personal"},
    )
    c2 = repo.commit(put=[e2], message="e2", author="agent-7", parent=c1.id)

    assert len(c1.id) == 64 and int(c1.id, 16) >= 0
    assert c2.parents == (c1.id,)
    assert c1.parents == ()
    assert c2.record_time > c1.record_time
    assert c2.record_time.utcoffset() == timedelta(0)
    assert (c2.author, c2.message) == ("agent-7", "e2")

    assert repo.get(PASSPORT) == e2
    assert repo.get(PASSPORT, at="HEAD") == e2
    assert repo.get(PASSPORT, at=c1.id) == e1
    assert repo.get(PASSPORT, at="HEAD~1") == e1
    assert repo.get(PASSPORT).hash == e2.hash

    blame = repo.blame(PASSPORT)
    assert blame.commit.id == c2.id
    assert blame.node == e2
    assert blame.node.provenance.observation == "e2"
    assert blame.commit.author == "agent-7"
    assert blame.commit.record_time == c2.record_time
    assert [line.commit for line in blame.lines] == [c2.id]

    assert ids(repo.log(node=PASSPORT)) == [c2.id, c1.id]
    assert ids(repo.log()) == [c2.id, c1.id]

    diff = repo.diff(c1.id, c2.id)
    assert diff.modified == [Change(PASSPORT, e1, e2, e1.hash, e2.hash)]
    assert diff.added == [] and diff.removed == []
    assert (diff.a, diff.b) == (c1.id, c2.id)
    back = repo.diff(c2.id, c1.id)
    assert back.modified == [Change(PASSPORT, e2, e1, e2.hash, e1.hash)]

    versions = repo.history(PASSPORT)
    assert [(v.status, v.commit.id, v.node) for v in versions] == [
        ("current", c2.id, e2),
        ("superseded", c1.id, e1),
    ]
    assert versions[1].superseded_by == e2.hash
    assert versions[1].ended_by == c2.id


# -- commits ---------------------------------------------------------------------------


def test_empty_commit_refused_unless_allowed(repo):
    with pytest.raises(InvalidInput, match="nothing to commit"):
        repo.commit(message="nothing")  # a branch with no commits and nothing given
    assert list(repo.log()) == []
    c1 = repo.commit([Node(id="a", content=1)])
    assert c1.created is True
    assert (c1.put_ids, c1.modified_ids, c1.deleted_ids) == (("a",), (), ())
    # the same version again changes nothing: a no-op that returns the tip as it is
    again = repo.commit([Node(id="a", content=1)], message="retry")
    assert again.created is False
    assert again.id == c1.id and again.tree == c1.tree and again.message == c1.message
    assert again.put_ids == ("a",)
    nothing = repo.commit(message="nothing")  # nothing given on a branch with commits: a no-op too
    assert nothing.created is False and nothing.id == c1.id
    assert ids(repo.log()) == [c1.id]
    c2 = repo.commit(message="marker", allow_empty=True)
    assert c2.tree == c1.tree
    assert c2.parents == (c1.id,)
    assert ids(repo.log()) == [c2.id, c1.id]
    with pytest.raises(NotFound, match="no branch 'other'"):
        repo.commit([Node(id="b", content=2)], branch="other")  # a commit never creates a branch
    assert repo.branches() == ["main"]
    repo.branch("other", orphan=True)
    first = repo.commit(message="root of another branch", branch="other", allow_empty=True)
    assert first.parents == ()
    assert list(repo.nodes(at="other")) == []


def test_duplicate_ids_in_one_commit_refused(repo):
    c1 = repo.commit([Node(id="a", content=1)])
    with pytest.raises(InvalidInput):
        repo.commit([Node(id="b", content=1), Node(id="b", content=2)])
    with pytest.raises(InvalidInput):
        repo.commit([Node(id="b", content=1)], delete=["b"])
    with pytest.raises(InvalidInput):
        repo.commit(delete=["a", "a"])
    assert ids(repo.log()) == [c1.id]
    assert snapshot(repo) == {"a": 1}


def test_deleting_an_absent_id_writes_nothing(repo):
    c1 = repo.commit([Node(id="a", content=1)])
    # removing an id never written anywhere is a mistake (a typo), not a retry
    with pytest.raises(NotFound, match="cannot remove missing"):
        repo.commit(delete=["missing"])
    # beside a change, an absent id is refused and nothing is written
    with pytest.raises(NotFound):
        repo.commit([Node(id="b", content=2)], delete=["missing"])
    with pytest.raises(NotFound):
        repo.commit(delete=["a", "missing"])
    assert ids(repo.log()) == [c1.id]
    assert repo.get("a").content == 1
    assert repo.get("b") is None
    assert list(repo.log(node="b")) == []
    assert repo.history("b") == []
    # and a real deletion works
    c2 = repo.commit(delete=["a"])
    assert repo.get("a") is None
    assert repo.get("a", at=c1.id).content == 1
    assert [c.id for c in repo.log(node="a")] == [c2.id, c1.id]
    # removing it again (a retried removal) changes nothing: a no-op returning the tip
    noop = repo.commit(delete=["a"])
    assert noop.created is False and noop.id == c2.id
    assert noop.deleted_ids == ()  # nothing was removed


def test_commit_validates_its_arguments(repo):
    with pytest.raises(InvalidInput):
        repo.commit(["not a node"])
    with pytest.raises(InvalidInput):
        repo.commit(delete=["a//b"])
    with pytest.raises(InvalidInput):
        repo.commit([Node(id="a", content=1)], meta={"x": float("nan")})
    with pytest.raises(InvalidInput):
        repo.commit([Node(id="a", content=1)], meta=["run"])
    with pytest.raises(InvalidInput):
        repo.commit([Node(id="a", content=1)], author=5)
    with pytest.raises(InvalidInput):
        repo.commit([Node(id="a", content=1)], branch="bad name")
    assert list(repo.log()) == []


def test_commit_meta_author_message_are_kept(repo):
    c = repo.commit(
        [Node(id="a", content=1)], message="line one\nline two", author="agent-9", meta={"run": 7}
    )
    found = repo.resolve(c.id)
    assert commit_fields(found) == commit_fields(c)  # c is a CommitResult, found a plain Commit
    assert found.meta == {"run": 7}
    assert found.message == "line one\nline two"
    assert found.author == "agent-9"
    empty_meta = repo.commit([Node(id="b", content=1)], meta={})
    assert empty_meta.meta is None


def test_generated_ids(mem, clock):
    clock.step = timedelta(milliseconds=5)
    c1 = mem.commit([Node(content="first"), Node(content="second")])
    c2 = mem.commit([Node(content="third")])
    first = {n.content: n.id for n in mem.nodes(at=c1.id)}
    assert sorted(first) == ["first", "second"]
    assert first["first"] != first["second"]
    added = mem.diff(c1.id, c2.id).added
    assert [c.new.content for c in added] == ["third"]
    third = added[0].id
    for generated in [*first.values(), third]:
        assert len(generated) == 26
        assert Node(id=generated, content="ok").id == generated  # a valid id
        assert mem.get(generated) is not None
    # time-ordered: a later commit's generated ids sort after an earlier commit's
    assert third > max(first.values())
    assert mnemosyne.new_id(T0) < mnemosyne.new_id(T0 + timedelta(milliseconds=1))


def test_record_time_comes_from_the_clock_in_utc():
    times = iter([datetime(2026, 6, 1, 12, tzinfo=timezone(timedelta(hours=2)))] * 10)
    repo = Repo.in_memory(clock=lambda: next(times))
    c = repo.commit([Node(id="a", content=1)])
    assert c.record_time == datetime(2026, 6, 1, 10, tzinfo=UTC)
    assert c.record_time.utcoffset() == timedelta(0)


def test_naive_clock_refused():
    repo = Repo.in_memory(clock=lambda: datetime(2026, 6, 1))
    with pytest.raises(InvalidInput):
        repo.commit([Node(id="a", content=1)])


@pytest.mark.parametrize("step", [timedelta(0), timedelta(seconds=-5), timedelta(microseconds=-1)])
def test_record_time_strictly_increases_whatever_the_clock(repo, clock, step):
    clock.step = step
    made = []
    for i in range(6):
        made.append(repo.commit([Node(id=f"n{i}", content=i)]))
        if i == 2:
            repo.branch(f"b{i}")  # ref moves in between also take reflog times
    times = [c.record_time for c in made]
    assert all(a < b for a, b in itertools.pairwise(times))
    # and log, which orders by record time, still gives the chain newest first
    assert ids(repo.log()) == ids(reversed(made))
    # as-of reads at each commit's record time see exactly that commit
    for c in made:
        assert repo.resolve("main", as_of=c.record_time).id == c.id


# -- optimistic concurrency ------------------------------------------------------------


def test_parent_refuses_a_moved_branch(repo):
    c1 = repo.commit([Node(id="n", content=1)])
    c2 = repo.commit([Node(id="n", content=2)])
    with pytest.raises(RefConflict):
        repo.commit([Node(id="n", content=3)], parent=c1.id)
    assert ids(repo.log()) == [c2.id, c1.id]
    assert repo.get("n").content == 2
    c3 = repo.commit([Node(id="n", content=3)], parent=c2.id)
    assert c3.parents == (c2.id,)
    c4 = repo.commit([Node(id="n", content=4)], parent=c3.id[:10])  # any revision syntax
    assert c4.parents == (c3.id,)
    with pytest.raises(NotFound):
        repo.commit([Node(id="n", content=5)], parent="0" * 64)
    repo.branch("fresh", orphan=True)
    with pytest.raises(RefConflict):
        repo.commit([Node(id="x", content=1)], branch="fresh", parent=c1.id)  # branch has no commits


def test_with_retry_reruns_after_a_lost_race(mem):
    mem.commit([Node(id="counter", content=0)])
    calls = []
    slept = []

    def increment():
        tip = mem.resolve("HEAD")
        value = mem.get("counter", at=tip.id).content
        calls.append(value)
        if len(calls) < 3:  # another writer gets in first, twice
            mem.commit([Node(id=f"other/{len(calls)}", content=True)])
        return mem.commit([Node(id="counter", content=value + 1)], parent=tip.id)

    result = with_retry(increment, sleep=slept.append)
    assert len(calls) == 3
    assert len(slept) == 2 and all(s > 0 for s in slept)
    assert mem.get("counter").content == 1
    assert isinstance(result, CommitResult) and result.created
    assert commit_fields(mem.resolve("HEAD")) == commit_fields(result)
    assert len(list(mem.log())) == 4


def test_with_retry_gives_up_and_passes_other_errors(mem):
    mem.commit([Node(id="a", content=0)])
    calls = []

    def always_conflicts():
        calls.append(1)
        raise RefConflict("moved")

    with pytest.raises(RefConflict):
        with_retry(always_conflicts, attempts=4, sleep=lambda _: None)
    assert len(calls) == 4

    def invalid():
        calls.append(2)
        raise InvalidInput("bad")

    with pytest.raises(InvalidInput):
        with_retry(invalid, sleep=lambda _: None)
    assert calls.count(2) == 1
    with pytest.raises(ValueError):
        with_retry(lambda: None, attempts=0)


# -- branches --------------------------------------------------------------------------


def test_branches(repo):
    assert repo.head == "main"
    assert repo.branches() == []
    # HEAD has no commits yet: the new branch is unborn too (as git switch -c)
    assert repo.branch("early") is None
    assert repo.branches() == []  # only branches with commits are listed
    with pytest.raises(InvalidInput):
        repo.branch("early")  # but it exists
    with pytest.raises(NotFound):
        repo.resolve("early")
    with pytest.raises(NotFound):
        repo.branch("early2", at="HEAD")  # an explicit revision must resolve
    assert repo.delete_branch("early") is None  # it had no commit to point at
    with pytest.raises(NotFound):
        repo.switch("early")
    c1 = repo.commit([Node(id="a", content=1)])
    c2 = repo.commit([Node(id="a", content=2)])
    assert repo.branch("feature").id == c2.id
    assert repo.branch("old", at=c1.id).id == c1.id
    assert repo.branch("team/x", at="HEAD~1").id == c1.id
    assert repo.branches() == ["feature", "main", "old", "team/x"]
    assert [(name, c.id) for name, c in repo.branch_tips()] == [
        ("feature", c2.id),
        ("main", c2.id),
        ("old", c1.id),
        ("team/x", c1.id),
    ]
    with pytest.raises(InvalidInput):
        repo.branch("feature")  # exists
    for bad in ["", "a b", "-x", "a..b", "x.lock", "HEAD", "a/", "/a", "x~1", "x@{y}"]:
        with pytest.raises(InvalidInput):
            repo.branch(bad)
    with pytest.raises(NotFound):
        repo.branch("nowhere", at="no-such-rev")

    repo.switch("old")
    assert repo.head == "old"
    assert repo.get("a").content == 1
    c3 = repo.commit([Node(id="b", content=3)])
    assert c3.parents == (c1.id,)
    assert repo.resolve("old").id == c3.id
    assert repo.resolve("main").id == c2.id  # untouched
    c4 = repo.commit([Node(id="c", content=4)], branch="feature")  # commit elsewhere without switching
    assert repo.head == "old"
    assert repo.resolve("feature").id == c4.id
    assert c4.parents == (c2.id,)

    with pytest.raises(InvalidInput):
        repo.delete_branch("old")  # current
    with pytest.raises(NotFound):
        repo.delete_branch("nope")
    with pytest.raises(NotFound):
        repo.switch("nope")
    repo.delete_branch("feature")
    assert repo.branches() == ["main", "old", "team/x"]
    assert repo.resolve(c4.id).id == c4.id  # its commits stay reachable by id
    with pytest.raises(NotFound):
        repo.resolve("feature")


# -- revisions -------------------------------------------------------------------------


def test_revision_syntax(repo):
    made = [repo.commit([Node(id="n", content=i)], message=str(i)) for i in range(5)]
    tip = made[-1]
    assert repo.resolve().id == tip.id
    assert repo.resolve("HEAD").id == tip.id
    assert repo.resolve("main").id == tip.id
    assert repo.resolve("refs/heads/main").id == tip.id
    assert repo.resolve("HEAD~0").id == tip.id
    assert repo.resolve("HEAD~1").id == made[3].id
    assert repo.resolve("HEAD~4").id == made[0].id
    assert repo.resolve("main~2").id == made[2].id
    assert repo.resolve("HEAD^").id == made[3].id
    assert repo.resolve("HEAD^^").id == made[2].id
    assert repo.resolve("HEAD^1").id == made[3].id
    assert repo.resolve("HEAD~2^").id == made[1].id
    assert repo.resolve(f"{made[3].id}~1").id == made[2].id
    assert repo.resolve(made[2].id).id == made[2].id
    assert repo.resolve(made[2].id.upper()).id == made[2].id
    assert repo.resolve(f"  {made[2].id[:12]} ").id == made[2].id
    with pytest.raises(NotFound):
        repo.resolve("HEAD~5")  # beyond the root
    with pytest.raises(NotFound):
        repo.resolve("HEAD^2")  # no second parent
    with pytest.raises(NotFound):
        repo.resolve("nope")
    with pytest.raises(NotFound):
        repo.resolve("0" * 64)
    for bad in ["", "a{b", "HEAD@{not a time}", "HEAD@{2026-06-01T00:00:00}"]:
        with pytest.raises(InvalidInput):
            repo.resolve(bad)
    # a prefix must name a commit, not another object
    node_hash = repo.get("n").hash
    with pytest.raises(NotFound):
        repo.resolve(node_hash[:12])
    with pytest.raises(NotFound):
        repo.resolve(made[0].id[:3])  # too short to be a prefix


def test_unique_and_ambiguous_prefixes(mem):
    # commits are deterministic under the test clock, so this finds the same pair every run
    by_prefix = {}
    for i in range(5000):
        c = mem.commit(message=str(i), allow_empty=True)
        if c.id[:4] in by_prefix:
            first, second = by_prefix[c.id[:4]], c.id
            break
        by_prefix[c.id[:4]] = c.id
    else:
        pytest.fail("no two commits share a 4-hex prefix")
    with pytest.raises(InvalidInput, match="ambiguous"):
        mem.resolve(first[:4])
    common = len(next(itertools.dropwhile(lambda p: first.startswith(p), (second[:n] for n in range(4, 65)))))
    assert mem.resolve(first[:common]).id == first
    assert mem.resolve(second[:common]).id == second
    unique = next(c for p, c in by_prefix.items() if p != first[:4])
    assert mem.resolve(unique[:4]).id == unique


def test_branch_name_wins_over_prefix(mem):
    c1 = mem.commit([Node(id="a", content=1)])
    c2 = mem.commit([Node(id="a", content=2)])
    name = c2.id[:6]
    mem.branch(name, at=c1.id)
    assert mem.resolve(name).id == c1.id  # the branch, not the commit with that prefix
    assert mem.resolve(c2.id[:7]).id == c2.id
    assert mem.get("a", at=name).content == 1


def test_as_of_reads_follow_the_reflog(repo):
    c1 = repo.commit([Node(id="n", content=1)])
    c2 = repo.commit([Node(id="n", content=2)])
    c3 = repo.commit([Node(id="n", content=3)])
    reset = repo.reset("main", c1.id)
    assert reset.id == c1.id
    after_reset = repo.resolve("main@{" + (c3.record_time + timedelta(days=1)).isoformat() + "}")
    assert after_reset.id == c1.id
    c4 = repo.commit([Node(id="n", content=4)])

    for commit in (c1, c2, c3):
        t = commit.record_time
        assert repo.resolve("main", as_of=t).id == commit.id  # inclusive bound
        assert repo.resolve(f"main@{{{t.isoformat()}}}").id == commit.id
        assert repo.resolve(f"HEAD@{{{t.isoformat()}}}").id == commit.id
        assert repo.get("n", as_of=t).content == repo.get("n", at=commit.id).content
        assert ids(repo.log(as_of=t)) == ids(repo.log(at=commit.id))
    # between c3 and the reset, main still pointed at c3; after it, at c1
    assert repo.resolve("main", as_of=c4.record_time).id == c4.id
    assert {n.id: n.content for n in repo.nodes(as_of=c3.record_time)} == {"n": 3}
    # a time with microseconds and an offset works in the REF@{TIME} form
    shifted = c2.record_time.astimezone(timezone(timedelta(hours=-7)))
    assert repo.resolve(f"main@{{{shifted.isoformat()}}}").id == c2.id
    assert repo.resolve(f"main@{{{c2.record_time.isoformat()}}}~1").id == c1.id

    with pytest.raises(NotFound):
        repo.resolve("main", as_of=c1.record_time - timedelta(microseconds=1))  # before main existed
    with pytest.raises(NotFound):
        repo.get("n", as_of=T0 - timedelta(days=1))
    with pytest.raises(InvalidInput):
        repo.get("n", at=c2.id, as_of=c2.record_time)  # as_of needs a ref, not a commit id
    with pytest.raises(InvalidInput):
        repo.resolve(f"{c2.id[:8]}@{{{c2.record_time.isoformat()}}}")
    with pytest.raises(InvalidInput):
        repo.get("n", as_of=datetime(2026, 6, 1))  # naive
    with pytest.raises(InvalidInput):
        repo.resolve(f"main@{{{c2.record_time.isoformat()}}}", as_of=c2.record_time)  # both
    with pytest.raises(NotFound):
        repo.resolve("nobranch", as_of=c2.record_time)


def test_as_of_reads_of_a_deleted_branch_use_its_reflog(mem):
    mem.commit([Node(id="n", content=1)])
    mem.branch("feat")
    f1 = mem.commit([Node(id="n", content=2)], branch="feat")
    mid = f1.record_time
    mem.delete_branch("feat")
    gone = mem.resolve("main").record_time + timedelta(days=1)
    # delete_branch keeps the reflog "so as-of reads remain honest"
    assert mem.resolve("feat", as_of=mid).id == f1.id
    assert mem.resolve(f"feat@{{{mid.isoformat()}}}").id == f1.id
    with pytest.raises(NotFound):
        mem.resolve("feat", as_of=gone)  # after the deletion there is nothing


# -- history ---------------------------------------------------------------------------


def test_history_statuses(repo):
    c1 = repo.commit([Node(id="k", content="v1"), Node(id="other", content=0)])
    c2 = repo.commit([Node(id="k", content="v2")])
    repo.commit([Node(id="other", content=1)])
    c4 = repo.commit(delete=["k"])
    c5 = repo.commit([Node(id="k", content="v3")])
    versions = repo.history("k")
    assert [(v.node.content, v.status, v.commit.id) for v in versions] == [
        ("v3", "current", c5.id),
        ("v2", "deleted", c2.id),
        ("v1", "superseded", c1.id),
    ]
    assert versions[0].ended_by is None and versions[0].superseded_by is None
    assert versions[1].ended_by == c4.id and versions[1].superseded_by is None
    assert versions[2].ended_by == c2.id and versions[2].superseded_by == versions[1].hash
    assert all(v.id == "k" and v.hash == v.node.hash for v in versions)
    # as the branch stood before the deletion
    assert [(v.node.content, v.status) for v in repo.history("k", at=c2.id)] == [
        ("v2", "current"),
        ("v1", "superseded"),
    ]
    repo.commit(delete=["k"])
    assert [v.status for v in repo.history("k")] == ["deleted", "deleted", "superseded"]
    assert repo.history("never") == []


def test_history_and_log_follow_the_branch(repo):
    base = repo.commit([Node(id="k", content="base")])
    repo.branch("side")
    m1 = repo.commit([Node(id="k", content="main")])
    s1 = repo.commit([Node(id="k", content="side")], branch="side")
    assert [v.node.content for v in repo.history("k")] == ["main", "base"]
    assert [v.node.content for v in repo.history("k", at="side")] == ["side", "base"]
    assert ids(repo.log(node="k")) == [m1.id, base.id]
    assert ids(repo.log(at="side", node="k")) == [s1.id, base.id]
    assert ids(repo.log(at="side", node="k", limit=1)) == [s1.id]


# -- blame -----------------------------------------------------------------------------


def test_blame_text_per_line(repo):
    c1 = repo.commit([Node(id="doc", content="alpha\nbeta\ngamma")], author="a1")
    repo.commit([Node(id="unrelated", content=1)])
    c3 = repo.commit([Node(id="doc", content="alpha\nBETA\ngamma\ndelta")], author="a3")
    c4 = repo.commit([Node(id="doc", content="zero\nalpha\nBETA\ndelta")], author="a4")
    blame = repo.blame("doc")
    assert blame.commit.id == c4.id
    assert [(line.text, line.commit, line.key) for line in blame.lines] == [
        ("zero", c4.id, None),
        ("alpha", c1.id, None),
        ("BETA", c3.id, None),
        ("delta", c3.id, None),
    ]
    assert [line.author for line in blame.lines] == ["a4", "a1", "a3", "a3"]
    assert blame.lines[1].record_time == c1.record_time
    older = repo.blame("doc", at=c3.id)
    assert older.commit.id == c3.id
    assert [line.commit for line in older.lines] == [c1.id, c3.id, c1.id, c3.id]


def test_blame_json_per_key(repo):
    c1 = repo.commit([Node(id="prefs", content={"lang": "en", "tz": "UTC", "theme": "dark"})])
    c2 = repo.commit([Node(id="prefs", content={"lang": "fr", "tz": "UTC", "theme": "dark", "font": 12})])
    c3 = repo.commit([Node(id="prefs", content={"lang": "fr", "tz": "UTC", "font": 12, "extra": [1, 2]})])
    blame = repo.blame("prefs")
    assert blame.commit.id == c3.id
    assert [(line.key, line.commit) for line in blame.lines] == [
        ("extra", c3.id),
        ("font", c2.id),
        ("lang", c2.id),
        ("tz", c1.id),
    ]
    assert [line.text for line in blame.lines] == ["[1,2]", "12", '"fr"', '"UTC"']


def test_blame_whole_values_and_absent_ids(repo):
    c1 = repo.commit([Node(id="list", content=[1, 2])])
    claim = Node(
        id="claims/c1",
        kind="claim",
        content=Claim("mira", "city", "Oslo", T0),
        provenance=Provenance(observation="o1"),
    )
    c2 = repo.commit([claim, Node(id="list", content=[1, 2, 3])])
    assert [line.commit for line in repo.blame("list").lines] == [c2.id]
    blame = repo.blame("claims/c1")
    assert blame.commit.id == c2.id
    assert blame.node.provenance.observation == "o1"
    # A claim is blamed field by field, like a JSON object.
    by_key = {line.key: line for line in blame.lines}
    fields = {"subject", "predicate", "value", "valid_from", "valid_to", "confidence", "evidence"}
    assert set(by_key) == fields
    assert by_key["value"].text == '"Oslo"' and by_key["value"].commit == c2.id
    assert repo.blame("list", at=c1.id).commit.id == c1.id
    with pytest.raises(NotFound):
        repo.blame("absent")
    repo.commit(delete=["list"])
    with pytest.raises(NotFound):
        repo.blame("list")


# -- reading snapshots -----------------------------------------------------------------


def test_nodes_ordering_prefix_and_batching(repo):
    names = [f"{ns}/{i:04d}" for ns in ("users/a", "users/b", "agents") for i in range(300)]
    names += ["users", "users/a", "usersx/1"]
    batch = [Node(id=name, content=name[::-1]) for name in names]
    c1 = repo.commit(batch[:400])
    repo.commit(batch[400:])
    listed = list(repo.nodes())
    assert [n.id for n in listed] == sorted(names)
    assert all(n.content == n.id[::-1] for n in listed)
    assert [n.id for n in repo.nodes(prefix="users/a/")] == sorted(
        n for n in names if n.startswith("users/a/")
    )
    assert [n.id for n in repo.nodes(prefix="users")] == sorted(n for n in names if n.startswith("users"))
    assert list(repo.nodes(prefix="zzz")) == []
    assert [n.id for n in repo.nodes(at=c1.id)] == sorted(names[:400])


def test_nodes_iterator_is_pinned_to_its_snapshot(repo):
    repo.commit([Node(id=f"n/{i:04d}", content=i) for i in range(700)])
    it = repo.nodes()
    first = [next(it) for _ in range(10)]
    # the store changes while the iterator is half-way through
    repo.commit([Node(id=f"n/{i:04d}", content=-1) for i in range(0, 700, 3)], delete=["n/0698"])
    rest = list(it)
    seen = first + rest
    assert [n.id for n in seen] == [f"n/{i:04d}" for i in range(700)]
    assert [n.content for n in seen] == list(range(700))


def test_reads_on_an_empty_store(repo):
    assert repo.get("a") is None
    assert list(repo.nodes()) == []
    assert list(repo.log()) == []
    assert list(repo.log(node="a")) == []
    assert repo.history("a") == []
    with pytest.raises(NotFound):
        repo.blame("a")
    with pytest.raises(NotFound):
        repo.resolve("HEAD")
    with pytest.raises(NotFound):
        repo.get("a", at="main")
    with pytest.raises(InvalidInput):
        repo.get("bad//id")


def test_diff_lists(repo):
    c1 = repo.commit([Node(id=k, content=k) for k in ("keep", "mod/1", "mod/2", "gone/1", "gone/2")])
    c2 = repo.commit(
        [
            Node(id="mod/2", content="x"),
            Node(id="mod/1", content="y"),
            Node(id="new/b", content=1),
            Node(id="new/a", content=2),
        ],
        delete=["gone/2", "gone/1"],
    )
    diff = repo.diff(c1.id, c2.id)
    assert [c.id for c in diff.added] == ["new/a", "new/b"]
    assert [c.id for c in diff.removed] == ["gone/1", "gone/2"]
    assert [c.id for c in diff.modified] == ["mod/1", "mod/2"]
    assert all(c.old is None and c.new is not None for c in diff.added)
    assert all(c.old is not None and c.new is None for c in diff.removed)
    assert [(c.old.content, c.new.content) for c in diff.modified] == [("mod/1", "y"), ("mod/2", "x")]
    same = repo.diff("HEAD", c2.id)
    assert same.added == same.removed == same.modified == []
    assert repo.diff("HEAD~1", "HEAD") == diff


# -- log -------------------------------------------------------------------------------


def test_log_order_and_limit(repo):
    made = [repo.commit([Node(id="n", content=i)]) for i in range(12)]
    assert ids(repo.log()) == ids(reversed(made))
    assert ids(repo.log(limit=3)) == ids(reversed(made[-3:]))
    assert list(repo.log(limit=0)) == []
    assert ids(repo.log(at=made[4].id)) == ids(reversed(made[:5]))
    assert ids(repo.log(at="HEAD~10")) == ids(reversed(made[:2]))
    assert ids(repo.log(node="n", limit=2)) == ids(reversed(made[-2:]))


def test_log_streams(tmp_path, clock):
    path = tmp_path / "store"
    with Repo.init(path, clock=clock, sync=False) as repo:
        made = [repo.commit([Node(id="n", content=i)]) for i in range(600)]
        root = made[0]
    # damage the oldest commit: a walk that reads everything first cannot get past it
    with Repo.open(path, clock=clock) as repo:
        key = DEFAULT_SCOPE + bytes.fromhex(root.id)

        def damage(txn):
            data = bytearray(txn.get(Space.OBJECTS, key))
            data[-1] ^= 0x01
            txn.put(Space.OBJECTS, key, bytes(data))

        repo.kv.transact(damage)
    with Repo.open(path, clock=clock) as repo:
        assert ids(repo.log(limit=1)) == [made[-1].id]
        stream = repo.log()
        assert [next(stream).id for _ in range(300)] == ids(reversed(made[-300:]))
        with pytest.raises(CorruptObject):
            list(repo.log())


def test_log_over_a_multi_branch_dag(repo):
    c1 = repo.commit([Node(id="shared", content=1)], message="c1")
    repo.branch("other")
    c2 = repo.commit([Node(id="shared", content=2)], message="c2")
    repo.branch("feat")
    o1 = repo.commit([Node(id="o", content=1)], branch="other", message="o1")
    f1 = repo.commit([Node(id="f", content=1)], branch="feat", message="f1")
    c3 = repo.commit([Node(id="shared", content=3)], message="c3")
    f2 = repo.commit([Node(id="f", content=2)], branch="feat", message="f2")
    o2 = repo.commit([Node(id="shared", content=9)], branch="other", message="o2")
    assert ids(repo.log()) == [c3.id, c2.id, c1.id]
    assert ids(repo.log(at="feat")) == [f2.id, f1.id, c2.id, c1.id]
    assert ids(repo.log(at="other")) == [o2.id, o1.id, c1.id]
    assert ids(repo.log(at="feat", node="shared")) == [c2.id, c1.id]
    assert ids(repo.log(at="other", node="shared")) == [o2.id, c1.id]
    assert ids(repo.log(node="f")) == []
    assert ids(repo.log(at="feat", node="f")) == [f2.id, f1.id]
    assert ids(repo.log(at=f1.id)) == [f1.id, c2.id, c1.id]
    for branch in ("main", "feat", "other"):
        times = [c.record_time for c in repo.log(at=branch)]
        assert times == sorted(times, reverse=True)


# -- reset and revert ------------------------------------------------------------------


def test_reset(repo):
    c1 = repo.commit([Node(id="a", content=1)])
    c2 = repo.commit([Node(id="a", content=2), Node(id="b", content=2)])
    moved = repo.reset("main", c1.id)
    assert moved.id == c1.id
    assert snapshot(repo) == {"a": 1}
    assert ids(repo.log()) == [c1.id]
    assert repo.resolve(c2.id).id == c2.id  # still there by id
    repo.reset("main", c2.id)  # and forward again
    assert snapshot(repo) == {"a": 2, "b": 2}
    with pytest.raises(NotFound):
        repo.reset("nope", c1.id)
    with pytest.raises(NotFound):
        repo.reset("main", "no-such-rev")
    c3 = repo.commit([Node(id="c", content=3)])
    assert c3.parents == (c2.id,)


def test_revert(repo):
    c1 = repo.commit([Node(id="x", content=1), Node(id="z", content=1)])
    c2 = repo.commit([Node(id="x", content=2), Node(id="y", content=2)], delete=["z"], message="bad")
    c3 = repo.commit([Node(id="w", content=3)])
    undo = repo.revert(c2.id, author="fixer")
    assert undo.parents == (c3.id,)
    assert undo.author == "fixer"
    assert "Revert" in undo.message and c2.id[:7] in undo.message
    assert snapshot(repo) == {"x": 1, "z": 1, "w": 3}
    assert repo.get("x") == repo.get("x", at=c1.id)
    # reverting the root commit removes what it added
    undo_root = repo.revert(c1.id)
    assert snapshot(repo) == {"w": 3}
    assert undo_root.parents == (undo.id,)


def test_revert_refuses_when_an_id_changed_since(repo):
    c1 = repo.commit([Node(id="x", content=1)])
    c2 = repo.commit([Node(id="x", content=2)])
    c3 = repo.commit([Node(id="x", content=3)])
    with pytest.raises(MergeConflict):
        repo.revert(c2.id)
    assert ids(repo.log()) == [c3.id, c2.id, c1.id]


# -- opening stores --------------------------------------------------------------------


def test_init_and_open_refusals(tmp_path):
    with pytest.raises(NotFound):
        Repo.open(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(NotFound):
        Repo.open(tmp_path / "empty")
    Repo.init(tmp_path / "empty").close()  # an empty directory is fine for init
    with pytest.raises(InvalidInput):
        Repo.init(tmp_path / "empty")  # a store is there now
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("hello")
    with pytest.raises(InvalidInput):
        Repo.init(tmp_path / "full")
    assert sorted(p.name for p in (tmp_path / "full").iterdir()) == ["notes.txt"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidInput):
        Repo.init(tmp_path / "file")
    with pytest.raises(InvalidInput):
        Repo.open(tmp_path / "empty", tenant="Not A Tenant")


def test_reopen_keeps_everything(tmp_path, clock):
    path = tmp_path / "store"
    with Repo.init(path, clock=clock) as repo:
        c1 = repo.commit([Node(id="a", content=1, meta={"m": 1})], author="x", meta={"run": 1})
        repo.branch("side")
        repo.switch("side")
        c2 = repo.commit([Node(id="b", content=2)])
        repo.reset("side", c1.id)
        c3 = repo.commit([Node(id="c", content=3)])
        assert repo.path == path
    with pytest.raises(MnemoError):
        repo.get("a")  # closed
    with Repo.open(path, clock=clock) as again:
        assert again.head == "side"
        assert again.branches() == ["main", "side"]
        assert snapshot(again) == {"a": 1, "c": 3}
        assert again.get("a").meta == {"m": 1}
        assert again.resolve(c1.id).meta == {"run": 1}
        assert ids(again.log()) == [c3.id, c1.id]
        assert again.resolve("side", as_of=c2.record_time).id == c2.id
        assert [v.node.content for v in again.history("a")] == [1]
        assert again.blame("c").commit.id == c3.id
        assert again.diff(c1.id, c3.id).added[0].id == "c"


def test_readonly_handle(tmp_path, clock):
    path = tmp_path / "store"
    with Repo.init(path, clock=clock) as repo:
        c1 = repo.commit([Node(id="a", content=1)])
        repo.branch("side")
    with Repo.open(path, readonly=True) as ro:
        assert ro.readonly is True
        assert ro.get("a").content == 1
        assert ids(ro.log()) == [c1.id]
        assert ro.branches() == ["main", "side"]
        for write in (
            lambda: ro.commit([Node(id="b", content=2)]),
            lambda: ro.commit(message="x", allow_empty=True),
            lambda: ro.branch("new"),
            lambda: ro.delete_branch("side"),
            lambda: ro.switch("side"),
            lambda: ro.reset("main", c1.id),
        ):
            with pytest.raises(InvalidInput):
                write()
        assert ro.head == "main"
    with Repo.open(path) as rw:
        assert rw.readonly is False
        assert ids(rw.log()) == [c1.id]
        assert rw.branches() == ["main", "side"]
        # a read-only handle next to a writable one in the same process
        with Repo.open(path, readonly=True) as ro:
            with pytest.raises(InvalidInput):
                ro.commit([Node(id="b", content=2)])
            rw.commit([Node(id="b", content=2)])
            assert ro.get("b").content == 2


# -- tenants ---------------------------------------------------------------------------


def test_tenants_are_separate_keyspaces(tmp_path, clock):
    path = tmp_path / "store"
    with Repo.init(path, clock=clock) as default:
        d1 = default.commit([Node(id="shared/id", content="default")])
        assert default.tenant == "default"
    with pytest.raises(NotFound):
        Repo.open(path, tenant="acme")
    with Repo.open(path, tenant="acme", create=True, clock=clock) as acme:
        assert acme.tenant == "acme"
        assert acme.head == "main"
        assert acme.get("shared/id") is None
        assert list(acme.log()) == []
        assert acme.branches() == []
        with pytest.raises(NotFound):
            acme.resolve(d1.id)
        with pytest.raises(NotFound):
            acme.resolve(d1.id[:8])
        a1 = acme.commit([Node(id="shared/id", content="acme"), Node(id="acme/only", content=1)])
        acme.branch("acme-branch")
    with Repo.open(path, clock=clock) as default, Repo.open(path, tenant="acme", clock=clock) as acme:
        assert default.get("shared/id").content == "default"
        assert acme.get("shared/id").content == "acme"
        assert default.get("acme/only") is None
        assert ids(default.log()) == [d1.id]
        assert ids(acme.log()) == [a1.id]
        assert default.branches() == ["main"]
        assert acme.branches() == ["acme-branch", "main"]
        assert ids(default.log(node="acme/only")) == []
        assert default.history("shared/id")[0].node.content == "default"
        for rev in (a1.id, a1.id[:8], a1.id[:4]):
            with pytest.raises(NotFound):
                default.resolve(rev)
            with pytest.raises(NotFound):
                default.get("shared/id", at=rev)
        assert acme.resolve(a1.id[:8]).id == a1.id
        with pytest.raises(NotFound):
            default.switch("acme-branch")
        # a second create=True opens the same tenant rather than a new one
        with Repo.open(path, tenant="acme", create=True) as again:
            assert ids(again.log()) == [a1.id]


# -- integrity -------------------------------------------------------------------------


def _flip_last_byte(repo, oid_hex):
    key = DEFAULT_SCOPE + bytes.fromhex(oid_hex)

    def damage(txn):
        data = txn.get(Space.OBJECTS, key)
        assert data is not None
        txn.put(Space.OBJECTS, key, data[:-1] + bytes([data[-1] ^ 0x40]))

    repo.kv.transact(damage)


def test_corrupt_node_is_detected(repo):
    c1 = repo.commit([Node(id="a", content="precious"), Node(id="b", content="fine")])
    repo.commit([Node(id="a", content="newer")])
    old = repo.get("a", at=c1.id)
    _flip_last_byte(repo, old.hash)
    with pytest.raises(CorruptObject):
        repo.get("a", at=c1.id)
    with pytest.raises(CorruptObject):
        list(repo.nodes(at=c1.id))
    with pytest.raises(CorruptObject):
        repo.diff(c1.id, "HEAD")
    with pytest.raises(CorruptObject):
        repo.history("a")
    # everything that does not touch the damaged bytes still reads
    assert repo.get("a").content == "newer"
    assert repo.get("b").content == "fine"


def test_corrupt_commit_and_chunk_are_detected(tmp_path, clock):
    path = tmp_path / "store"
    with Repo.init(path, clock=clock) as repo:
        c1 = repo.commit([Node(id="a", content=1)])
        c2 = repo.commit([Node(id="a", content=2)])
        _flip_last_byte(repo, c1.id)
        _flip_last_byte(repo, c2.tree)
    with Repo.open(path, clock=clock) as repo:  # a fresh handle: nothing cached
        with pytest.raises(CorruptObject):
            repo.resolve(c1.id)
        with pytest.raises(CorruptObject):
            repo.get("a")
        with pytest.raises(CorruptObject):
            list(repo.log())


def test_text_that_is_not_utf8_is_refused_everywhere(repo):
    c1 = repo.commit([Node(id="a", content=1)])
    repo.branch("keep")
    bad = "agent\ud800"
    for write in (
        lambda: repo.commit([Node(id="b", content=1)], author=bad),
        lambda: repo.commit([Node(id="b", content=1)], message=bad),
        lambda: repo.commit([Node(id="b", content=1)], meta={bad: 1}),
        lambda: repo.branch("x", author=bad),
        lambda: repo.reset("main", c1.id, author=bad),
        lambda: repo.revert(c1.id, author=bad),
        lambda: repo.delete_branch("keep", author=bad),
    ):
        with pytest.raises(InvalidInput):
            write()
    # and nothing was written
    assert ids(repo.log()) == [c1.id]
    assert repo.branches() == ["keep", "main"]


@settings(max_examples=examples(25), deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 150).map(lambda n: f"k/{n:03d}"), st.none() | st.integers(0, 2))),
        max_size=8,
    )
)
def test_equal_snapshots_have_equal_trees_whatever_the_history(batches):
    edited = Repo.in_memory()
    edited.commit(message="start", allow_empty=True)
    model = {}
    for batch in batches:
        edits = dict(batch)
        puts = [Node(id=k, content=v) for k, v in edits.items() if v is not None]
        deletes = [k for k, v in edits.items() if v is None and k in model]
        after = {**model, **{n.id: n.content for n in puts}}
        for k in deletes:
            del after[k]
        tip = edited.resolve()
        made = edited.commit(puts, deletes)
        if after == model:
            # a commit that changes nothing writes nothing and returns the tip as it was
            assert made.created is False
            assert made.id == tip.id and edited.resolve().id == tip.id
            continue
        assert made.created is True and made.parents == (tip.id,)
        model = after
    direct = Repo.in_memory()
    direct.commit(message="start", allow_empty=True)
    if model:
        direct.commit([Node(id=k, content=v) for k, v in sorted(model.items(), reverse=True)])
    assert edited.resolve().tree == direct.resolve().tree
    assert {n.id: n.content for n in edited.nodes()} == model

"""Record time (as-of reads, REF@{TIME}, resets), retention (expires_at) and tenant isolation."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.clocks import T0, Clock
from support.tiers import examples

from mnemosyne import Claim, InvalidInput, Node, NotFound, Repo

US = timedelta(microseconds=1)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def mem(clock):
    repo = Repo.in_memory(clock=clock)
    yield repo
    repo.close()


def snapshot(repo, **kw):
    return {n.id: n.content for n in repo.nodes(**kw)}


def ids(commits):
    return [c.id for c in commits]


def claim(node_id, value, valid_from, **kw):
    return Node(id=node_id, kind="claim", content=Claim("mira", "city", value, valid_from), **kw)


def iso(when):
    return when.isoformat()


# -- as-of reads ------------------------------------------------------------------------------


def test_as_of_reads_are_inclusive_and_follow_each_commit(mem, clock):
    c1 = mem.commit([Node(id="a", content=1), claim("f/1", "paris", T0)], message="one")
    c2 = mem.commit([Node(id="a", content=2), Node(id="b", content="x")], message="two")
    c3 = mem.commit([claim("f/2", "rome", T0 + timedelta(days=1))], delete=["a"], message="three")
    states = [
        (c1, {"a": 1}, ["f/1"], [c1.id]),
        (c2, {"a": 2, "b": "x"}, ["f/1"], [c2.id, c1.id]),
        (c3, {"b": "x"}, ["f/2"], [c3.id, c2.id, c1.id]),
    ]
    later = T0 + timedelta(days=2)
    for index, (commit, notes, in_force, log) in enumerate(states):
        for as_of in (commit.record_time, commit.record_time + (US if index == 2 else timedelta(0))):
            assert {k: v for k, v in snapshot(mem, as_of=as_of).items() if not k.startswith("f/")} == notes
            assert mem.get("a", as_of=as_of) == (Node(id="a", content=notes["a"]) if "a" in notes else None)
            assert [f.id for f in mem.facts("mira", "city", valid_at=later, as_of=as_of)] == in_force
            assert ids(mem.log(as_of=as_of)) == log
            assert mem.resolve("HEAD", as_of=as_of).id == commit.id
        if index:
            # a microsecond before a commit was recorded, the branch still pointed at its parent
            before = commit.record_time - US
            previous = states[index - 1][0]
            assert mem.resolve("main", as_of=before).id == previous.id
            assert ids(mem.log(as_of=before)) == states[index - 1][3]
            assert mem.get("b", as_of=before) == mem.get("b", at=previous.id)
    # the timeline too: before c3 only one claim was known
    assert [f.id for f in mem.timeline("mira", "city", as_of=c2.record_time)] == ["f/1"]
    assert [f.id for f in mem.timeline("mira", "city", as_of=c3.record_time)] == ["f/1", "f/2"]
    # the facts default valid_at under as_of is the as-of time itself
    assert [f.id for f in mem.facts("mira", "city", as_of=c3.record_time)] == ["f/1"]

    # log --node as of a time
    assert ids(mem.log(node="a", as_of=c2.record_time)) == [c2.id, c1.id]
    assert ids(mem.log(node="a", as_of=c3.record_time)) == [c3.id, c2.id, c1.id]

    # diff as of a time: both revisions are refs read at that time
    mem.branch("side", at=c1.id)
    branched_at = clock.last
    side = mem.commit([Node(id="s", content=0)], branch="side")
    d = mem.diff("side", "main", as_of=branched_at)
    assert (d.a, d.b) == (c1.id, c3.id)
    assert [c.id for c in d.added] == ["b", "f/2"]
    assert [c.id for c in d.removed] == ["a"]
    d = mem.diff("side", "main", as_of=side.record_time)
    assert (d.a, d.b) == (side.id, c3.id)
    assert [c.id for c in d.removed] == ["a", "s"]
    with pytest.raises(NotFound):
        mem.diff("side", "main", as_of=branched_at - US)  # side did not exist yet


def test_as_of_before_the_branch_existed_and_with_a_commit_id(mem):
    c1 = mem.commit([Node(id="a", content=1), claim("f/1", "paris", T0)])
    c2 = mem.commit([Node(id="a", content=2)])
    before = c1.record_time - US
    with pytest.raises(NotFound):
        mem.get("a", as_of=before)
    with pytest.raises(NotFound):
        list(mem.nodes(as_of=before))
    with pytest.raises(NotFound):
        mem.facts("mira", as_of=before)
    with pytest.raises(NotFound):
        mem.timeline("mira", "city", as_of=before)
    with pytest.raises(NotFound):
        list(mem.log(as_of=before))
    with pytest.raises(NotFound):
        mem.diff("main", "main", as_of=before)
    with pytest.raises(NotFound):
        mem.resolve(f"main@{{{iso(before)}}}")

    at = c2.record_time
    for rev in (c1.id, c1.id[:8]):
        with pytest.raises(InvalidInput):
            mem.get("a", at=rev, as_of=at)
        with pytest.raises(InvalidInput):
            list(mem.nodes(at=rev, as_of=at))
        with pytest.raises(InvalidInput):
            mem.facts("mira", at=rev, as_of=at)
        with pytest.raises(InvalidInput):
            list(mem.log(at=rev, as_of=at))
        with pytest.raises(InvalidInput):
            mem.diff(rev, "main", as_of=at)
        with pytest.raises(InvalidInput):
            mem.resolve(f"{rev}@{{{iso(at)}}}")
    with pytest.raises(InvalidInput):
        mem.get("a", as_of=datetime(2026, 6, 1, 10))  # naive
    with pytest.raises(NotFound):
        mem.get("a", at="nobranch", as_of=at)
    # with a branch name as at, as_of works
    assert mem.get("a", at="main", as_of=c1.record_time).content == 1


def test_ref_at_time_syntax(mem):
    c1 = mem.commit([Node(id="a", content=1)])
    c2 = mem.commit([Node(id="a", content=2), claim("f/1", "oslo", T0)])
    mem.branch("feat")
    f1 = mem.commit([Node(id="a", content=3)], branch="feat")
    t1, t2 = c1.record_time, c2.record_time
    z = iso(t2).replace("+00:00", "Z")
    assert mem.get("a", at=f"main@{{{iso(t1)}}}").content == 1
    assert mem.get("a", at=f"main@{{{z}}}").content == 2
    assert mem.get("a", at=f"HEAD@{{{iso(t1)}}}").content == 1
    assert mem.get("a", at=f"main@{{{iso(t2)}}}~1").content == 1
    assert snapshot(mem, at=f"main@{{{iso(t1)}}}") == {"a": 1}
    assert ids(mem.log(at=f"main@{{{iso(t2)}}}")) == [c2.id, c1.id]
    assert ids(mem.log(at=f"feat@{{{iso(f1.record_time)}}}")) == [f1.id, c2.id, c1.id]
    assert mem.blame("a", at=f"main@{{{iso(t1)}}}").commit.id == c1.id
    assert [f.id for f in mem.facts("mira", at=f"main@{{{iso(t2)}}}", valid_at=T0)] == ["f/1"]
    assert mem.facts("mira", at=f"main@{{{iso(t1)}}}", valid_at=T0) == []
    d = mem.diff(f"main@{{{iso(t1)}}}", f"feat@{{{iso(f1.record_time)}}}")
    assert (d.a, d.b) == (c1.id, f1.id)
    assert [c.id for c in d.modified] == ["a"] and [c.id for c in d.added] == ["f/1"]
    # a bare date is midnight UTC
    assert mem.resolve("main@{2026-06-02}").id == c2.id
    with pytest.raises(NotFound):
        mem.resolve("main@{2026-06-01}")  # before the first commit (09:00)
    # feat did not exist when c1 was recorded
    with pytest.raises(NotFound):
        mem.get("a", at=f"feat@{{{iso(t1)}}}")
    for bad in ("main@{yesterday}", "main@{2026-06-01T10:00:00}", "main@{}"):
        with pytest.raises(InvalidInput):
            mem.resolve(bad)


def test_as_of_sees_resets_and_deleted_branches_through_the_reflog(mem, clock):
    c1 = mem.commit([Node(id="n", content=1)])
    c2 = mem.commit([Node(id="n", content=2)])
    c3 = mem.commit([Node(id="n", content=3)])
    mem.reset("main", c1.id)
    reset_at = clock.last
    assert reset_at > c3.record_time
    # the commit chain of the tip says nothing about c2 and c3 any more; the reflog does
    assert ids(mem.log()) == [c1.id]
    assert mem.get("n", as_of=reset_at - US).content == 3
    assert ids(mem.log(as_of=reset_at - US)) == [c3.id, c2.id, c1.id]
    assert mem.get("n", as_of=reset_at).content == 1
    assert ids(mem.log(as_of=reset_at)) == [c1.id]
    c4 = mem.commit([Node(id="n", content=4)])
    assert c4.parents == (c1.id,)
    assert mem.get("n", as_of=c4.record_time - US).content == 1
    assert mem.get("n", as_of=c4.record_time).content == 4
    d = mem.diff("main", "main", as_of=reset_at - US)
    assert d.a == d.b == c3.id
    assert mem.diff(f"main@{{{iso(reset_at - US)}}}", "main").modified[0].new.content == 4
    # merges (fast-forwards) are ref moves too
    mem.branch("side")
    s1 = mem.commit([Node(id="n", content=5)], branch="side")
    mem.merge("side")
    merged_at = clock.last
    assert mem.get("n", as_of=merged_at - US).content == 4
    assert mem.get("n", as_of=merged_at).content == 5
    assert mem.resolve("main", as_of=merged_at).id == s1.id
    # a deleted branch is still readable as of a time it existed, not after
    mem.delete_branch("side")
    deleted_at = clock.last
    assert mem.get("n", at="side", as_of=deleted_at - US).content == 5
    with pytest.raises(NotFound):
        mem.get("n", at="side", as_of=deleted_at)
    with pytest.raises(NotFound):
        mem.get("n", at="side")


steps = st.sampled_from([timedelta(seconds=1), timedelta(0), timedelta(seconds=-3), US])
operations = st.lists(
    st.one_of(
        st.tuples(st.just("commit"), st.integers(0, 3), st.integers(0, 3), steps),
        st.tuples(st.just("reset"), st.integers(0, 50), st.integers(0, 0), steps),
    ),
    min_size=1,
    max_size=10,
)


@settings(max_examples=examples(200), deadline=None)
@given(operations)
def test_as_of_reads_match_a_reflog_model(ops):
    """Commits and resets, with a clock that stands still or goes back: as-of reads follow the moves."""
    clock = Clock()
    repo = Repo.in_memory(clock=clock)
    snapshots = {}  # commit id -> {id: content}
    parents = {}  # commit id -> parent commit id or None
    order = []  # commit ids in creation order
    moves = []  # (reflog time, commit id) of main
    for op, x, y, step in ops:
        clock.step = step
        if op == "commit":
            tip = moves[-1][1] if moves else None
            commit = repo.commit([Node(id="n", content=x), Node(id=f"k/{y}", content=y)], allow_empty=True)
            assert commit.parents == ((tip,) if tip else ())
            assert not moves or commit.record_time > moves[-1][0]
            snapshots[commit.id] = {**(snapshots[tip] if tip else {}), "n": x, f"k/{y}": y}
            parents[commit.id] = tip
            order.append(commit.id)
            moves.append((commit.record_time, commit.id))
        elif order:
            target = order[x % len(order)]
            repo.reset("main", target)
            when = clock.last if clock.last > moves[-1][0] else moves[-1][0] + US
            moves.append((when, target))

    def chain(commit_id):
        out = []
        while commit_id is not None:
            out.append(commit_id)
            commit_id = parents[commit_id]
        return out

    if not moves:
        assert list(repo.log()) == []
        return
    for index, (when, tip) in enumerate(moves):
        for as_of in (when, when + (moves[index + 1][0] - when) / 2 if index + 1 < len(moves) else when + US):
            assert repo.resolve("main", as_of=as_of).id == tip
            assert repo.resolve(f"main@{{{iso(as_of)}}}").id == tip
            assert snapshot(repo, as_of=as_of) == snapshots[tip]
            assert repo.get("n", as_of=as_of).content == snapshots[tip]["n"]
            assert ids(repo.log(as_of=as_of)) == chain(tip)
        if index:
            old = moves[index - 1][1]
            d = repo.diff(f"main@{{{iso(when - US)}}}", f"main@{{{iso(when)}}}")
            assert (d.a, d.b) == (old, tip)
            changed = {c.id for c in d.added + d.removed + d.modified}
            a, b = snapshots[old], snapshots[tip]
            assert changed == {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
    with pytest.raises(NotFound):
        repo.get("n", as_of=moves[0][0] - US)


# -- retention -----------------------------------------------------------------------------------


def test_expired_nodes_disappear_once_the_clock_passes_expires_at(mem, clock):
    expires = T0 + timedelta(hours=1)
    short = Node(id="tmp/otp", content="123456", expires_at=expires)
    c1 = mem.commit([short, Node(id="keep", content="k"), claim("f/1", "lisbon", T0, expires_at=expires)])
    assert mem.get("tmp/otp") == short
    assert snapshot(mem) == {"f/1": mem.get("f/1").content, "keep": "k", "tmp/otp": "123456"}
    assert [f.id for f in mem.facts("mira", "city", valid_at=T0)] == ["f/1"]
    assert mem.history("tmp/otp")[0].status == "current"

    clock.now = expires - US
    assert mem.get("tmp/otp") == short
    clock.now = expires  # expires_at is the first moment it is no longer current
    assert mem.get("tmp/otp") is None
    clock.now = expires + timedelta(days=1)
    assert mem.get("tmp/otp") is None
    assert mem.get("tmp/otp", include_expired=True) == short
    assert mem.get("tmp/otp", at=c1.id) is None
    assert [n.id for n in mem.nodes()] == ["keep"]
    assert [n.id for n in mem.nodes(include_expired=True)] == ["f/1", "keep", "tmp/otp"]
    assert [n.id for n in mem.nodes(prefix="tmp/")] == []
    assert mem.facts("mira", "city", valid_at=T0) == []
    assert mem.timeline("mira", "city") == []
    [version] = mem.history("tmp/otp")
    assert (version.status, version.node, version.commit.id) == ("expired", short, c1.id)
    # expiry hides; it does not rewrite history
    assert ids(mem.log(node="tmp/otp")) == [c1.id]
    assert mem.diff(c1.id, c1.id).added == []

    # a new version without expiry is current again, and the expired one is superseded
    fresh = Node(id="tmp/otp", content="654321")
    c2 = mem.commit([fresh])
    assert mem.get("tmp/otp") == fresh
    assert [(v.status, v.commit.id) for v in mem.history("tmp/otp")] == [
        ("current", c2.id),
        ("superseded", c1.id),
    ]


def test_under_as_of_expiry_is_judged_at_that_time(mem, clock):
    expires = T0 + timedelta(hours=1)
    node = Node(id="tmp/x", content=1, expires_at=expires)
    c1 = mem.commit([node, claim("f/1", "kyiv", T0 - timedelta(days=1), expires_at=expires)])
    clock.now = expires + timedelta(hours=1)
    c2 = mem.commit([Node(id="other", content=2)])
    assert c1.record_time < expires < c2.record_time
    # "now" has passed expiry, but as of c1 it had not
    assert mem.get("tmp/x") is None
    assert mem.get("tmp/x", as_of=c1.record_time) == node
    assert mem.get("tmp/x", as_of=expires - US) == node
    assert mem.get("tmp/x", as_of=expires) is None
    assert mem.get("tmp/x", as_of=c2.record_time) is None
    assert mem.get("tmp/x", as_of=c2.record_time, include_expired=True) == node
    assert [n.id for n in mem.nodes(as_of=c1.record_time)] == ["f/1", "tmp/x"]
    assert [n.id for n in mem.nodes(as_of=c2.record_time)] == ["other"]
    assert [f.id for f in mem.facts("mira", "city", valid_at=T0, as_of=c1.record_time)] == ["f/1"]
    assert mem.facts("mira", "city", valid_at=T0, as_of=c2.record_time) == []
    assert [f.id for f in mem.timeline("mira", "city", as_of=c1.record_time)] == ["f/1"]
    # and a node that will expire is visible as of any time before it does
    clock.now = expires - timedelta(minutes=30)
    assert mem.get("tmp/x") == node


# -- tenants ----------------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "store"
    Repo.init(path, sync=False).close()
    return path


@pytest.mark.parametrize(
    "name", ["", "Acme", "-acme", "_acme", "a" * 65, "a b", "a/b", "a.b", "ac\x00me", "é"]
)
def test_tenant_names_are_validated(store, name):
    with pytest.raises(InvalidInput):
        Repo.open(store, tenant=name, create=True)
    with Repo.open(store) as repo:
        with pytest.raises(InvalidInput):
            repo.drop_tenant(name)
        assert repo.tenants() == ["default"]


@pytest.mark.parametrize("name", ["a", "0", "a" * 64, "acme-2_b", "9lives"])
def test_tenants_are_created_only_when_asked(store, name):
    with pytest.raises(NotFound):
        Repo.open(store, tenant=name)
    with Repo.open(store, tenant=name, create=True) as repo:
        assert repo.tenant == name
        assert repo.tenants() == sorted(["default", name])
    with Repo.open(store, tenant=name) as repo:
        assert list(repo.log()) == []


def _populate(path, clock, tenant, create=False):
    """A tenant with notes, claims and a branch; returns (handle, commits)."""
    repo = Repo.open(path, tenant=tenant, create=create, clock=clock, sync=False)
    c1 = repo.commit(
        [
            Node(id=f"{tenant}/secret", content=f"{tenant} data"),
            Node(id="shared/id", content=f"{tenant} value"),
            claim(f"{tenant}/claim", f"{tenant} city", T0),
        ],
        message=f"{tenant} one",
    )
    repo.branch(f"{tenant}-branch")
    c2 = repo.commit([Node(id="shared/id", content=f"{tenant} value 2")], message=f"{tenant} two")
    return repo, [c1, c2]


@pytest.fixture
def two_tenants(store):
    clock = Clock()
    acme, acme_commits = _populate(store, clock, "acme", create=True)
    clock.now += timedelta(days=1)  # the default tenant's main was born a day later
    default, default_commits = _populate(store, clock, "default")
    yield {"acme": (acme, acme_commits), "default": (default, default_commits)}
    acme.close()
    default.close()


@pytest.mark.parametrize(("reader", "owner"), [("default", "acme"), ("acme", "default")])
def test_nothing_crosses_between_tenants(two_tenants, reader, owner):
    repo, own = two_tenants[reader]
    _, theirs = two_tenants[owner]
    # ids: another tenant's id is simply absent
    assert repo.get(f"{owner}/secret") is None
    assert repo.get("shared/id").content == f"{reader} value 2"
    assert all(not n.id.startswith(owner) for n in repo.nodes())
    assert repo.history(f"{owner}/secret") == []
    assert ids(repo.log(node=f"{owner}/secret")) == []
    with pytest.raises(NotFound):
        repo.blame(f"{owner}/secret")
    # hashes: their commit ids and prefixes resolve to nothing here
    for commit in theirs:
        assert commit.id not in ids(own)
        for rev in (commit.id, commit.id[:4], commit.id[:8], commit.id[:20]):
            with pytest.raises(NotFound):
                repo.resolve(rev)
            with pytest.raises(NotFound):
                repo.get("shared/id", at=rev)
            with pytest.raises(NotFound):
                list(repo.nodes(at=rev))
            with pytest.raises(NotFound):
                list(repo.log(at=rev))
            with pytest.raises(NotFound):
                repo.blame("shared/id", at=rev)
            with pytest.raises(NotFound):
                repo.diff(rev, "main")
            with pytest.raises(NotFound):
                repo.diff("main", rev)
            with pytest.raises(NotFound):
                repo.facts("mira", at=rev)
        with pytest.raises(NotFound):
            repo.resolve(f"{commit.id[:8]}~1")
    # refs: their branch names do not exist here, now or at any time
    with pytest.raises(NotFound):
        repo.resolve(f"{owner}-branch")
    with pytest.raises(NotFound):
        repo.get("shared/id", at=f"{owner}-branch")
    with pytest.raises(NotFound):
        repo.get("shared/id", at=f"{owner}-branch", as_of=theirs[-1].record_time)
    with pytest.raises(NotFound):
        repo.resolve(f"{owner}-branch@{{{iso(theirs[-1].record_time)}}}")
    with pytest.raises(NotFound):
        repo.switch(f"{owner}-branch")
    with pytest.raises(NotFound):
        repo.branch("copy", at=f"{owner}-branch")
    with pytest.raises(NotFound):
        repo.merge(f"{owner}-branch")
    assert sorted(repo.branches()) == sorted(["main", f"{reader}-branch"])
    # as-of: their main's reflog is not ours
    first = two_tenants["acme"][1][0].record_time
    if reader == "default":
        with pytest.raises(NotFound):
            repo.get("shared/id", as_of=first)  # acme's main existed then; default's did not
    assert repo.resolve("main", as_of=own[-1].record_time).id == own[-1].id
    # log and facts
    assert ids(repo.log()) == [own[1].id, own[0].id]
    assert [f.id for f in repo.facts("mira", valid_at=T0)] == [f"{reader}/claim"]
    assert repo.timeline("mira", "city")[0].id == f"{reader}/claim"
    assert repo.contradictions() == []
    assert repo.fsck().ok


def test_tenants_listing_and_dropping(store):
    clock = Clock()
    default = Repo.open(store, clock=clock, sync=False)
    same = Node(id="same/node", content="identical in both tenants")
    default.commit([same], message="same")
    acme = Repo.open(store, tenant="acme", create=True, clock=clock, sync=False)
    old = acme.commit([same, Node(id="acme/only", content=1)], message="acme")
    Repo.open(store, tenant="beta", create=True).close()
    assert default.tenants() == acme.tenants() == ["acme", "beta", "default"]

    with pytest.raises(InvalidInput):
        acme.drop_tenant("acme")  # not its own
    with pytest.raises(InvalidInput):
        default.drop_tenant("default")  # its own, and the default tenant
    with pytest.raises(InvalidInput, match="default tenant cannot be dropped"):
        acme.drop_tenant("default")  # from another tenant's handle too
    with pytest.raises(NotFound):
        default.drop_tenant("nobody")
    assert default.drop_tenant("acme") > 0
    assert default.tenants() == ["beta", "default"]
    with pytest.raises(NotFound):
        default.drop_tenant("acme")
    with pytest.raises(NotFound):
        Repo.open(store, tenant="acme")
    # no cross-tenant deduplication: the default tenant's copy of the same node survives
    assert default.get("same/node") == same
    assert default.fsck().ok

    # the name can be created again, and starts empty
    fresh = Repo.open(store, tenant="acme", create=True, clock=clock, sync=False)
    assert fresh.tenants() == ["acme", "beta", "default"]
    assert list(fresh.log()) == []
    assert fresh.branches() == []
    assert fresh.get("acme/only") is None and fresh.get("same/node") is None
    with pytest.raises(NotFound):
        fresh.resolve(old.id)
    with pytest.raises(NotFound):
        fresh.get("acme/only", at=old.id)
    with pytest.raises(NotFound):
        fresh.resolve("main", as_of=old.record_time)
    new = fresh.commit([Node(id="acme/new", content=2)], message="new acme")
    fresh.branch("new-branch")

    # a stale handle of the dropped tenant sees nothing of the new one: every use is refused
    stale_reads = [
        lambda: acme.get("acme/new"),
        lambda: list(acme.nodes()),
        lambda: list(acme.log()),
        acme.branches,
        lambda: acme.facts("mira"),
        lambda: acme.history("acme/new"),
        lambda: acme.resolve("main", as_of=new.record_time),
    ]
    for rev in (new.id, new.id[:8], "new-branch"):
        stale_reads += [lambda rev=rev: acme.resolve(rev), lambda rev=rev: acme.get("acme/new", at=rev)]
    for read in stale_reads:
        with pytest.raises(NotFound):
            read()
    # nor does the new handle see the old tenant's data through the stale one
    assert fresh.get("acme/only") is None
    assert ids(fresh.log()) == [new.id]
    for handle in (default, acme, fresh):
        handle.close()


def test_a_stale_handle_of_a_dropped_tenant_neither_reads_nor_writes(store):
    clock = Clock()
    stale = Repo.open(store, tenant="acme", create=True, clock=clock, sync=False)
    old = stale.commit([Node(id="acme/only", content=1)])
    with Repo.open(store, clock=clock) as default:
        default.drop_tenant("acme")
    with pytest.raises(NotFound):
        stale.resolve(old.id)  # the commit was dropped, whatever the handle cached
    with pytest.raises(NotFound):
        stale.commit([Node(id="acme/after", content=2)])
    for read in (lambda: stale.get("acme/only"), lambda: list(stale.log()), stale.branches):
        with pytest.raises(NotFound):
            read()
    with pytest.raises(NotFound):
        stale.branch("x")
    # nor once a new tenant of that name exists
    with Repo.open(store, tenant="acme", create=True, clock=clock) as fresh:
        fresh.commit([Node(id="acme/new", content=3)])
        with pytest.raises(NotFound):
            stale.get("acme/new")
        with pytest.raises(NotFound):
            stale.commit([Node(id="acme/after", content=2)])
        assert fresh.get("acme/after") is None
        assert fresh.fsck().ok
    stale.close()

"""A state machine drives a Repo and a plain reference model side by side."""

from __future__ import annotations

import itertools
import shutil
import tempfile
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)
from support.tiers import examples

from mnemosyne import InvalidInput, Node, NotFound, Repo

IDS = ["a", "b", "c/d", "c/e", "f/g/h", "f/g/i"]
BRANCHES = ["main", "dev", "exp", "team/x"]
contents = st.integers(0, 3) | st.sampled_from(["x", "y", "xy"])  # no bools: 1 == True, but hashes differ


class Clock:
    """A clock that moves forward, stands still and jumps back."""

    def __init__(self):
        self.now = datetime(2026, 6, 1, tzinfo=UTC)
        self.steps = itertools.cycle(
            [timedelta(seconds=1), timedelta(0), timedelta(seconds=-3), timedelta(microseconds=2)]
        )

    def __call__(self):
        self.now += next(self.steps)
        return self.now


class RepoMachine(RuleBasedStateMachine):
    """Commits, branches, switches and resets against a dict-of-snapshots model."""

    commits = Bundle("commits")

    def __init__(self):
        super().__init__()
        self.repo = self.make_repo(Clock())
        self.snapshots = {}  # commit id -> {id: content}
        self.parents = {}  # commit id -> parent id or None
        self.branch_tips = {}  # branch -> commit id (branches with commits)
        self.unborn = set()  # branches created with no commits yet (HEAD's own aside)
        self.head = "main"
        self.record_times = []  # (branch, record time, commit id) as committed

    def make_repo(self, clock):
        return Repo.in_memory(clock=clock)

    def teardown(self):
        self.repo.close()

    # -- model helpers ---------------------------------------------------------

    def tip_snapshot(self, branch=None):
        tip = self.branch_tips.get(branch or self.head)
        return self.snapshots[tip] if tip is not None else {}

    def exists(self, name):
        """Whether branch ``name`` exists: with commits, unborn, or as HEAD's own branch."""
        return name in self.branch_tips or name in self.unborn or name == self.head

    def chain(self, commit):
        out = []
        while commit is not None:
            out.append(commit)
            commit = self.parents[commit]
        return out

    # -- rules -----------------------------------------------------------------

    def expected_outcome(self, puts, deletes, target, allow_empty):
        """(error class or None, whether a commit is created, the snapshot after)."""
        before = self.tip_snapshot(target)
        written = [i for i, _ in puts] + deletes
        after = dict(before)
        after.update(puts)
        for node_id in deletes:
            after.pop(node_id, None)
        if len(set(written)) < len(written):
            return InvalidInput, False, after
        if not self.exists(target):
            return NotFound, False, after  # a commit never creates a branch
        changed = after != before
        if changed and any(d not in before for d in deletes):
            return NotFound, False, after
        written_ever = set().union(*self.snapshots.values()) if self.snapshots else set()
        if any(d not in before and d not in written_ever for d in deletes):
            return NotFound, False, after  # never written anywhere: a mistake, not a retry
        if not changed and not allow_empty:
            if target not in self.branch_tips:
                return InvalidInput, False, after  # nothing to commit on a branch with no commits
            return None, False, after  # a no-op: the tip as it is, nothing written
        return None, True, after

    def do_commit(self, puts, deletes, branch, allow_empty):
        target = branch or self.head
        expected, creates, after = self.expected_outcome(puts, deletes, target, allow_empty)
        tips_before = dict(self.branch_tips)
        try:
            made = self.repo.commit(
                [Node(id=i, content=c) for i, c in puts],
                deletes,
                branch=branch,
                allow_empty=allow_empty,
                message=f"{len(puts)} puts, {len(deletes)} deletes",
            )
        except (InvalidInput, NotFound) as exc:
            assert expected is not None and isinstance(exc, expected), (exc, expected)
            # nothing was written
            assert {name: c.id for name, c in self.repo.branch_tips()} == tips_before
            return multiple()
        assert expected is None, f"expected {expected.__name__}"
        assert made.put_ids == tuple(i for i, _ in puts)
        # the ids this commit removed (absent ones, in an empty commit, are not)
        before = self.tip_snapshot(target)
        assert made.deleted_ids == (tuple(d for d in deletes if d in before) if creates else ())
        assert made.created is creates
        # the puts that replaced a version the tip had with another: what diff marks "~"
        assert made.modified_ids == (
            tuple(i for i, c in puts if i in before and before[i] != c) if creates else ()
        )
        parent = self.branch_tips.get(target)
        if not creates:
            # a commit that changes nothing returns the tip as it was and writes nothing
            assert made.id == parent
            assert {name: c.id for name, c in self.repo.branch_tips()} == tips_before
            return multiple()
        assert made.parents == ((parent,) if parent else ())
        if parent is not None:
            assert made.record_time > self.repo.resolve(parent).record_time
        self.snapshots[made.id] = after
        self.parents[made.id] = parent
        self.branch_tips[target] = made.id
        self.unborn.discard(target)
        self.record_times.append((target, made.record_time, made.id))
        return made.id

    @initialize(
        target=commits,
        puts=st.lists(st.tuples(st.sampled_from(IDS), contents), min_size=1, unique_by=lambda p: p[0]),
        early=st.lists(st.sampled_from(BRANCHES[1:]), max_size=2, unique=True),
    )
    def first_commit(self, puts, early):
        # branches made before the first commit have no commits either (as git switch -c)
        for name in early:
            assert self.repo.branch(name) is None
            self.unborn.add(name)
        return self.do_commit(puts, [], None, False)

    @rule(
        target=commits,
        puts=st.lists(st.tuples(st.sampled_from(IDS), contents), max_size=4, unique_by=lambda p: p[0]),
        branch=st.none() | st.none() | st.sampled_from(BRANCHES),
        allow_empty=st.booleans(),
        data=st.data(),
    )
    def commit(self, puts, branch, allow_empty, data):
        present = sorted(set(self.tip_snapshot(branch)) - {i for i, _ in puts})
        deletes = data.draw(st.lists(st.sampled_from(present), max_size=2, unique=True)) if present else []
        return self.do_commit(puts, deletes, branch, allow_empty)

    @rule(
        target=commits,
        puts=st.lists(st.tuples(st.sampled_from(IDS), contents), max_size=4),
        deletes=st.lists(st.sampled_from(IDS), max_size=2),
        branch=st.none() | st.sampled_from(BRANCHES),
        allow_empty=st.booleans(),
    )
    def any_commit(self, puts, deletes, branch, allow_empty):
        """Any puts and deletes at all: often refused (duplicates, absent ids), never half-written."""
        return self.do_commit(puts, deletes, branch, allow_empty)

    @rule(name=st.sampled_from(BRANCHES), start=st.none() | commits, orphan=st.booleans())
    def create_branch(self, name, start, orphan):
        if self.exists(name):
            try:
                self.repo.branch(name, at=start, orphan=orphan)
            except InvalidInput:
                return
            raise AssertionError("creating an existing branch must fail")
        if orphan:
            if start is not None:
                with pytest.raises(InvalidInput):
                    self.repo.branch(name, at=start, orphan=True)
                assert not self.exists(name) and name not in {n for n, _ in self.repo.branch_tips()}
                return
            assert self.repo.branch(name, orphan=True) is None  # its first commit is a new root
            self.unborn.add(name)
            return
        if start is None and self.head not in self.branch_tips:
            # from an unborn HEAD the new branch is unborn too
            assert self.repo.branch(name) is None
            self.unborn.add(name)
            return
        made = self.repo.branch(name, at=start)
        expected = start if start is not None else self.branch_tips[self.head]
        assert made.id == expected
        self.branch_tips[name] = expected

    @rule(name=st.sampled_from(BRANCHES))
    def switch(self, name):
        if self.exists(name):
            self.repo.switch(name)
            self.head = name
        else:
            try:
                self.repo.switch(name)
            except NotFound:
                return
            raise AssertionError("switching to an unknown branch must fail")
        assert self.repo.head == self.head

    @precondition(lambda self: self.head in self.branch_tips)
    @rule(to=commits, data=st.data())
    def reset(self, to, data):
        branch = data.draw(st.sampled_from(sorted(self.branch_tips)))
        moved = self.repo.reset(branch, to)
        assert moved.id == to
        self.branch_tips[branch] = to

    @rule(name=st.sampled_from(BRANCHES))
    def delete_branch(self, name):
        if name not in self.branch_tips and name not in self.unborn:
            expected = NotFound  # HEAD's own unborn branch has no ref to delete either
        elif name == self.head:
            expected = InvalidInput
        else:
            expected = None
        try:
            pointed_at = self.repo.delete_branch(name)
        except (InvalidInput, NotFound) as exc:
            assert expected is not None and isinstance(exc, expected), (exc, expected)
            return
        assert expected is None
        if name in self.unborn:
            assert pointed_at is None
            self.unborn.discard(name)
        else:
            assert pointed_at.id == self.branch_tips.pop(name)

    @rule(a=commits, b=commits)
    def diff_matches_model(self, a, b):
        old, new = self.snapshots[a], self.snapshots[b]
        diff = self.repo.diff(a, b)
        assert [c.id for c in diff.added] == sorted(set(new) - set(old))
        assert [c.id for c in diff.removed] == sorted(set(old) - set(new))
        assert [(c.id, c.old.content, c.new.content) for c in diff.modified] == [
            (i, old[i], new[i]) for i in sorted(set(old) & set(new)) if old[i] != new[i]
        ]
        assert all(c.new.content == new[c.id] for c in diff.added)
        assert all(c.old.content == old[c.id] for c in diff.removed)

    @rule(commit=commits)
    def read_at_commit(self, commit):
        expected = self.snapshots[commit]
        assert {n.id: n.content for n in self.repo.nodes(at=commit)} == expected
        for node_id in IDS:
            node = self.repo.get(node_id, at=commit)
            assert (node.content if node is not None else None) == expected.get(node_id)
        assert [c.id for c in self.repo.log(at=commit)] == self.chain(commit)

    @precondition(lambda self: self.record_times)
    @rule(data=st.data())
    def as_of_commit_time(self, data):
        branch, when, commit = data.draw(st.sampled_from(self.record_times))
        # at its record time the branch pointed at the commit, whatever happened since
        assert self.repo.resolve(branch, as_of=when).id == commit
        assert {n.id: n.content for n in self.repo.nodes(at=branch, as_of=when)} == self.snapshots[commit]

    # -- invariants ------------------------------------------------------------

    @invariant()
    def head_snapshot_matches(self):
        expected = self.tip_snapshot()
        listed = list(self.repo.nodes())
        assert [n.id for n in listed] == sorted(expected)
        assert {n.id: n.content for n in listed} == expected
        for node_id in IDS:
            node = self.repo.get(node_id)
            assert (node.content if node is not None else None) == expected.get(node_id)
        prefixed = [n.id for n in self.repo.nodes(prefix="c/")]
        assert prefixed == sorted(i for i in expected if i.startswith("c/"))

    @invariant()
    def refs_match(self):
        assert self.repo.head == self.head
        assert self.repo.branches() == sorted(self.branch_tips)
        for name, tip in self.branch_tips.items():
            assert self.repo.resolve(name).id == tip

    @invariant()
    def log_matches(self):
        tip = self.branch_tips.get(self.head)
        log = list(self.repo.log())
        expected = self.chain(tip)
        assert len(log) == len(expected)
        assert [c.id for c in log] == expected
        times = [c.record_time for c in log]
        assert all(a > b for a, b in itertools.pairwise(times))

    @invariant()
    def history_matches(self):
        tip = self.branch_tips.get(self.head)
        chain = self.chain(tip)
        for node_id in IDS:
            # the model's changes of this id along the chain, newest first
            changes = []
            for commit in chain:
                parent = self.parents[commit]
                old = self.snapshots[parent].get(node_id) if parent else None
                new = self.snapshots[commit].get(node_id)
                if old != new:
                    changes.append((commit, new))
            expected = []
            for i, (commit, value) in enumerate(changes):
                if value is None:
                    continue
                if i == 0:
                    status = "current"
                elif changes[i - 1][1] is None:
                    status = "deleted"
                else:
                    status = "superseded"
                expected.append((commit, value, status))
            got = [(v.commit.id, v.node.content, v.status) for v in self.repo.history(node_id)]
            assert got == expected
            current = [v for v in self.repo.history(node_id) if v.status == "current"]
            assert len(current) == (1 if node_id in self.tip_snapshot() else 0)
            assert [c.id for c in self.repo.log(node=node_id)] == [c for c, _ in changes]


class LmdbRepoMachine(RepoMachine):
    """The same machine over an LMDB store on disk."""

    def make_repo(self, clock):
        self.directory = tempfile.mkdtemp(prefix="mnemo-stateful-")
        return Repo.init(f"{self.directory}/store", clock=clock, sync=False)

    def teardown(self):
        super().teardown()
        shutil.rmtree(self.directory, ignore_errors=True)


SETTINGS = settings(max_examples=examples(30), stateful_step_count=30, deadline=None)

TestRepoInMemory = RepoMachine.TestCase
TestRepoInMemory.settings = SETTINGS
TestRepoOnLmdb = pytest.mark.slow(LmdbRepoMachine.TestCase)
TestRepoOnLmdb.settings = settings(max_examples=examples(15), stateful_step_count=30, deadline=None)

"""Erasure (``forget``), garbage collection (``gc``) and compaction, through the library.

The canary test is the one that matters most: a unique string written into
content, meta, provenance and a claim's subject, on two branches, must leave
every file of the store once it is forgotten and the store collected and
compacted, and no read may return it. The others pin the rules around it:
redaction records, fsck telling erased from missing and corrupt, version-only
erasure, expiry, grace periods, reflog expiry, and compaction's need for the
store to itself.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import pytest
from support.components import POSTGRES

from mnemosyne import (
    Claim,
    CorruptObject,
    ForgetReport,
    InvalidInput,
    Node,
    NotFound,
    Provenance,
    Redacted,
    Redaction,
    Repo,
)
from mnemosyne.model import codec
from mnemosyne.store.kv.base import Space, WriteTxn

SCOPE = b"\x00\x00\x00\x00"  # the default tenant's key scope
PENDING = b"gc-pending/"


class Clock:
    """An injected clock: one second per reading, and jumps on demand."""

    def __init__(self, start: datetime = datetime(2026, 6, 1, 9, tzinfo=UTC)) -> None:
        self.now = start

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now

    def advance(self, by: timedelta) -> None:
        self.now += by


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def repo(tmp_path: Path, clock: Clock) -> Iterator[Repo]:
    with Repo.init(tmp_path / "store", clock=clock) as opened:
        yield opened


def store_bytes(path: Path) -> dict[Path, bytes]:
    """Every file under the store directory, read whole."""
    return {file: file.read_bytes() for file in sorted(path.rglob("*")) if file.is_file()}


def files_holding(path: Path, needle: bytes) -> list[str]:
    return [file.name for file, data in store_bytes(path).items() if needle in data]


def delete_object(repo: Repo, hex_hash: str) -> None:
    """Delete a stored object behind the library's back (no redaction record)."""
    repo.kv.transact(lambda t: t.delete(Space.OBJECTS, SCOPE + bytes.fromhex(hex_hash)))


def stored(repo: Repo, hex_hash: str) -> bool:
    with repo.kv.read() as txn:
        return txn.get(Space.OBJECTS, SCOPE + bytes.fromhex(hex_hash)) is not None


def pending_keys(repo: Repo) -> list[bytes]:
    with repo.kv.read() as txn:
        return [key for key, _ in txn.scan(Space.META, PENDING)]


# -- the canary --------------------------------------------------------------------


@pytest.fixture(params=["lmdb", POSTGRES])
def canary_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> tuple[Path | str, Callable[[bytes], list[str]]]:
    """Where the canary test's store is, and which of its files hold some bytes.

    On PostgreSQL, the files are every file of the server's data directory: tables,
    indexes, TOAST, WAL (after checkpoints; the test server removes old segments
    instead of recycling them, see ADR 20), statistics.
    """
    if request.param == "lmdb":
        path = tmp_path / "store"
        return path, lambda needle: files_holding(path, needle)
    server = request.getfixturevalue("pg_server")
    return request.getfixturevalue("pg_url"), server.files_holding


def test_a_forgotten_canary_leaves_no_byte_in_any_file_and_no_read(
    canary_store: tuple[Path | str, Callable[[bytes], list[str]]], clock: Clock
) -> None:
    canary = f"canary-{uuid.uuid4().hex}"
    needle = canary.encode()
    path, holding = canary_store
    diary, claim_id, lang = "people/mira/diary", "people/mira/claims/secret", "people/mira/lang"
    subject = f"mira-{canary}"

    def claim(value: str, day: int) -> Node:
        return Node(
            id=claim_id,
            kind="claim",
            content=Claim(subject, "secret", value, datetime(2026, 5, day, tzinfo=UTC)),
        )

    with Repo.init(path, clock=clock) as repo:
        root = repo.commit([Node(id=lang, content="de")], message="start", author="agent")
        repo.commit(
            [Node(id=diary, content=f"dear diary, {canary} one"), claim(f"{canary} v1", 1)],
            message="learn",
            author="agent",
        )
        repo.commit(
            [
                Node(
                    id=diary,
                    content=f"dear diary,\n{canary} two",
                    provenance=Provenance(observation=f"obs {canary}"),
                    meta={"note": canary},
                )
            ],
            message="more",
            author="agent",
        )
        repo.branch("side")
        repo.switch("side")
        on_side = repo.commit(
            [Node(id=diary, content={"text": canary, "n": 3}), claim(f"{canary} v2", 2)],
            message="side",
            author="agent",
        )
        repo.switch("main")
        repo.commit([Node(id=diary, content=f"{canary} four")], message="main again", author="agent")
        subjects = [n.content.subject for n in repo.nodes(at="side") if isinstance(n.content, Claim)]
        assert subjects == [subject]
        assert len(repo.facts(subject, at="side")) == 1
        seen = holding(needle)  # the check can see the canary
        if isinstance(path, Path):
            assert seen == ["data.mdb"]
        else:  # a table file and the WAL, at least
            assert any(name.startswith("base/") for name in seen), seen

        forgot_diary = repo.forget(diary, "subject asked", author="dpo")
        forgot_claim = repo.forget(claim_id, "subject asked", author="dpo")
        erased = forgot_diary.redactions + forgot_claim.redactions
        assert len(erased) == 4 + 2  # every version of both ids, on both branches
        assert forgot_diary.already_erased == [] and forgot_claim.already_erased == []
        # main held both ids: each forget dropped its id there in a commit of its own.
        assert forgot_diary.commit is not None and forgot_claim.commit is not None
        assert forgot_claim.commit.parents == (forgot_diary.commit.id,)
        assert repo.resolve("main").id == forgot_claim.commit.id
        assert {r.author for r in erased} == {"dpo"} and {r.reason for r in erased} == {"subject asked"}
        report = repo.gc(grace=timedelta(0), compact=True)
        assert report.compacted and report.file_bytes_after is not None
        assert report.objects_removed > 0  # the claim-index chunks that keyed the subject

    assert holding(needle) == []

    with Repo.open(path, clock=clock) as repo:  # a fresh handle: nothing cached
        for branch in ("main", "side"):
            listed = [
                list(repo.nodes(at=branch, include_expired=True)),
                list(repo.log(at=branch)),
                repo.history(diary, at=branch),
                repo.history(claim_id, at=branch),
                repo.diff(root.id, branch),
                repo.facts(subject, at=branch),
                repo.timeline(subject, "secret", at=branch),
            ]
            assert canary not in repr(listed)
        assert repo.facts(subject, at="side") == [] and repo.timeline(subject, "secret", at="side") == []
        assert [n.id for n in repo.nodes()] == [lang]  # main dropped both ids in a commit
        assert [n.id for n in repo.nodes(at="side")] == [lang]  # erased versions are left out
        blamed = repo.blame(diary, at="side")
        assert (blamed.node, blamed.redacted, blamed.lines, blamed.commit.id) == (None, True, [], on_side.id)
        assert blamed.redaction is not None
        assert (blamed.redaction.author, blamed.redaction.reason) == ("dpo", "subject asked")
        assert canary not in repr(blamed)
        with pytest.raises(Redacted, match=r"erased at .* by dpo: subject asked") as raised:
            repo.get(diary, at="side")
        assert canary not in str(raised.value)
        with pytest.raises(Redacted, match="by dpo: subject asked"):
            repo.get(claim_id, at="side")
        statuses = [v.status for v in repo.history(diary, at="side")]
        assert statuses == ["redacted"] * 3
        assert repo.get(lang) == Node(id=lang, content="de")
        assert repo.fsck().ok
        # The records survive collection and compaction, and are append-only.
        again = repo.forget(diary, "again", author="someone-else")
        assert again.redactions == [] and again.commit is None
        by_hash = sorted(forgot_diary.redactions, key=lambda r: r.hash)
        assert sorted(again.already_erased, key=lambda r: r.hash) == by_hash  # the first records
        with pytest.raises(Redacted, match="by dpo: subject asked"):
            repo.get(diary, at="side")


# -- reads of erased versions --------------------------------------------------------


def test_history_diff_and_blame_show_erased_versions_as_redacted(repo: Repo) -> None:
    c1 = repo.commit([Node(id="n", content="one")], message="1")
    c2 = repo.commit([Node(id="n", content="two")], message="2")
    v1 = repo.get("n", at=c1.id)
    assert v1 is not None
    report = repo.forget("n", "wrong", author="dpo", version=v1.hash)
    (record,) = report.redactions
    assert (record.id, record.hash, record.author, record.reason) == ("n", v1.hash, "dpo", "wrong")
    assert report.already_erased == [] and report.commit is None  # not current: no commit
    versions = repo.history("n")
    assert [(v.status, v.node is None) for v in versions] == [("current", False), ("redacted", True)]
    assert versions[1].hash == v1.hash and versions[1].commit.id == c1.id
    assert versions[1].ended_by == c2.id
    assert versions[1].redaction == record and versions[0].redaction is None
    (change,) = repo.diff(c1.id, c2.id).modified
    assert (change.old, change.old_hash, change.redacted) == (None, v1.hash, True)
    assert change.new is not None and change.new.content == "two"
    assert repo.diff(c1.id, c2.id).added == []
    blamed = repo.blame("n")
    assert blamed.node is not None and not blamed.redacted and blamed.commit.id == c2.id
    blamed_old = repo.blame("n", at=c1.id)
    assert (blamed_old.node, blamed_old.redacted, blamed_old.commit.id) == (None, True, c1.id)
    assert blamed_old.redaction == record and blamed_old.hash == v1.hash
    assert [c.id for c in repo.log(node="n")] == [c2.id, c1.id]  # log still lists both


# -- fsck ----------------------------------------------------------------------------


def test_fsck_tells_erased_from_missing(repo: Repo) -> None:
    repo.commit([Node(id="keep", content="k"), Node(id="gone", content="g")], message="1")
    repo.branch("side")
    erased = repo.get("gone")
    lost = repo.get("keep")
    assert erased is not None and lost is not None
    repo.forget("gone", "asked", author="dpo")  # still named by side's tree
    report = repo.fsck()
    assert report.ok, report.problems
    delete_object(repo, lost.hash)  # deleted without a record: that is damage
    report = repo.fsck()
    assert not report.ok
    assert [(p.kind, p.object) for p in report.problems] == [("missing", lost.hash)]
    with pytest.raises(NotFound) as raised:
        repo.get("keep")
    assert not isinstance(raised.value, Redacted)
    with pytest.raises(Redacted):
        repo.get("gone", at="side")


def test_fsck_names_exactly_the_corrupt_objects_and_reads_refuse_them(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "store"
    with Repo.init(path, clock=clock) as repo:
        repo.commit([Node(id=f"n/{i}", content=f"value {i}") for i in range(40)], message="1")
        repo.commit([Node(id="n/0", content="value 0, again")], message="2")
        old = repo.get("n/0", at="HEAD~1")
        current = repo.get("n/7")
        assert old is not None and current is not None
        tree = repo.resolve("HEAD").tree
        chosen = {old.hash, current.hash, tree}

        def corrupt(txn: WriteTxn) -> None:
            for number, hex_hash in enumerate(sorted(chosen)):
                key = SCOPE + bytes.fromhex(hex_hash)
                data = txn.get(Space.OBJECTS, key)
                assert data is not None
                if number == 0:
                    bad = data[: len(data) // 2]  # cut short
                else:  # one flipped bit near the end
                    bad = data[:-3] + bytes([data[-3] ^ 0x20]) + data[-2:]
                txn.put(Space.OBJECTS, key, bad)

        repo.kv.transact(corrupt)
        report = repo.fsck()
        assert not report.ok
        assert {p.object for p in report.problems} == chosen
        assert {p.kind for p in report.problems} == {"corrupt"}
    with Repo.open(path, clock=clock) as fresh:  # no cached copy of the tree chunk
        with pytest.raises(CorruptObject, match=old.hash):
            fresh.get("n/0", at="HEAD~1")
        with pytest.raises(CorruptObject):
            fresh.get("n/7")  # through the corrupt tree chunk and the corrupt node
        with pytest.raises(CorruptObject, match=tree):
            list(fresh.nodes())


def test_fsck_reports_node_bytes_that_hash_right_but_break_the_node_rules(repo: Repo) -> None:
    repo.commit([Node(id="n/1", content="fine")], message="1")
    malformed = [
        ["node@1", "n//2", "empty id segment", "note", [None, None, None, None], None, None, None],
        ["node@1", "n/3", "provenance of the wrong shape", "claim", "agent", None, None, None],
    ]
    written = set()

    def plant(txn: WriteTxn) -> None:
        for fields in malformed:
            data = msgspec.msgpack.encode(fields)
            oid = codec.object_id(data)
            written.add(oid.hex())
            txn.put(Space.OBJECTS, SCOPE + oid, data)

    repo.kv.transact(plant)
    report = repo.fsck()
    assert {p.object for p in report.problems} == written
    assert {p.kind for p in report.problems} == {"corrupt"}


# -- forget's rules --------------------------------------------------------------------


def test_forget_one_version_erases_only_it_and_removes_the_id_only_when_current(repo: Repo) -> None:
    c1 = repo.commit([Node(id="n", content="one")], message="1")
    c2 = repo.commit([Node(id="n", content="two"), Node(id="other", content="o")], message="2")
    c3 = repo.commit([Node(id="n", content="three")], message="3")
    repo.branch("side")
    hashes = [v.hash for v in repo.history("n")]
    assert len(hashes) == 3
    report = repo.forget("n", "old one", version=hashes[2])
    (record,) = report.redactions
    assert record.hash == hashes[2]
    assert report.commit is None
    assert repo.resolve("HEAD").id == c3.id  # not current: no commit
    with pytest.raises(Redacted):
        repo.get("n", at=c1.id)
    assert repo.get("n", at=c2.id) == Node(id="n", content="two")
    assert repo.get("n") == Node(id="n", content="three")

    report = repo.forget("n", "current one", version=hashes[0][:6])  # a unique prefix
    (record,) = report.redactions
    assert record.hash == hashes[0]
    head = repo.resolve("HEAD")
    assert report.commit is not None and report.commit.id == head.id
    assert head.parents == (c3.id,) and head.message == "forget n: current one"
    assert repo.get("n") is None and repo.get("other") is not None
    with pytest.raises(Redacted):
        repo.get("n", at="side")  # other branches keep the hash
    assert repo.get("n", at=c2.id) == Node(id="n", content="two")
    assert [v.status for v in repo.history("n", at="side")] == ["redacted", "superseded", "redacted"]

    with pytest.raises(InvalidInput):
        repo.forget("n", "too short", version=hashes[1][:3])
    with pytest.raises(NotFound):
        repo.forget("n", "no such", version="ffff" if not hashes[1].startswith("ffff") else "eeee")
    with pytest.raises(NotFound):
        repo.forget("never/written", "nothing")
    with pytest.raises(InvalidInput):
        repo.forget("n", "  ")


def test_forgetting_twice_keeps_the_first_record(repo: Repo) -> None:
    repo.commit([Node(id="n", content="one")], message="1")
    repo.commit([Node(id="n", content="two")], message="2")
    old = repo.history("n")[1].hash
    (first,) = repo.forget("n", "first reason", author="alice", version=old).redactions
    rest = repo.forget("n", "second reason", author="bob")
    assert [r.reason for r in rest.redactions] == ["second reason"]  # only the version not yet erased
    assert rest.already_erased == [first]
    (second,) = rest.redactions
    third = repo.forget("n", "third reason", author="carol")
    assert third.redactions == [] and third.commit is None
    assert sorted(third.already_erased, key=_by_time) == [first, second]  # the first records stand
    fourth = repo.forget("n", "fourth reason", author="dave", version=old)
    assert fourth == ForgetReport(redactions=[], already_erased=[first], commit=None)
    with pytest.raises(Redacted, match="by alice: first reason"):
        repo.get("n", at="HEAD~2")
    with pytest.raises(Redacted, match="by bob: second reason"):
        repo.get("n", at="HEAD~1")
    assert first.time < second.time


def test_a_retried_write_of_an_erased_version_stores_none_of_its_bytes(repo: Repo) -> None:
    """A write that changes nothing is a no-op: it must not bring erased bytes back."""
    repo.commit([Node(id="n", content="secret")], message="1")
    repo.branch("side")
    (record,) = repo.forget("n", "asked to").redactions  # side still names the version
    retried = repo.commit([Node(id="n", content="secret")], branch="side", message="retry")
    assert not retried.created and retried.id == repo.resolve("side").id
    assert not stored(repo, record.hash)
    with pytest.raises(Redacted):
        repo.get("n", at="side")
    # Retried beside a new memory: the new one is stored, the erased one stays erased.
    batch = repo.commit([Node(id="n", content="secret"), Node(id="m", content="new")], branch="side")
    assert batch.created and repo.get("m", at="side") == Node(id="m", content="new")
    assert not stored(repo, record.hash)
    with pytest.raises(Redacted):
        repo.get("n", at="side")
    assert repo.fsck().problems == []
    # A write that does change the id's entry stores what it names, as any commit does.
    made = repo.commit([Node(id="n", content="secret"), Node(id="m", content="x")], message="again")
    assert made.created and repo.get("n") == Node(id="n", content="secret")
    assert repo.fsck().problems == []


def test_a_merge_with_an_erased_side_reports_the_conflict_with_its_hash(repo: Repo) -> None:
    repo.commit([Node(id="n", content={"a": 1}), Node(id="k", content=0)], message="base")
    repo.branch("side")
    repo.commit([Node(id="n", content={"a": 2})], message="ours")
    theirs = repo.commit([Node(id="n", content={"a": 3})], branch="side", message="theirs")
    hashes = {v.commit.id: v.hash for v in repo.history("n", at="side")}
    (record,) = repo.forget("n", "asked to", version=hashes[theirs.id]).redactions
    result = repo.merge("side")
    assert result.commit is None
    (conflict,) = result.conflicts
    assert (conflict.id, conflict.kind, conflict.erased) == ("n", "edit/edit", ("theirs",))
    assert conflict.theirs is None and conflict.theirs_hash == record.hash
    assert conflict.ours == Node(id="n", content={"a": 2}) and conflict.ours_hash == repo.get("n").hash
    assert conflict.base is not None and conflict.base_hash == conflict.base.hash
    merged = repo.merge("side", resolutions={"n": "ours"})
    assert merged.commit is not None and repo.get("n") == Node(id="n", content={"a": 2})
    assert not stored(repo, record.hash)


def _by_time(record: Redaction) -> tuple[object, str]:
    return (record.time, record.hash)


def test_forget_expired_erases_only_versions_past_their_expiry(repo: Repo, clock: Clock) -> None:
    soon = clock.now + timedelta(hours=1)
    later = clock.now + timedelta(days=30)
    repo.commit(
        [
            Node(id="short", content="s1", expires_at=soon),
            Node(id="long", content="l1", expires_at=later),
            Node(id="forever", content="f1"),
            Node(id="renewed", content="r1", expires_at=soon),
        ],
        message="1",
    )
    repo.commit([Node(id="renewed", content="r2", expires_at=later)], message="2")
    short_hash = repo.get("short")
    renewed_old = repo.history("renewed")[1].hash
    assert short_hash is not None
    assert repo.forget_expired() == ForgetReport(redactions=[])  # nothing has expired yet
    clock.advance(timedelta(hours=2))
    head = repo.resolve("HEAD").id
    report = repo.forget_expired(author="retention")
    records = report.redactions
    assert report.already_erased == []
    assert sorted((r.id, r.hash) for r in records) == sorted(
        [("short", short_hash.hash), ("renewed", renewed_old)]
    )
    assert {(r.reason, r.author) for r in records} == {("expired", "retention")}
    after = repo.resolve("HEAD")
    assert after.parents == (head,)  # "short" was current: removed in a commit
    assert report.commit is not None and report.commit.id == after.id
    assert repo.get("short", include_expired=True) is None
    assert [n.id for n in repo.nodes()] == ["forever", "long", "renewed"]
    assert repo.get("renewed") == Node(id="renewed", content="r2", expires_at=later)
    with pytest.raises(Redacted, match="by retention: expired"):
        repo.get("renewed", at="HEAD~2")
    assert repo.forget_expired() == ForgetReport(redactions=[])  # erased versions are not found again
    assert repo.fsck().ok


# -- gc ----------------------------------------------------------------------------------


def _orphans_after_reset(repo: Repo, clock: Clock) -> tuple[list[str], list[str]]:
    """Commit c1..c3, reset to c1, commit c4; return (orphaned commit ids, orphaned node hashes)."""
    c1 = repo.commit([Node(id="a", content="a")], message="1")
    c2 = repo.commit([Node(id="b", content="only in c2 and c3")], message="2")
    c3 = repo.commit([Node(id="c", content="only in c3")], message="3")
    b, c = repo.get("b"), repo.get("c")
    assert b is not None and c is not None
    repo.reset("main", c1.id)
    repo.commit([Node(id="d", content="d")], message="4")
    return [c2.id, c3.id], [b.hash, c.hash]


def test_gc_after_reset_removes_orphans_only_once_the_reflog_forgets_them(repo: Repo, clock: Clock) -> None:
    commits, nodes = _orphans_after_reset(repo, clock)
    c3_time = repo.resolve(commits[1]).record_time
    first = repo.gc(grace=timedelta(0))
    assert (first.objects_removed, first.pending, first.reflog_entries_removed) == (0, 0, 0)
    assert repo.get("c", as_of=c3_time) == Node(id="c", content="only in c3")  # the reflog reaches c3

    clock.advance(timedelta(days=1))
    report = repo.gc(grace=timedelta(0), expire_reflog=timedelta(hours=1))
    assert report.reflog_entries_removed == 4  # of 5 entries; the newest stays
    assert report.commits_removed == 2
    assert report.objects_removed >= 2 + 2 + 2  # commits, nodes, tree chunks
    assert report.bytes_removed > 0 and report.pending == 0
    for hex_hash in commits + nodes:
        assert not stored(repo, hex_hash)
    with pytest.raises(NotFound):
        repo.resolve(commits[1])
    with pytest.raises(NotFound):
        repo.get("c", as_of=c3_time)  # before the horizon
    assert [n.id for n in repo.nodes()] == ["a", "d"]
    assert [c.message for c in repo.log()] == ["4", "1"]
    assert repo.fsck().ok
    assert repo.gc(grace=timedelta(0)).objects_removed == 0


def test_gc_grace_period_keeps_unreachable_objects_until_it_has_passed(repo: Repo, clock: Clock) -> None:
    commits, nodes = _orphans_after_reset(repo, clock)
    clock.advance(timedelta(days=1))
    first = repo.gc(expire_reflog=timedelta(hours=1))  # default grace: 14 days
    assert first.objects_removed == 0 and first.pending >= 6
    assert len(pending_keys(repo)) == first.pending
    assert all(stored(repo, h) for h in commits + nodes)
    assert repo.get("c", at=commits[1]) == Node(id="c", content="only in c3")

    clock.advance(timedelta(days=13))
    again = repo.gc()
    assert (again.objects_removed, again.pending) == (0, first.pending)  # the clock started at the first gc

    clock.advance(timedelta(days=1, seconds=10))
    done = repo.gc()
    assert (done.objects_removed, done.pending, done.commits_removed) == (first.pending, 0, 2)
    assert not any(stored(repo, h) for h in commits + nodes)
    assert pending_keys(repo) == []
    assert repo.fsck().ok


def test_objects_reachable_again_leave_the_pending_list(repo: Repo, clock: Clock) -> None:
    commits, nodes = _orphans_after_reset(repo, clock)
    clock.advance(timedelta(days=1))
    first = repo.gc(expire_reflog=timedelta(hours=1))
    assert first.pending > 0 and len(pending_keys(repo)) == first.pending

    repo.reset("main", commits[1])  # c3 is reachable again
    back = repo.gc()
    assert (back.pending, back.objects_removed) == (0, 0)
    assert pending_keys(repo) == []
    assert repo.get("c") == Node(id="c", content="only in c3")

    # Unreachable again much later: the grace period starts over, not from the first gc.
    repo.commit([Node(id="e", content="e")], message="5")
    repo.reset("main", "HEAD~3")  # back to c1
    repo.commit([Node(id="f", content="f")], message="6")
    clock.advance(timedelta(days=20))
    later = repo.gc(expire_reflog=timedelta(hours=1))
    assert later.objects_removed == 0 and later.pending > 0
    assert all(stored(repo, h) for h in commits + nodes)


def test_expire_reflog_prunes_old_entries_and_as_of_reads_before_them(repo: Repo, clock: Clock) -> None:
    c1 = repo.commit([Node(id="n", content="one")], message="1")
    c2 = repo.commit([Node(id="n", content="two")], message="2")
    clock.advance(timedelta(days=10))
    c3 = repo.commit([Node(id="n", content="three")], message="3")
    assert repo.get("n", as_of=c1.record_time) == Node(id="n", content="one")
    report = repo.gc(expire_reflog=timedelta(days=5))
    assert report.reflog_entries_removed == 2
    assert report.objects_removed == 0  # c1 and c2 are ancestors of c3
    for moment in (c1.record_time, c2.record_time):
        with pytest.raises(NotFound):
            repo.get("n", as_of=moment)
    assert repo.get("n", as_of=c3.record_time) == Node(id="n", content="three")
    assert repo.get("n") == Node(id="n", content="three")
    assert repo.get("n", at=c1.id) == Node(id="n", content="one")
    assert [c.id for c in repo.log()] == [c3.id, c2.id, c1.id]
    assert repo.gc(expire_reflog=timedelta(days=5)).reflog_entries_removed == 0


def test_gc_never_removes_reachable_objects(repo: Repo, clock: Clock) -> None:
    def claim(node_id: str, value: str, day: int) -> Node:
        return Node(
            id=node_id,
            kind="claim",
            content=Claim("mira", "city", value, datetime(2026, 5, day, tzinfo=UTC)),
        )

    repo.commit([Node(id="a", content="a1"), claim("claims/1", "Berlin", 1)], message="1")
    repo.branch("side")
    repo.commit([Node(id="a", content="a2"), claim("claims/2", "Paris", 3)], message="2")
    repo.switch("side")
    repo.commit([Node(id="b", content={"k": 1}), claim("claims/3", "Rome", 3)], message="side")
    repo.switch("main")
    merged = repo.merge("side", strategy="ours")
    assert merged.commit is not None and merged.contradictions
    repo.branch("gone")
    repo.switch("gone")
    on_gone = repo.commit([Node(id="g", content="only on a deleted branch")], message="g")
    repo.switch("main")
    repo.delete_branch("gone")
    repo.commit([], ["a"], message="rm a")
    repo.forget("b", "asked", author="dpo", version=repo.history("b")[0].hash)
    before = {
        branch: (list(repo.nodes(at=branch, include_expired=True)), repo.facts("mira", at=branch))
        for branch in repo.branches()
    }
    contradictions = repo.contradictions()
    assert before["main"][1] and contradictions

    clock.advance(timedelta(days=30))
    report = repo.gc(grace=timedelta(0), expire_reflog=timedelta(0))
    assert report.reflog_entries_removed > 0
    assert repo.fsck().ok
    for branch, (nodes, facts) in before.items():
        assert list(repo.nodes(at=branch, include_expired=True)) == nodes
        assert repo.facts("mira", at=branch) == facts
        for commit in repo.log(at=branch):
            for node in repo.nodes(at=commit.id, include_expired=True):
                assert repo.get(node.id, at=commit.id) == node
            for name in ("a", "b", "claims/1", "claims/2", "claims/3", "g"):
                for version in repo.history(name, at=commit.id):
                    if version.status != "redacted":
                        assert version.node is not None and version.node.id == name
    assert repo.timeline("mira", "city")
    assert repo.contradictions() == contradictions
    # A deleted branch is reached only through its reflog: once only the deletion
    # entry (which points nowhere) is retained, its own commit goes.
    assert not stored(repo, on_gone.id)
    with pytest.raises(NotFound):
        repo.get("g", at=on_gone.id)


# -- compaction needs the store to itself ----------------------------------------------


HOLDER = """
import sys, time
from mnemosyne import Repo
repo = Repo.open(sys.argv[1])
print("open", flush=True)
time.sleep(60)
"""


def test_compaction_is_refused_while_another_process_has_the_store_open(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with Repo.init(path) as repo:
        repo.commit([Node(id="n", content="v")], message="1")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        with Repo.open(path) as repo:
            with pytest.raises(InvalidInput, match="another process has it open"):
                repo.gc(grace=timedelta(0), compact=True)
            report = repo.gc(grace=timedelta(0))  # collecting alone is fine
            assert not report.compacted
            assert repo.get("n") == Node(id="n", content="v")
    finally:
        holder.terminate()
        holder.wait(timeout=10)
    with Repo.open(path) as repo:
        report = repo.gc(grace=timedelta(0), compact=True)
        assert report.compacted and report.file_bytes_after is not None
        assert repo.get("n") == Node(id="n", content="v")
        assert repo.fsck().ok


def test_compaction_is_refused_while_this_process_has_two_handles(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with Repo.init(path) as first:
        first.commit([Node(id="n", content="v")], message="1")
        with Repo.open(path) as second:
            with pytest.raises(InvalidInput, match="open more than once"):
                first.gc(compact=True)
            assert second.get("n") == Node(id="n", content="v")
        report = first.gc(compact=True)
        assert report.compacted
        assert report.file_bytes_before is not None and report.file_bytes_after is not None
        assert report.file_bytes_after <= report.file_bytes_before
        assert first.get("n") == Node(id="n", content="v")
        first.commit([Node(id="m", content="after")], message="2")  # still writable
        assert [n.id for n in first.nodes()] == ["m", "n"]


# -- compaction leaves no erased byte --------------------------------------------------


@pytest.mark.slow
def test_compaction_leaves_no_erased_canary_in_page_tails_overflow_pages_or_index_keys(
    tmp_path: Path, clock: Clock
) -> None:
    """Many canaries of every size: small values, values on overflow pages, words that key postings.

    LMDB reuses page buffers without zeroing them and its compacting copy copies
    live pages whole, so erased bytes could survive in the unused tail of a live
    page, or in a branch page's separator key. Compaction must leave none.
    """
    import random

    rng = random.Random(3)
    path = tmp_path / "store"
    erased: dict[str, list[str]] = {"small": [], "overflow": [], "word": []}
    kept: dict[str, list[str]] = {"small": [], "overflow": [], "word": []}
    with Repo.init(path, clock=clock) as repo:
        for k in range(240):
            canary = f"zqcanary{k:04d}x{rng.getrandbits(32):08x}"
            shape = ("small", "overflow", "word")[k % 3]
            if shape == "small":
                content = f"secret {canary}"
            elif shape == "overflow":  # far larger than a page: stored on overflow pages
                content = f"{'filler ' * 700}{canary} {'tail ' * 300}"
            else:  # a word of its own: a posting key once indexed
                content = f"{canary} appears here alone"
            repo.commit([Node(id=f"s/{k}", content=content), Node(id=f"n/{k}", content=f"note {k}")])
            (erased if k % 2 == 0 else kept)[shape].append(canary)
        assert repo.search("appears here alone", k=1)  # indexes everything: postings keyed by each word
        for k in range(0, 240, 2):
            repo.forget(f"s/{k}", "test")
        repo.gc(grace=timedelta(0), compact=True)
    blob = (path / "data.mdb").read_bytes()
    for shape in erased:
        # Live canaries of the same shape are all there: the search for bytes can find them.
        assert all(c.encode() in blob for c in kept[shape]), shape
        assert [c for c in erased[shape] if c.encode() in blob] == [], shape

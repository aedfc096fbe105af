"""Recall: search only ever returns the version current in the snapshot read.

The state machine drives a Repo (in memory, and once on LMDB) through commits,
new versions, deletes, expiry, erasure, branches, resets and rebuilds, against a
plain model of snapshots; after every step it searches in every mode, with and
without a namespace, at HEAD, at older commits and as of earlier record times,
and checks each hit against the model. It also checks that the side indexes
hold nothing of erased versions (no key, value, posting or vector row) and
exactly one vector per surviving content; postings segments are made tiny there
so that versions spread over many. The other tests pin exactness, tenants, the
read log, read-only handles, context budgets, rebuilds (an incremental index
ranks as a rebuilt one), embedder changes, older index layouts, the handle's
memory of names, and the cost of a commit.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from support.internals import vector_cache
from support.tiers import examples

from mnemosyne import Claim, InvalidInput, Node, NotFound, Repo
from mnemosyne.index.recall_queue import RecallQueue
from mnemosyne.index.view import Stores, View
from mnemosyne.recall import names, postings, semantic
from mnemosyne.recall import text as text_module
from mnemosyne.recall.embedders import HashEmbedder
from mnemosyne.recall.postings import Postings
from mnemosyne.recall.search import count_under
from mnemosyne.recall.text import content_hash, document_words, query_words, text_of, words
from mnemosyne.recall.vectors import VectorStore
from mnemosyne.store.kv.base import Space

SCOPE = b"\x00\x00\x00\x00"  # the default tenant's key scope
TICK = timedelta(seconds=1)
VOCAB = ["apple", "river", "stone", "cloud", "ember", "maple", "frost", "quill"]
IDS = ["a/1", "a/2", "a/b/3", "b/1", "b/2", "c"]
PREFIXES = [None, "a/", "b/", "a/b/"]
BRANCHES = ["main", "dev", "exp"]
QUERIES = ["apple", "river stone", "cloud", "ember maple frost", "quill apple", "zebra", "stone zebra"]


class Clock:
    """One second per reading; ``now`` is the last reading."""

    def __init__(self, start: datetime = datetime(2026, 6, 1, 9, tzinfo=UTC)) -> None:
        self.now = start

    def __call__(self) -> datetime:
        self.now += TICK
        return self.now


def cosine(embedder: HashEmbedder, query: str, text: str) -> float:
    a, b = embedder([query, text]).astype(np.float64)
    return float(a @ b)


def queued(repo: Repo, scope: bytes = SCOPE) -> list[bytes]:
    with repo.kv.read() as txn:
        return RecallQueue(scope).queued(txn)


def recall_keys(repo: Repo, scope: bytes = SCOPE) -> list[bytes]:
    with repo.kv.read() as txn:
        return [key for key, _ in txn.scan(Space.RECALL, scope)]


def vector_hashes(repo: Repo, model: str, scope: bytes = SCOPE) -> set[bytes]:
    """Content hashes that have a stored vector under ``model``."""
    prefix = scope + model.encode() + b"\x00"
    with repo.kv.read() as txn:
        return {key[len(prefix) :] for key, _ in txn.scan(Space.VECTORS, prefix)}


def dump(repo: Repo) -> dict[tuple[str, bytes], bytes]:
    """Every key and value of every keyspace."""
    with repo.kv.read() as txn:
        return {(space.value, key): value for space in Space for key, value in txn.scan(space, b"")}


def summary(hits: list) -> list[tuple[str, str, int | None, int | None]]:
    return [(h.id, h.hash, h.lexical_rank, h.semantic_rank) for h in hits]


@contextmanager
def segments_of(size: int) -> Iterator[None]:
    """Postings segments of ``size`` documents (the default is far more than a test writes)."""
    before = postings.SEGMENT
    postings.SEGMENT = size
    try:
        yield
    finally:
        postings.SEGMENT = before


def side_items(repo: Repo, space: Space, scope: bytes = SCOPE) -> list[tuple[bytes, bytes]]:
    with repo.kv.read() as txn:
        return list(txn.scan(space, scope))


def posted_numbers(repo: Repo, scope: bytes = SCOPE) -> set[int]:
    """Every document number a postings segment names."""
    found: set[int] = set()
    for key, value in side_items(repo, Space.RECALL, scope):
        if key.startswith(scope + b"t"):
            found.update(np.frombuffer(value, dtype="<u4")[::3].tolist())
    return found


def numbered_versions(repo: Repo, scope: bytes = SCOPE) -> dict[int, bytes]:
    """Document number → node hash, from the number records."""
    prefix = scope + b"r"
    return {
        int.from_bytes(key[len(prefix) :], "big"): value[:32]
        for key, value in side_items(repo, Space.RECALL, scope)
        if key.startswith(prefix)
    }


def block_hashes(repo: Repo, model: str, scope: bytes = SCOPE) -> list[bytes]:
    """The content hashes of every live row of the model's vector blocks."""
    with repo.kv.read() as txn:
        return list(VectorStore(scope).block_hashes(txn, model))


# -- the property: every hit is the version current in the snapshot read --------------


class RecallMachine(RuleBasedStateMachine):
    """Random histories against a model of snapshots; searches checked after each step."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = Clock()
        self.segments = segments_of(3)  # versions spread over many segments
        self.segments.__enter__()
        self.repo = self.make_repo(self.clock)
        self.repo.use_embedder("hash")
        self.embedder = HashEmbedder(64)
        self.snaps: dict[str, dict[str, Node]] = {}  # commit id -> {id: node}
        self.tips: dict[str, str] = {}  # branch -> commit id
        self.head = "main"
        self.nodes: dict[str, Node] = {}  # every version ever committed, by hash
        self.versions: dict[str, list[str]] = {}  # id -> hashes, oldest first
        self.erased: set[str] = set()
        self.checkpoints: list[tuple[datetime, dict[str, str]]] = []  # after each step
        self.steps = 0
        self.runs = 0

    def make_repo(self, clock: Clock) -> Repo:
        return Repo.in_memory(clock=clock)

    def teardown(self) -> None:
        self.segments.__exit__(None, None, None)
        self.repo.close()

    # -- model ---------------------------------------------------------------------

    def tip_snapshot(self) -> dict[str, Node]:
        tip = self.tips.get(self.head)
        return dict(self.snaps[tip]) if tip is not None else {}

    def record(self, commit_id: str, snapshot: dict[str, Node]) -> None:
        self.snaps[commit_id] = snapshot
        self.tips[self.head] = commit_id

    def checkpoint(self) -> None:
        self.checkpoints.append((self.clock.now, dict(self.tips)))

    def expiry(self, choice: str | None) -> datetime | None:
        offsets = {
            "past": -timedelta(days=1),
            "soon": timedelta(seconds=2.5),
            "later": timedelta(seconds=7.5),
            "far": timedelta(days=365),
        }
        return None if choice is None else self.clock.now + offsets[choice]

    # -- rules ---------------------------------------------------------------------

    @initialize()
    def start(self) -> None:
        self.checkpoint()

    @rule(
        data=st.data(),
        texts=st.lists(st.lists(st.sampled_from(VOCAB), max_size=4), min_size=1, max_size=3),
    )
    def commit(self, data: st.DataObject, texts: list[list[str]]) -> None:
        """New ids and new versions of present ones, sometimes with deletes."""
        current = self.tip_snapshot()
        ids = data.draw(st.lists(st.sampled_from(IDS), min_size=len(texts), max_size=len(texts), unique=True))
        puts = []
        for node_id, text in zip(ids, texts, strict=True):
            choice = data.draw(st.sampled_from([None, None, None, "past", "soon", "later", "far"]))
            body = " ".join(text)
            content = body if data.draw(st.booleans()) else {"text": body, "n": len(text)}
            puts.append(Node(id=node_id, content=content, expires_at=self.expiry(choice)))
        removable = sorted(set(current) - set(ids))
        deletes = (
            data.draw(st.lists(st.sampled_from(removable), unique=True, max_size=2)) if removable else []
        )
        self.write(current, puts, deletes)

    @precondition(lambda self: bool(self.tip_snapshot()))
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        current = self.tip_snapshot()
        gone = data.draw(st.sampled_from(sorted(current)))
        self.write(current, [], [gone])

    @precondition(lambda self: bool(self.tip_snapshot()))
    @rule(data=st.data(), words_=st.lists(st.sampled_from(VOCAB), min_size=1, max_size=3))
    def supersede(self, data: st.DataObject, words_: list[str]) -> None:
        """A new version of a present id: the old one must never come back."""
        current = self.tip_snapshot()
        node_id = data.draw(st.sampled_from(sorted(current)))
        self.write(current, [Node(id=node_id, content=" ".join(words_))], [])

    @precondition(lambda self: bool(self.tip_snapshot()))
    @rule(data=st.data(), by=st.sampled_from([timedelta(days=1), timedelta(microseconds=1)]))
    def expire(self, data: st.DataObject, by: timedelta) -> None:
        """A new version whose expires_at is already in the past of the clock."""
        current = self.tip_snapshot()
        node = current[data.draw(st.sampled_from(sorted(current)))]
        self.write(current, [Node(id=node.id, content=node.content, expires_at=self.clock.now - by)], [])

    def write(self, current: dict[str, Node], puts: list[Node], deletes: list[str]) -> None:
        if any(node.hash in self.erased for node in puts):
            # Writing an erased version's exact bytes again stores them again: the
            # model would have to forget the erasure (tested on its own below).
            return
        after = dict(current)
        for node in puts:
            after[node.id] = node
        for gone in deletes:
            del after[gone]
        changed = {k: n.hash for k, n in after.items()} != {k: n.hash for k, n in current.items()}
        commit = self.repo.commit(puts, deletes, message="step", author="machine")
        assert commit.created is changed, "a commit is recorded exactly when the snapshot changes"
        if not changed:
            return
        for node in puts:
            if node.hash not in self.nodes:
                self.nodes[node.hash] = node
                self.versions.setdefault(node.id, []).append(node.hash)
        self.record(commit.id, after)

    @precondition(lambda self: any(set(v) - self.erased for v in self.versions.values()))
    @rule(data=st.data())
    def forget(self, data: st.DataObject) -> None:
        """Erase one version of an id, or every version."""
        candidates = sorted(i for i, v in self.versions.items() if set(v) - self.erased)
        node_id = data.draw(st.sampled_from(candidates))
        one = data.draw(st.none() | st.sampled_from(self.versions[node_id]))
        chosen = {one} if one is not None else set(self.versions[node_id])
        current = self.tip_snapshot()
        before = self.tips.get(self.head)
        records = self.repo.forget(node_id, reason="asked", author="machine", version=one).redactions
        assert {r.hash for r in records} == chosen - self.erased
        self.erased |= chosen
        tip = self.repo.resolve("HEAD").id if before is not None else None
        if node_id in current and current[node_id].hash in chosen:
            assert tip != before, "the current branch still holds an erased version"
            del current[node_id]
            self.record(tip, current)
        else:
            assert tip == before

    @precondition(lambda self: self.head in self.tips and len(self.tips) < len(BRANCHES))
    @rule(data=st.data())
    def branch(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from([b for b in BRANCHES if b not in self.tips]))
        self.repo.branch(name, author="machine")
        self.tips[name] = self.tips[self.head]

    @precondition(lambda self: len(self.tips) > 1)
    @rule(data=st.data())
    def switch(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(b for b in self.tips if b != self.head)))
        self.repo.switch(name)
        self.head = name

    @precondition(lambda self: bool(self.tips))
    @rule(data=st.data())
    def reset(self, data: st.DataObject) -> None:
        branch = data.draw(st.sampled_from(sorted(self.tips)))
        target = data.draw(st.sampled_from(sorted(self.snaps)))
        self.repo.reset(branch, target, author="machine")
        self.tips[branch] = target

    @precondition(lambda self: bool(self.snaps) and self.steps % 3 == 0)
    @rule(how=st.sampled_from(["recall", "recall+vectors", "all"]))
    def rebuild(self, how: str) -> None:
        if how == "all":
            self.repo.reindex()
        else:
            self.repo.reindex_recall(vectors=how == "recall+vectors")

    # -- checks --------------------------------------------------------------------

    def check_hits(
        self,
        hits: list,
        snapshot: dict[str, Node],
        prefix: str | None,
        dead_at: datetime,
        where: str,
    ) -> None:
        """Each hit is the snapshot's version of its id, alive, not erased, in the prefix."""
        assert len({h.id for h in hits}) == len(hits), f"{where}: an id twice"
        for hit in hits:
            node = snapshot.get(hit.id)
            assert node is not None, f"{where}: {hit.id} is not in the snapshot"
            assert hit.hash == node.hash, f"{where}: {hit.id} is not the snapshot's version"
            assert hit.node.hash == hit.hash and hit.node.id == hit.id
            assert hit.hash not in self.erased, f"{where}: {hit.id} was erased"
            assert node.expires_at is None or node.expires_at > dead_at, f"{where}: {hit.id} expired"
            assert prefix is None or hit.id.startswith(prefix), f"{where}: {hit.id} outside {prefix}"

    def alive(self, snapshot: dict[str, Node], prefix: str | None, when: datetime) -> dict[str, Node]:
        return {
            k: n
            for k, n in snapshot.items()
            if n.hash not in self.erased
            and (prefix is None or k.startswith(prefix))
            and (n.expires_at is None or n.expires_at > when)
        }

    def check_complete(
        self,
        hits: list,
        snapshot: dict[str, Node],
        prefix: str | None,
        lo: datetime,
        hi: datetime,
        query: str,
        mode: str,
        where: str,
    ) -> None:
        """With k large, every alive match is found: lexical by words, semantic all."""
        terms = set(words(query))

        def matches(node: Node) -> bool:
            return mode != "lexical" or bool(terms & set(document_words(node)))

        surely = {k for k, n in self.alive(snapshot, prefix, hi).items() if matches(n)}
        maybe = {k for k, n in self.alive(snapshot, prefix, lo).items() if matches(n)}
        found = {h.id for h in hits}
        assert surely <= found, f"{where}: {mode} missed {sorted(surely - found)}"
        assert found <= maybe, f"{where}: {mode} returned non-matches {sorted(found - maybe)}"

    def searched(self, query: str, **kwargs: object) -> tuple[list, datetime, datetime]:
        """Search; return the hits and the bounds of the time expiry was judged at."""
        before = self.clock.now
        hits = self.repo.search(query, **kwargs)  # type: ignore[arg-type]
        return hits, before + TICK, self.clock.now

    @invariant()
    def searches_return_only_current_versions(self) -> None:
        self.steps += 1
        self.checkpoint()
        rng = random.Random(self.steps)
        head_tip = self.tips.get(self.head)
        snapshot = self.tip_snapshot()
        query = rng.choice(QUERIES)
        prefix = rng.choice(PREFIXES)

        # At HEAD, every mode, k large: valid and complete.
        for mode in ("lexical", "semantic", "hybrid"):
            hits, lo, hi = self.searched(query, k=50, prefix=prefix, mode=mode)
            self.check_hits(hits, snapshot, prefix, lo, f"HEAD {mode} {query!r} {prefix}")
            self.check_complete(hits, snapshot, prefix, lo, hi, query, mode, f"HEAD {mode}")
            for hit in hits:
                assert self.repo.get(hit.id, include_expired=True).hash == hit.hash

        # Small k, judged at one fixed time (as_of the latest step): the top of the ranking.
        when = self.checkpoints[-1][0]
        if head_tip is not None:
            full = self.repo.search(query, k=50, as_of=when, prefix=prefix, mode="lexical")
            top = self.repo.search(query, k=2, as_of=when, prefix=prefix, mode="lexical")
            assert summary(top) == summary(full)[:2]
            top = self.repo.search(query, k=2, as_of=when, prefix=prefix, mode="semantic")
            self.check_hits(top, snapshot, prefix, when, "semantic k=2")
            alive = self.alive(snapshot, prefix, when)
            best = sorted((cosine(self.embedder, query, text_of(n)) for n in alive.values()), reverse=True)
            got = sorted((cosine(self.embedder, query, text_of(h.node)) for h in top), reverse=True)
            assert got == pytest.approx(best[:2], abs=1e-5), (
                "semantic top-k is not the best of the filtered set"
            )
            hybrid = self.repo.search(query, k=2, as_of=when, prefix=prefix)
            self.check_hits(hybrid, snapshot, prefix, when, "hybrid k=2")
            assert len(hybrid) == min(2, len(alive))

        # At an older commit (any branch), hybrid: valid and complete.
        if self.snaps:
            old = rng.choice(sorted(self.snaps))
            hits, lo, hi = self.searched(query, k=50, at=old, prefix=prefix)
            self.check_hits(hits, self.snaps[old], prefix, lo, f"at {old[:7]}")
            self.check_complete(hits, self.snaps[old], prefix, lo, hi, query, "hybrid", "at")

        # As of an earlier step's record time: HEAD's branch as its reflog says.
        then, tips = rng.choice(self.checkpoints)
        tip = tips.get(self.head)
        if tip is None:
            with pytest.raises(NotFound):
                self.repo.search(query, as_of=then)
        else:
            mode = rng.choice(["lexical", "semantic", "hybrid"])
            hits = self.repo.search(query, k=50, as_of=then, prefix=prefix, mode=mode)
            self.check_hits(hits, self.snaps[tip], prefix, then, f"as_of {then}")
            self.check_complete(hits, self.snaps[tip], prefix, then, then, query, mode, "as_of")

        # The read log records what a search returned.
        self.runs += 1
        run = f"run-{self.runs % 3}"
        before = len(self.repo.reads(run))
        hits = self.repo.search(query, k=3, prefix=prefix, run_id=run)
        records = self.repo.reads(run)
        if head_tip is None:
            assert len(records) == before  # nothing to search on an unborn branch: nothing recorded
        else:
            assert len(records) == before + 1
            assert (records[-1].kind, records[-1].query) == ("search", query)
            assert records[-1].hashes == [h.hash for h in hits]
            assert records[-1].ids == [h.id for h in hits]
        self.check_side_indexes()

    def check_side_indexes(self) -> None:
        """Nothing of an erased version in postings or reads; one vector per surviving content."""
        keys = recall_keys(self.repo)
        items = side_items(self.repo, Space.RECALL) + side_items(self.repo, Space.VECTORS)
        for oid in self.erased:
            raw = bytes.fromhex(oid)
            assert not any(raw in key for key in keys), f"a recall key still names erased {oid[:12]}"
            assert not any(raw in value for _, value in items), f"a value still names erased {oid[:12]}"
        # Every posting names a numbered document, and every number a surviving version.
        numbered = numbered_versions(self.repo)
        assert posted_numbers(self.repo) <= set(numbered)
        assert {oid.hex() for oid in numbered.values()} <= set(self.nodes) - self.erased
        for run in ("run-0", "run-1", "run-2"):
            for record in self.repo.reads(run):
                assert not self.erased & set(record.hashes)
        surviving = {h: n for h, n in self.nodes.items() if h not in self.erased}
        # The searches above caught the indexes up: one document per surviving
        # version, one vector per surviving content, nothing else.
        documents = {key[len(SCOPE) + 1 :].hex() for key in keys if key.startswith(SCOPE + b"d")}
        assert documents == set(surviving)
        contents = {content_hash(n) for n in surviving.values()}
        assert vector_hashes(self.repo, "hash-64") == contents
        rows = block_hashes(self.repo, "hash-64")
        assert sorted(rows) == sorted(contents), "a vector row of an erased content is left"


RecallMachine.TestCase.settings = settings(
    max_examples=examples(60),
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestRecallInMemory = RecallMachine.TestCase


class ApproximateRecallMachine(RecallMachine):
    """The same machine, every semantic ranking through the approximate index.

    On LMDB, so the index is saved beside the store: a reopened handle maps it
    and catches up from the change log, and compaction rewrites it without the
    rows erasure or collection dropped.
    """

    def make_repo(self, clock: Clock) -> Repo:
        self.tmp = Path(tempfile.mkdtemp(prefix="mnemo-recall-approx-"))
        repo = Repo.init(self.tmp / "store", clock=clock, sync=False)
        repo.config("recall.approximate_from", "1")
        return repo

    def teardown(self) -> None:
        super().teardown()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @rule()
    def reopen(self) -> None:
        """A new handle: it maps the saved index (if any) and catches up from the log."""
        self.repo.close()
        self.repo = Repo.open(self.tmp / "store", clock=self.clock)
        self.repo.use_embedder("hash")

    @precondition(lambda self: bool(self.erased))
    @rule()
    def compact(self) -> None:
        """Collect and compact: no index file keeps the content hash of an erased content."""
        self.repo.gc(grace=timedelta(0), compact=True)
        surviving = {content_hash(n) for h, n in self.nodes.items() if h not in self.erased}
        gone = {content_hash(self.nodes[h]) for h in self.erased} - surviving
        index = self.tmp / "store" / "recall-index"
        for path in index.iterdir() if index.exists() else []:
            data = path.read_bytes()
            assert not any(chash in data for chash in gone), f"{path.name} names an erased content"
        self.reopen()


ApproximateRecallMachine.TestCase.settings = settings(
    max_examples=examples(20),
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestRecallApproximate = pytest.mark.slow(ApproximateRecallMachine.TestCase)


class LmdbRecallMachine(RecallMachine):
    """The same machine on an LMDB store."""

    def make_repo(self, clock: Clock) -> Repo:
        self.tmp = Path(tempfile.mkdtemp(prefix="mnemo-recall-"))
        return Repo.init(self.tmp / "store", clock=clock, sync=False)

    def teardown(self) -> None:
        super().teardown()
        shutil.rmtree(self.tmp, ignore_errors=True)


LmdbRecallMachine.TestCase.settings = settings(
    max_examples=examples(8),
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestRecallOnLmdb = pytest.mark.slow(LmdbRecallMachine.TestCase)


# -- helpers for the fixed scenarios ----------------------------------------------------


@pytest.fixture
def clock() -> Clock:
    return Clock()


def texts(rng: random.Random, count: int, vocab: list[str], size: tuple[int, int] = (3, 8)) -> list[str]:
    """Texts of distinct words (each word at most once per text)."""
    return [" ".join(rng.sample(vocab, rng.randint(*size))) for _ in range(count)]


WORDS = [f"w{i:03d}" for i in range(120)]


def current_nodes(repo: Repo, at: str | None = None) -> dict[str, Node]:
    return {n.id: n for n in repo.nodes(at=at)}


# -- (a) erasure and collection leave nothing in the side indexes ----------------------


def test_erasure_drops_postings_at_once_and_a_vector_only_with_its_last_version(clock: Clock) -> None:
    repo = Repo.in_memory(clock=clock)
    repo.use_embedder("hash")
    one = repo.commit([Node(id="a", content="apple river"), Node(id="b", content="apple river")])
    repo.commit([Node(id="a", content="stone cloud")])
    assert {h.id for h in repo.search("apple", k=10, mode="lexical")} == {"b"}
    old_a = repo.get("a", at=one.id)
    shared = content_hash(old_a)
    assert shared in vector_hashes(repo, "hash-64")

    repo.forget("a", reason="asked", version=old_a.hash)
    assert not any(bytes.fromhex(old_a.hash) in key for key in recall_keys(repo))  # before any search
    assert shared in vector_hashes(repo, "hash-64"), "b still has that content"
    assert repo.search("apple", k=10, at=one.id, mode="lexical")[0].id == "b"

    b = repo.get("b")
    repo.forget("b", reason="asked")
    assert not any(bytes.fromhex(b.hash) in key for key in recall_keys(repo))
    assert shared not in vector_hashes(repo, "hash-64"), "no surviving version has that content"
    for mode in ("lexical", "semantic", "hybrid"):
        assert repo.search("apple river", k=10, at=one.id, mode=mode) == []
    assert [h.id for h in repo.search("stone", k=10)] == ["a"]


def test_gc_leaves_no_posting_or_vector_of_collected_versions(clock: Clock) -> None:
    repo = Repo.in_memory(clock=clock)
    repo.use_embedder("hash")
    repo.commit([Node(id="keep", content="stays here")])
    repo.branch("tmp")
    repo.switch("tmp")
    repo.commit([Node(id="gone", content="orphan words")])
    gone = repo.get("gone")
    assert [h.id for h in repo.search("orphan", mode="lexical")] == ["gone"]
    repo.switch("main")
    repo.delete_branch("tmp")
    report = repo.gc(grace=timedelta(0), expire_reflog=timedelta(0))
    assert report.commits_removed == 1
    assert not any(bytes.fromhex(gone.hash) in key for key in recall_keys(repo))
    assert repo.search("orphan", mode="lexical") == []
    assert vector_hashes(repo, "hash-64") == {content_hash(repo.get("keep"))}


def test_a_version_written_again_after_erasure_can_be_forgotten_again(clock: Clock) -> None:
    repo = Repo.in_memory(clock=clock)
    node = Node(id="a", content="apple secret")
    repo.commit([node])
    repo.forget("a", reason="first")
    again = repo.commit([node])  # the same bytes, written again: stored again
    assert [h.hash for h in repo.search("secret")] == [node.hash]
    records = repo.forget("a", reason="second").redactions
    assert [r.reason for r in records] == ["first"]  # the first record stands
    assert repo.search("secret", at=again.id) == []
    assert not any(bytes.fromhex(node.hash) in key for key in recall_keys(repo))


# -- (b) exactness -----------------------------------------------------------------------


BUSY_IDS = [f"{['team/a/', 'team/b/', 'other/'][i % 3]}{i:03d}" for i in range(240)]


def busy_store(clock: Clock, seed: int = 7) -> Repo:
    """Versions, deletes, expiry and an erasure; lots of words shared."""
    rng = random.Random(seed)
    repo = Repo.in_memory(clock=clock)
    repo.use_embedder("hash")
    nodes = [Node(id=node_id, content=t) for node_id, t in zip(BUSY_IDS, texts(rng, 240, WORDS), strict=True)]
    repo.commit(nodes)
    for step in range(6):
        picked = rng.sample(nodes, 20)
        puts = [Node(id=n.id, content=t) for n, t in zip(picked[:15], texts(rng, 15, WORDS), strict=True)]
        puts += [
            Node(id=n.id, content=n.content, expires_at=clock.now - timedelta(hours=1)) for n in picked[15:17]
        ]
        present = current_nodes(repo)
        deletes = [n.id for n in picked[17:] if n.id in present]
        repo.commit(puts, deletes, message=f"step {step}")
    repo.forget(nodes[1].id, reason="asked")
    return repo


def test_lexical_with_no_filter_and_large_k_returns_every_current_match(clock: Clock) -> None:
    repo = busy_store(clock)
    current = current_nodes(repo)  # expired ones left out, as search does
    for query in ["w001", "w007 w050", "w100 w101 w102", "w119 nothing"]:
        terms = set(query.split())
        hits = repo.search(query, k=1000, mode="lexical")
        expected = {k for k, n in current.items() if terms & set(document_words(n))}
        assert expected, query
        assert {h.id for h in hits} == expected
        assert all(h.hash == current[h.id].hash for h in hits)


def bm25(query: str, docs: dict[str, list[str]], candidates: dict[str, str]) -> list[str]:
    """Reference BM25 with statistics over every stored version, ranking ``candidates``.

    ``docs`` maps every stored version's hash to its words; ``candidates`` maps the
    hashes that may be returned to their ids.
    """
    count = len(docs)
    average = sum(len(w) for w in docs.values()) / count
    scores: dict[str, float] = {}
    for term in sorted(set(query_words(query))):
        having = [h for h, w in docs.items() if term in w]
        if not having:
            continue
        idf = np.log(1 + (count - len(having) + 0.5) / (len(having) + 0.5))
        for h in having:
            tf, length = docs[h].count(term), len(docs[h])
            # k1 = 0.9, b = 0.4
            scores[h] = scores.get(h, 0.0) + idf * tf * 1.9 / (tf + 0.9 * (0.6 + 0.4 * length / average))
    ranked = sorted((h for h in scores if h in candidates), key=lambda h: (-scores[h], bytes.fromhex(h)))
    return ranked


def test_filtered_lexical_search_is_the_top_k_of_the_filtered_set(clock: Clock) -> None:
    repo = busy_store(clock)
    stored: dict[str, list[str]] = {}  # every stored version: BM25 statistics count them all
    for node_id in BUSY_IDS:
        for version in repo.history(node_id):
            if version.node is not None:
                stored[version.hash] = document_words(version.node)
    for prefix in ["team/a/", "other/", None]:
        current = {n.hash: n.id for n in repo.nodes(prefix=prefix)}
        for query in ["w003 w004", "w010", "w020 w021 w022 w023", "w090 w002"]:
            for k in (1, 3, 10):
                got = [h.hash for h in repo.search(query, k=k, prefix=prefix, mode="lexical")]
                assert got == bm25(query, stored, current)[:k], (prefix, query, k)


def test_prefix_filtered_lexical_equals_searching_the_namespace_alone(clock: Clock) -> None:
    rng = random.Random(3)
    inside = [Node(id=f"team/a/{i:03d}", content=t) for i, t in enumerate(texts(rng, 40, WORDS, (6, 12)))]
    # Outside the namespace: short texts, so they outrank everything inside it.
    outside = [Node(id=f"zz/{i:03d}", content=t) for i, t in enumerate(texts(rng, 800, WORDS, (1, 3)))]
    both = Repo.in_memory(clock=clock)
    both.commit(outside + inside)
    alone = Repo.in_memory(clock=Clock())
    alone.commit(inside)
    compared = 0
    for word in WORDS:
        for k in (1, 2, 5, 50):
            got = both.search(word, k=k, prefix="team/a/", mode="lexical")
            want = alone.search(word, k=k, mode="lexical")
            assert [(h.id, h.hash) for h in got] == [(h.id, h.hash) for h in want], (word, k)
            compared += bool(want)
    assert compared > 100


def test_semantic_search_with_a_selective_filter_is_exact(clock: Clock) -> None:
    """Many rows with equal scores, few of them in the namespace: none may be skipped."""
    repo = Repo.in_memory(clock=clock)
    repo.use_embedder("hash")
    marks = ",.;:!?-()'"
    nodes = [
        Node(
            id=("b/" if i % 50 == 0 else "a/") + f"{i:04d}",
            content="alpha beta " + "".join(marks[int(d)] for d in f"{i:03d}"),
        )
        for i in range(1000)
    ]
    repo.commit(nodes)
    for k in (5, 20, 30, 100):
        hits = repo.search("alpha beta", k=k, prefix="b/", mode="semantic")
        assert len(hits) == min(k, 20), k
        assert {h.id for h in hits} <= {n.id for n in nodes[::50]}
    embedder = HashEmbedder(64)
    rng = random.Random(5)
    mixed = [Node(id=f"c/{i:03d}", content=t) for i, t in enumerate(texts(rng, 300, WORDS[:30], (1, 4)))]
    repo.commit(mixed)
    for query in ["w001 w002", "w010", "w003 w020 w029"]:
        for prefix in ("c/", "c/1", "c/25"):
            alive = [n for n in mixed if n.id.startswith(prefix)]
            best = sorted((cosine(embedder, query, n.content) for n in alive), reverse=True)[:7]
            hits = repo.search(query, k=7, prefix=prefix, mode="semantic")
            got = [cosine(embedder, query, h.node.content) for h in hits]
            assert got == pytest.approx(best, abs=1e-5), (query, prefix)


def test_results_do_not_depend_on_the_order_memories_were_written_in(clock: Clock) -> None:
    """Equal scores break by content hash, not by where a row sits in memory.

    Queries of one or two words against the hash embedder: each score sums at
    most two nonzero products, so equal vectors get bit-equal scores.
    """
    rng = random.Random(11)
    nodes = [Node(id=f"n/{i:03d}", content=t) for i, t in enumerate(texts(rng, 200, WORDS[:12], (1, 3)))]
    forward = Repo.in_memory(clock=clock)
    backward = Repo.in_memory(clock=Clock())
    for repo, order in ((forward, nodes), (backward, nodes[::-1])):
        repo.use_embedder("hash")
        for start in range(0, len(order), 20):
            repo.commit(order[start : start + 20])
            repo.search("w000")  # vectors added in a different order in each store
    for query in ["w000", "w001 w002", "w005 w011"]:
        for mode in ("semantic", "hybrid", "lexical"):
            a = forward.search(query, k=15, mode=mode)
            b = backward.search(query, k=15, mode=mode)
            assert summary(a) == summary(b), (query, mode)


# -- (c) tenants -------------------------------------------------------------------------


def test_a_tenant_never_finds_another_tenants_memories(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "store"
    Repo.init(path, clock=clock).close()
    shared = Node(id="notes/same", content="apple river shared by both")
    with (
        Repo.open(path, clock=clock) as home,
        Repo.open(path, tenant="acme", create=True, clock=clock) as acme,
    ):
        for repo, name in ((home, "home"), (acme, "acme")):
            repo.use_embedder("hash")
            repo.commit(
                [Node(id=f"notes/{name}/{i}", content=f"apple river secret {name} {i}") for i in range(20)]
                + [shared]
            )
        mine = {name: {n.hash for n in repo.nodes()} for repo, name in ((home, "home"), (acme, "acme"))}
        for repo, name in ((home, "home"), (acme, "acme")):
            other = "acme" if name == "home" else "home"
            for query in ["apple river", f"secret {other}", other]:
                for mode in ("lexical", "semantic", "hybrid"):
                    hits = repo.search(query, k=100, mode=mode)
                    assert hits or (mode == "lexical" and query != "apple river"), (name, query, mode)
                    assert {h.hash for h in hits} <= mine[name]
                    assert not any(other in h.id for h in hits)
        acme.forget("notes/same", reason="asked")
        assert [h.id for h in home.search("shared", mode="lexical")] == ["notes/same"]
        assert "notes/same" in {h.id for h in home.search("shared by both", k=100, mode="semantic")}
        assert "notes/same" not in {h.id for h in acme.search("shared by both", k=100)}


# -- (d) the read log and read-only handles ----------------------------------------------


def test_run_ids_record_what_each_search_and_context_returned(clock: Clock) -> None:
    repo = Repo.in_memory(clock=clock)
    repo.commit([Node(id=f"n/{i}", content=f"apple river {i}") for i in range(8)])
    first = repo.search("apple", k=3, run_id="run-1")
    second = repo.search("river 5", k=2, run_id="run-1")
    other = repo.search("apple", k=1, run_id="run-2")
    context = repo.context("apple", budget_tokens=12, run_id="run-1")
    records = repo.reads("run-1")
    assert [(r.kind, r.query, r.run_id) for r in records] == [
        ("search", "apple", "run-1"),
        ("search", "river 5", "run-1"),
        ("context", "apple", "run-1"),
    ]
    assert records[0].hashes == [h.hash for h in first] and records[0].ids == [h.id for h in first]
    assert records[1].hashes == [h.hash for h in second]
    assert records[2].hashes == [i.hash for i in context.items] and 0 < len(context.items) < 8
    assert records[0].time < records[1].time < records[2].time
    assert [r.hashes for r in repo.reads("run-2")] == [[h.hash for h in other]]
    assert repo.reads("never") == []
    with pytest.raises(InvalidInput):
        repo.search("apple", run_id="")


def test_erasure_scrubs_the_erased_version_from_every_read_record(clock: Clock) -> None:
    repo = Repo.in_memory(clock=clock)
    repo.commit([Node(id="a", content="apple one"), Node(id="b", content="apple two")])
    old = repo.get("a")
    repo.search("apple", run_id="r")
    repo.commit([Node(id="a", content="apple three")])
    repo.search("apple", run_id="r")
    repo.search("apple", run_id="s")
    repo.forget("a", reason="asked", version=old.hash)
    first, second = repo.reads("r")
    assert first.ids == ["b"] and old.hash not in first.hashes
    assert sorted(second.ids) == ["a", "b"] and old.hash not in second.hashes
    assert len(repo.reads("s")[0].hashes) == 2
    with repo.kv.read() as txn:
        everything = b"".join(key + value for key, value in txn.scan(Space.READS, b""))
    assert old.hash.encode() not in everything and bytes.fromhex(old.hash) not in everything


def test_a_read_only_handle_searches_without_writing_anything(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "store"
    with Repo.init(path, clock=clock) as repo:
        repo.config("embedder", "hash")
        repo.commit([Node(id=f"n/{i}", content=f"apple river {i}") for i in range(10)])
        repo.search("apple", run_id="w")
        # Queued, not indexed: new versions, and a version indexed already written again.
        repo.commit([Node(id="n/1", content="apple stone"), Node(id="n/new", content="apple cloud")])
        repo.commit([Node(id="n/1", content="apple river 1")])
        assert len(queued(repo)) == 3
        assert len([k for k in recall_keys(repo) if k.startswith(SCOPE + b"q")]) == 2  # one entry a commit
        before = dump(repo)
    data_file = next(f for f in path.iterdir() if f.suffix == ".mdb" and "lock" not in f.name)
    raw = data_file.read_bytes()

    with Repo.open(path, readonly=True, clock=clock) as reader:
        assert reader.embedder() is not None
        lexical = reader.search("apple", k=20, mode="lexical")
        assert {h.id for h in lexical} == {f"n/{i}" for i in range(10)} | {"n/new"}
        for mode in ("semantic", "hybrid"):
            for hit in reader.search("apple river", k=20, mode=mode):
                assert reader.get(hit.id).hash == hit.hash
        context = reader.context("apple", budget_tokens=30)
        assert context.items
        with pytest.raises(InvalidInput, match="cannot record reads"):
            reader.search("apple", run_id="ro")  # an audit log with a gap would mislead
        assert reader.reads("ro") == []
    assert data_file.read_bytes() == raw
    with Repo.open(path, clock=clock) as repo:
        assert dump(repo) == before
        # Once caught up, a writable handle ranks exactly as the read-only one did.
        again = repo.search("apple", k=20, mode="lexical")
        assert [(h.id, h.hash) for h in again] == [(h.id, h.hash) for h in lexical]
        assert [h.score for h in again] == pytest.approx([h.score for h in lexical])
        assert not [k for k in recall_keys(repo) if k.startswith(SCOPE + b"q")]


# -- (e) context -------------------------------------------------------------------------


def test_context_fits_the_budget_and_cites_every_item(clock: Clock) -> None:
    repo = Repo.in_memory(clock=clock)
    rng = random.Random(2)
    repo.commit([Node(id=f"n/{i:02d}", content=f"apple {t}") for i, t in enumerate(texts(rng, 30, WORDS))])
    previous = -1
    for budget in (1, 8, 20, 60, 150, 100_000):
        context = repo.context("apple", budget_tokens=budget)
        assert context.budget_tokens == budget
        assert sum(i.tokens for i in context.items) == context.tokens <= budget
        lines = context.render().splitlines() if context.items else []
        assert len(lines) == len(context.items)
        for item, line in zip(context.items, lines, strict=True):
            assert repo.get(item.id).hash == item.hash
            assert line == f"[{item.id}@{item.hash[:7]}] {item.text}"
            assert item.tokens == max(1, -(-len(line) // 4))
        assert len(context.items) >= previous
        previous = len(context.items)
    assert previous == 30


def test_context_prefers_the_claim_in_force_over_a_superseded_one(clock: Clock) -> None:
    repo = Repo.in_memory(clock=clock)

    def claim(node_id: str, value: str, year: int) -> Node:
        return Node(
            id=node_id, kind="claim", content=Claim("mira", "city", value, datetime(year, 1, 1, tzinfo=UTC))
        )

    old = claim("claims/city/1", "paris paris paris", 2020)  # matches the query better
    new = claim("claims/city/2", "berlin", 2024)
    repo.commit([old, new, Node(id="notes/x", content="unrelated words")])
    ranked = repo.search("mira city paris", k=5)
    assert [h.id for h in ranked][:2] == [old.id, new.id]
    one = repo.context("mira city paris", budget_tokens=20)
    assert [(i.id, i.claim_in_force) for i in one.items] == [(new.id, True)]
    both = repo.context("mira city paris", budget_tokens=1000)
    assert [(i.id, i.claim_in_force) for i in both.items] == [(new.id, True), (old.id, False)]
    back_then = repo.context("mira city paris", budget_tokens=1000, valid_at=datetime(2021, 6, 1, tzinfo=UTC))
    assert [(i.id, i.claim_in_force) for i in back_then.items] == [(old.id, True)]


# -- (f) rebuilding and changing the embedder --------------------------------------------


def battery(repo: Repo, at: str | None = None) -> list:
    out = []
    for query in ["w001", "w002 w003", "w010 w050 w100", "w119"]:
        for prefix in (None, "team/a/", "other/"):
            for mode in ("lexical", "semantic", "hybrid"):
                hits = repo.search(query, k=8, prefix=prefix, mode=mode, at=at)
                out.append((summary(hits), [round(h.score, 9) for h in hits]))
    return out


def test_reindex_recall_rebuilds_the_same_results(clock: Clock) -> None:
    repo = busy_store(clock)
    first = repo.resolve("HEAD~3").id
    expected = battery(repo), battery(repo, at=first)
    for rebuild in (
        repo.reindex_recall,
        lambda: repo.reindex_recall(vectors=True),
        repo.reindex,
    ):
        rebuild()
        assert (battery(repo), battery(repo, at=first)) == expected


def test_changing_the_embedder_never_changes_a_commit_or_a_node_hash() -> None:
    def run(embedder: str | None) -> tuple[list[str], list[str], dict[str, bytes]]:
        repo = Repo.in_memory(clock=Clock())
        repo.use_embedder(embedder)
        rng = random.Random(4)
        ids = []
        for step in range(6):
            nodes = [Node(id=f"n/{rng.randrange(20)}", content=t) for t in texts(rng, 4, WORDS[:20])]
            ids.append(repo.commit(list({n.id: n for n in nodes}.values()), message=str(step)).id)
            repo.search("w001 w002")
        repo.forget("n/3", reason="asked")
        repo.search("w001")
        hashes = sorted(n.hash for n in repo.nodes())
        with repo.kv.read() as txn:
            core = {
                space.value + key.hex(): value
                for space in (Space.OBJECTS, Space.REFS, Space.INDEX)
                for key, value in txn.scan(space, b"")
            }
        return ids, hashes, core

    small, large, none = run("hash-32"), run("hash-64"), run(None)
    assert small == large == none

    repo = Repo.in_memory(clock=Clock())
    repo.use_embedder("hash-64")
    repo.commit([Node(id=f"n/{i}", content=f"apple {w}") for i, w in enumerate(WORDS[:10])])
    repo.search("apple")
    with repo.kv.read() as txn:
        objects = list(txn.scan(Space.OBJECTS, b""))
    repo.use_embedder("hash-32")
    repo.reindex_recall(vectors=True)
    assert len(repo.search("apple", k=50, mode="semantic")) == 10
    assert len(vector_hashes(repo, "hash-32")) == 10
    with repo.kv.read() as txn:
        assert list(txn.scan(Space.OBJECTS, b"")) == objects


def test_a_new_embedder_finds_what_was_written_before_it(clock: Clock) -> None:
    repo = Repo.in_memory(clock=clock)
    repo.use_embedder("hash-64")
    repo.commit([Node(id=f"n/{i}", content=f"apple {w}") for i, w in enumerate(WORDS[:10])])
    assert len(repo.search("apple", k=50, mode="semantic")) == 10
    repo.use_embedder("hash-32")  # a model new to the store, and nothing queued
    found = repo.search("apple", k=50, mode="semantic")
    assert len(found) == 10
    repo.commit([Node(id="n/new", content="apple new")])
    assert len(repo.search("apple", k=50, mode="semantic")) == 11
    assert len(vector_hashes(repo, "hash-32")) == 11


# -- (g) commits stay cheap --------------------------------------------------------------


def test_commits_only_queue_until_a_search_catches_up(clock: Clock) -> None:
    repo = Repo.in_memory(clock=clock)
    repo.config("embedder", "hash")
    repo.commit([Node(id=f"n/{i}", content=f"apple {i}") for i in range(5)])
    repo.commit([Node(id="n/1", content="apple again"), Node(id="n/9", content="river")])
    queue = SCOPE + b"q"
    keys = recall_keys(repo)
    assert len(keys) == 2 and all(k.startswith(queue) for k in keys)  # one small entry per commit
    assert len(queued(repo)) == 7
    assert vector_hashes(repo, "hash-64") == set()

    assert len(repo.search("apple", mode="lexical")) == 5
    caught_up = set(recall_keys(repo))
    vectors = vector_hashes(repo, "hash-64")
    assert not any(k.startswith(queue) for k in caught_up) and len(vectors) == 7

    repo.commit([Node(id="n/2", content="stone"), Node(id="n/10", content="cloud")])
    assert len(set(recall_keys(repo)) - caught_up) == 1
    assert set(queued(repo)) == {bytes.fromhex(repo.get(i).hash) for i in ("n/2", "n/10")}
    assert caught_up <= set(recall_keys(repo))
    assert vector_hashes(repo, "hash-64") == vectors
    assert [h.id for h in repo.search("stone", mode="lexical")] == ["n/2"]
    assert not any(k.startswith(queue) for k in recall_keys(repo))


# -- (h) the layout: segments, rebuilds, older layouts, the handle's memory ---------------


ID_POOL = [f"{['p/', 'q/', 'p/r/'][i % 3]}{i:02d}" for i in range(12)]


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(
        st.lists(
            st.tuples(st.sampled_from(ID_POOL), st.lists(st.sampled_from(VOCAB), max_size=6)),
            min_size=1,
            max_size=5,
        ),
        min_size=1,
        max_size=6,
    ),
    forget=st.none() | st.sampled_from(ID_POOL),
    segment=st.sampled_from([1, 2, 5, 2048]),
)
def test_incremental_catch_ups_rank_as_a_full_rebuild(
    batches: list[list[tuple[str, list[str]]]], forget: str | None, segment: int
) -> None:
    """Caught up batch by batch (segments resumed, versions erased), the index ranks as one rebuilt whole."""
    with segments_of(segment):
        repo = Repo.in_memory(clock=Clock())
        repo.use_embedder("hash")
        for batch in batches:
            nodes = {node_id: Node(id=node_id, content=" ".join(found)) for node_id, found in batch}
            try:
                repo.commit(list(nodes.values()))
            except InvalidInput:
                continue  # nothing changed
            repo.search("apple")  # catch up now: the next batch resumes the segment
        if forget is not None and repo.history(forget):
            repo.forget(forget, reason="asked")

        def ranked() -> list:
            out = []
            for query in QUERIES:
                for prefix in (None, "p/"):
                    for mode in ("lexical", "hybrid"):
                        hits = repo.search(query, k=20, prefix=prefix, mode=mode)
                        out.append((summary(hits), [h.score for h in hits]))
            return out

        before = ranked()
        assert posted_numbers(repo) <= set(numbered_versions(repo))
        repo.reindex_recall()
        assert ranked() == before
        repo.reindex_recall(vectors=True)
        assert ranked() == before


@settings(max_examples=examples(60), deadline=None)
@given(
    scores=st.lists(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]) | st.floats(-1, 1, width=32), max_size=400),
    data=st.data(),
    window=st.integers(1, 8),
)
def test_the_walk_yields_every_live_row_in_exact_order(
    scores: list[float], data: st.DataObject, window: int
) -> None:
    """Best first by score, then content hash, whatever the windows and the guesses."""
    count = len(scores)
    keys = np.array(
        data.draw(st.lists(st.integers(0, 2**64 - 1), min_size=count, max_size=count)), dtype=np.uint64
    )
    alive = np.array(data.draw(st.lists(st.booleans(), min_size=count, max_size=count)), dtype=bool)
    values = np.array(scores, dtype=np.float32)
    walked = list(semantic._best_first(values, keys, alive, window))
    expected = sorted(np.flatnonzero(alive).tolist(), key=lambda row: (-values[row], int(keys[row]), row))
    assert [(values[r], keys[r]) for r in walked] == [(values[r], keys[r]) for r in expected]
    assert sorted(walked) == sorted(expected)


def test_the_walk_guesses_a_window_from_a_sample_and_stays_exact() -> None:
    """Many rows, small windows: the sampled guess is taken (and ties at it are handled)."""
    rng = np.random.default_rng(3)
    for sparse in (False, True):
        values = rng.standard_normal(20_000).astype(np.float32)
        if sparse:
            values[rng.random(20_000) < 0.9] = 0.0  # most rows tie at zero, as sparse vectors do
        keys = rng.integers(0, 2**63, 20_000, dtype=np.uint64)
        alive = rng.random(20_000) < 0.95
        expected = np.flatnonzero(alive)[np.lexsort((keys[alive], -values[alive]))].tolist()
        for window in (1, 16, 300):
            assert list(semantic._best_first(values, keys, alive, window)) == expected


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ids=st.sets(st.text(alphabet="ab/", min_size=1, max_size=6), max_size=300),
    prefix=st.text(alphabet="ab/", min_size=1, max_size=3),
    cap=st.integers(0, 200),
)
def test_a_namespace_is_counted_exactly_up_to_the_cap(ids: set[str], prefix: str, cap: int) -> None:
    repo = Repo.in_memory(clock=Clock())
    valid = sorted(i for i in ids if not i.startswith("/") and not i.endswith("/") and "//" not in i)
    if not valid:
        return
    repo.commit([Node(id=i, content="x") for i in valid])
    with repo.kv.read() as txn:
        view = View(Stores(SCOPE), txn)
        root = view.commit(bytes.fromhex(repo.resolve("HEAD").id)).tree
        counted = count_under(view, root, prefix, cap)
    true = sum(1 for i in valid if i.startswith(prefix))
    assert counted == true if true <= cap else counted > cap


def write_older_layout(repo: Repo) -> None:
    """Turn a caught-up index into one as the previous version wrote it."""

    def older(txn) -> None:  # type: ignore[no-untyped-def]
        for space in (Space.RECALL, Space.VECTORS):
            for key, _ in list(txn.scan(space, SCOPE)):
                if not key.startswith(SCOPE + b"q"):
                    txn.delete(space, key)
        for node in repo.nodes():
            oid = bytes.fromhex(node.hash)
            found = words(text_of(node))
            for word in set(found):
                txn.put(Space.RECALL, SCOPE + b"t" + word.encode() + b"\x00" + oid, bytes(8))
            txn.put(Space.RECALL, SCOPE + b"d" + oid, b"\x93\xa1a\x01\xc4\x00")
            txn.put(Space.VECTORS, SCOPE + b"hash-64\x00" + content_hash(node), bytes(256))
        txn.put(Space.RECALL, SCOPE + b"n", bytes(16))
        txn.put(Space.RECALL, SCOPE + b"mhash-64", b"64")

    repo.kv.transact(older)


def test_an_index_in_the_older_layout_is_rebuilt_by_a_writer_and_refused_to_a_reader(
    tmp_path: Path, clock: Clock
) -> None:
    path = tmp_path / "store"
    with Repo.init(path, clock=clock) as repo:
        repo.config("embedder", "hash")
        repo.commit([Node(id=f"n/{i}", content=f"apple river {i}") for i in range(12)])
        expected = [summary(repo.search("apple 3", k=5, mode=mode)) for mode in ("lexical", "semantic")]
        write_older_layout(repo)
    with Repo.open(path, readonly=True, clock=clock) as reader:
        with pytest.raises(InvalidInput, match="older version"):
            reader.search("apple")
        assert any("older version" in p.message for p in reader.fsck().problems)
    with Repo.open(path, clock=clock) as repo:
        assert [
            summary(repo.search("apple 3", k=5, mode=mode)) for mode in ("lexical", "semantic")
        ] == expected
        assert repo.fsck().ok
        for _, value in side_items(repo, Space.VECTORS):
            assert len(value) != 256, "an older vector is left"
        # An older posting ends in a 32-byte node hash after its word; a segment posting in 4 bytes.
        postings = [key[len(SCOPE) + 1 :] for key in recall_keys(repo) if key.startswith(SCOPE + b"t")]
        assert postings
        old = [key for key in postings if len(key.split(b"\x00", 1)[1]) == 32]
        assert not old, "an older posting is left"


def test_an_index_without_id_words_is_upgraded_by_its_postings_alone(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Layout 2 lacked the words of ids: a writer re-indexes postings and keeps every vector."""
    path = tmp_path / "store"
    with Repo.init(path, clock=clock) as repo:
        repo.use_embedder("hash")
        with monkeypatch.context() as patched:
            patched.setattr(text_module, "id_words", lambda node_id: [])
            repo.commit([Node(id=f"users/mira/{i}", content=f"apple river {i}") for i in range(12)])
            assert repo.search("mira", mode="lexical") == []
        repo.kv.transact(lambda txn: txn.put(Space.RECALL, SCOPE + b"f", b"2"))
        vectors_before = side_items(repo, Space.VECTORS)
    with Repo.open(path, readonly=True, clock=clock) as reader:
        reader.use_embedder("hash")
        assert len(reader.search("apple", k=20)) == 12  # readable, ids not yet among its words
        assert reader.fsck().ok
    embedded: list[str] = []

    class Counting(HashEmbedder):
        def __call__(self, texts: list[str]) -> np.ndarray:
            embedded.extend(texts)
            return super().__call__(texts)

    with Repo.open(path, clock=clock) as repo:
        repo.use_embedder(Counting())
        assert len(repo.search("mira", k=20, mode="lexical")) == 12
        assert embedded == []  # no stored content embedded again
        assert len(repo.search("apple river", k=20, mode="semantic")) == 12
        assert embedded == ["apple river"]  # the query alone
        assert side_items(repo, Space.VECTORS) == vectors_before
        assert dict(side_items(repo, Space.RECALL))[SCOPE + b"f"] == b"5"
        assert repo.fsck().ok


def test_erasing_from_an_index_in_the_older_layout_leaves_nothing_of_it(clock: Clock) -> None:
    repo = Repo.in_memory(clock=clock)
    repo.use_embedder("hash")
    repo.commit([Node(id="a", content="apple secret"), Node(id="b", content="river stone")])
    repo.search("apple")
    write_older_layout(repo)
    gone = bytes.fromhex(repo.get("a").hash)
    repo.forget("a", reason="asked")
    for key, value in side_items(repo, Space.RECALL) + side_items(repo, Space.VECTORS):
        assert gone not in key and gone not in value
    assert [h.id for h in repo.search("stone")] == ["b"]
    assert repo.search("secret", mode="lexical") == []


@pytest.mark.parametrize("per_page", [names.PER_PAGE, 10**9])
def test_a_long_lived_handle_follows_what_another_handle_writes_and_erases(
    tmp_path: Path, clock: Clock, per_page: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The handle's memory of names is kept in step by the change log (read piecemeal, or whole)."""
    monkeypatch.setattr(names, "PER_PAGE", per_page)
    path = tmp_path / "store"
    Repo.init(path, clock=clock).close()
    with Repo.open(path, clock=clock) as reader, Repo.open(path, clock=clock) as writer:
        for repo in (reader, writer):
            repo.use_embedder("hash")
        writer.commit([Node(id=f"n/{i:02d}", content=f"apple {w}") for i, w in enumerate(WORDS[:30])])
        assert len(reader.search("apple", k=50, mode="lexical")) == 30
        assert len(reader.search("apple w001", k=50, mode="semantic")) == 30
        # A second version with an existing content: the content map entry changes.
        shared = writer.get("n/01")
        writer.commit([Node(id="m/shared", content=shared.content)])
        writer.search("apple")  # the writer catches up
        found = {h.id for h in reader.search(shared.content, k=50, mode="semantic")}
        assert {"n/01", "m/shared"} <= found
        writer.forget("n/01", reason="asked")
        writer.forget("n/02", reason="asked")
        for mode in ("lexical", "semantic", "hybrid"):
            hits = {h.id for h in reader.search("apple w001 w002", k=50, mode=mode)}
            assert not hits & {"n/01", "n/02"}, mode
        assert "m/shared" in {h.id for h in reader.search(shared.content, k=50, mode="semantic")}
        writer.reindex_recall(vectors=True)
        assert [summary(reader.search("apple w003", k=5, mode=m)) for m in ("lexical", "hybrid")] == [
            summary(writer.search("apple w003", k=5, mode=m)) for m in ("lexical", "hybrid")
        ]


def test_fsck_finds_a_posting_that_names_no_document(clock: Clock) -> None:
    repo = Repo.in_memory(clock=clock)
    repo.commit([Node(id="a", content="apple river")])
    repo.search("apple")
    assert repo.fsck().ok
    stray = np.array([[999, 1, 2]], dtype="<u4").tobytes()
    repo.kv.transact(lambda txn: txn.put(Space.RECALL, SCOPE + b"tzebra\x00" + bytes(4), stray))
    assert any("postings name documents" in p.message for p in repo.fsck().problems)


# -- (i) findings of review: erased content in change logs, a memory moved on --------------


def test_erasure_leaves_no_content_hash_in_any_log() -> None:
    """A content hash confirms a guessed text: no key or value may keep it after erasure."""
    repo = Repo.in_memory()
    repo.config("embedder", "hash")
    repo.commit([Node(id="secret", content="alice ssn zebrafish 123456789")])
    repo.commit([Node(id="other", content="bob likes apples")])
    repo.search("zebrafish")
    node = repo.get("secret")
    needles = [content_hash(node), bytes.fromhex(node.hash), b"secret", b"zebrafish"]
    repo.forget("secret", reason="asked to")
    with repo.kv.read() as txn:
        for space in (Space.RECALL, Space.VECTORS):
            for key, value in txn.scan(space, b""):
                assert not any(n in bytes(key) or n in bytes(value) for n in needles), (space, key)
    assert [h.id for h in repo.search("apples")] == ["other"]
    assert repo.search("zebrafish", mode="lexical") == []


def test_a_transaction_behind_the_handles_memory_reads_its_own_numbers(tmp_path: Path) -> None:
    """Document numbers are given anew by a rebuild: a search still on the older
    transaction must not take the new numbering from the handle's memory."""
    nouns = ["apple", "river", "stone", "cloud", "ember", "maple", "frost", "quill", "zebra", "lemon"]
    with Repo.init(tmp_path / "s") as repo:
        for i, noun in enumerate(nouns):
            repo.commit([Node(id=f"n{i}", content=f"{noun} filler{i}")])
            repo.search("x", mode="lexical")  # one version indexed per catch-up: numbers in commit order
        cache = vector_cache(repo)
        index = Postings(SCOPE)
        with repo.kv.read() as old:
            before = cache.names(old, index)
            expected = [index.numbered(old, i) for i in range(len(nouns))]
            repo.reindex_recall()  # numbers in hash order now
            with repo.kv.read() as new:
                after = cache.names(new, index)
                for i in range(len(nouns)):
                    after.number(i)  # the memory now holds the new numbering
            assert [before.number(i) for i in range(len(nouns))] == expected

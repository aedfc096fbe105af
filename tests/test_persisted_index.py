"""The saved approximate index: mapped by a new handle, caught up, and reached by erasure.

Past ``recall.approximate_from`` a handle saves its HNSW graph beside the store
(``recall-index/`` in a store directory, or an ``index_cache`` directory), and a
new handle maps it instead of building it, catching up from the vectors' change
log. These tests pin what a demanding user expects of derived files: the same
answers as the handle that built it; a torn, damaged, foreign or stale file is
never trusted; a read-only handle (or medium) writes nothing and still searches;
an erased memory is never returned, and its int8 bytes (and float32 vector and
content hash) leave every file once the store is collected and compacted (the
canary, as for the store file itself); a dropped tenant's files go; a unique
match is found among 200,000 near-duplicates; a namespace of thousands is scored
whole and exactly.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import uuid
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from support.components import unavailable
from support.internals import vector_cache
from support.vector_blocks import stored_vectors

from mnemosyne import InvalidInput, Node, Repo, Store
from mnemosyne.index.view import Stores, View
from mnemosyne.recall import approximate, matrix, semantic
from mnemosyne.recall.approximate import quantised
from mnemosyne.recall.matrix import Matrix, VectorCache
from mnemosyne.recall.postings import NEVER, Postings
from mnemosyne.recall.text import content_hash
from mnemosyne.recall.vectors import VectorStore, block_row

DIM = 32
SCOPE = b"\x00\x00\x00\x00"


class Topics:
    """Vectors near 40 centres, by the number ending a text ("item 17").

    A text starting with ``lonely`` points in a direction of its own (seeded by
    its first two words), far from every centre: a unique match for a question
    starting with the same words.
    """

    model_id = "topics-32"
    dim = DIM

    def __init__(self) -> None:
        self.centres = np.random.default_rng(7).standard_normal((40, DIM)).astype(np.float32)

    def __call__(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            if text.startswith("lonely"):
                head = " ".join(text.split()[:2]).encode()
                seed = int.from_bytes(hashlib.blake2b(head, digest_size=8).digest(), "big")
                out[row] = np.random.default_rng(seed).standard_normal(DIM)
                continue
            number = int(text.rsplit(" ", 1)[-1])
            noise = np.random.default_rng(number).standard_normal(DIM)
            out[row] = self.centres[number % len(self.centres)] + 0.3 * noise
        return out


def stored_vector(repo: Repo, node: Node) -> bytes:
    """The float32 bytes the store keeps for ``node``'s content (its unit vector)."""
    store = VectorStore(SCOPE)
    with repo.kv.read() as txn:
        where = store.where(txn, Topics.model_id, content_hash(node))
        assert where is not None
        block = store.block(txn, Topics.model_id, where[0].to_bytes(4, "big"))
        assert block is not None
        vector = block_row(block, where[1], DIM)
        assert vector is not None
        return vector.astype("<f4").tobytes()


def filled(path: Path, count: int = 600, more: list[Node] | None = None, **options: object) -> Repo:
    """A store of ``count`` memories (and ``more``) whose saved index holds them all."""
    repo = Repo.init(path, embedder=Topics(), sync=False, **options)  # type: ignore[arg-type]
    repo.config("recall.approximate_from", "1")
    repo.commit([Node(id=f"{'a' if i % 4 else 'b'}/{i}", content=f"item {i}") for i in range(count)])
    if more:
        repo.commit(more)
    repo.search("item 1", k=1, mode="semantic")  # builds the index and saves it
    return repo


def reopened(path: Path, **options: object) -> Repo:
    return Repo.open(path, embedder=Topics(), **options)  # type: ignore[arg-type]


def matrix_of(repo: Repo) -> Matrix:
    (found,) = vector_cache(repo).held()
    return found


def index_files(path: Path) -> list[str]:
    return sorted(p.name for p in (path / "recall-index").iterdir())


def holding(root: Path, needle: bytes) -> list[str]:
    """Every file under ``root`` whose bytes contain ``needle``."""
    files = [p for p in root.rglob("*") if p.is_file()]
    return sorted(str(p.relative_to(root)) for p in files if needle in p.read_bytes())


def ranked(repo: Repo, query: str, **options: object) -> list[tuple[str, float]]:
    hits = repo.search(query, k=10, mode="semantic", **options)  # type: ignore[arg-type]
    return [(h.id, round(h.score, 5)) for h in hits]


# -- a new handle maps what the first one saved --------------------------------------


def test_a_new_handle_maps_the_saved_index_and_ranks_as_the_handle_that_built_it(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with filled(path) as repo:
        first = [ranked(repo, f"item {n}") for n in (3, 77, 901)]
        built = matrix_of(repo).approx
        assert built is not None and built.saved and len(built) == 600
    files = index_files(path)
    assert sorted(f.rsplit(".", 1)[-1] for f in files) == ["codes", "graph", "lock", "rows"]
    with reopened(path) as repo:
        assert [ranked(repo, f"item {n}") for n in (3, 77, 901)] == first
        mapped = matrix_of(repo).approx
        assert mapped is not None and mapped.saved and mapped.linked_since == 0  # nothing built
    assert index_files(path) == files  # nothing written: it was caught up already


def test_new_memories_are_caught_up_from_the_log_and_saved_again_past_a_threshold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "store"
    filled(path).close()
    with reopened(path, sync=False) as repo:
        repo.commit([Node(id=f"c/{i}", content=f"item {1000 + i}") for i in range(40)])
    graph = [f for f in index_files(path) if f.endswith(".graph")]
    with reopened(path) as repo:
        assert repo.search("item 1007", k=1, mode="semantic")[0].id == "c/7"
        approx = matrix_of(repo).approx
        assert approx is not None and approx.saved and approx.linked_since == 40
    assert [f for f in index_files(path) if f.endswith(".graph")] == graph  # 40 < SAVE_AFTER
    monkeypatch.setattr(matrix, "SAVE_AFTER", 32)
    with reopened(path) as repo:
        assert repo.search("item 1007", k=1, mode="semantic")[0].id == "c/7"
    after = [f for f in index_files(path) if f.endswith(".graph")]
    assert len(after) == 1 and after != graph  # saved anew, the old graph file gone
    with reopened(path) as repo:
        repo.search("item 1", k=1, mode="semantic")
        approx = matrix_of(repo).approx
        assert approx is not None and approx.linked_since == 0 and len(approx) == 640


# -- erasure reaches the files -------------------------------------------------------


def test_an_erased_memory_leaves_the_index_at_once_and_every_index_file_after_compaction(
    tmp_path: Path,
) -> None:
    """The canary: int8 copies, float32 vector (a lonely vector is kept whole) and content hash."""
    path = tmp_path / "store"
    canary = f"lonely canary {uuid.uuid4().hex}"
    node = Node(id="secret/1", content=canary)
    with filled(path, count=2000, more=[node]) as repo:
        assert repo.search(canary, k=1, mode="semantic")[0].id == "secret/1"
        vector = stored_vector(repo, node)
        unit = np.frombuffer(vector, dtype="<f4")
        needles = {
            "int8 (the graph's)": np.trunc(unit * 127).astype(np.int8).tobytes(),
            "code (the codes')": quantised(unit[None, :])[0].tobytes(),
            "float32": vector,
            "content hash": content_hash(node),
        }
        for what, needle in needles.items():  # the check can see each of them
            assert holding(path / "recall-index", needle), what
        repo.forget("secret/1", "asked to")
        assert "secret/1" not in {h.id for h in repo.search(canary, k=50, mode="semantic")}
    with reopened(path) as repo:  # a new handle masks it from the change log
        assert "secret/1" not in {h.id for h in repo.search(canary, k=50, mode="semantic")}
        approx = matrix_of(repo).approx
        assert approx is not None and approx.saved and approx.dropped_saved == 1
        report = repo.gc(grace=timedelta(0), compact=True)
        assert report.compacted
    for what, needle in needles.items():
        assert holding(path, needle) == [], what
    with reopened(path) as repo:  # the rewritten index is mapped, and holds the rest
        assert repo.search("item 77", k=1, mode="semantic")[0].id == "a/77"
        approx = matrix_of(repo).approx
        assert approx is not None and approx.saved and approx.dropped_saved == 0 and len(approx) == 2000


@pytest.mark.slow
def test_a_postgres_store_keeps_its_index_in_the_cache_given_and_an_erasure_rewrites_it(
    pg_url: str, tmp_path: Path
) -> None:
    """Outside the store no compaction is sure to reach the file: the next handle rewrites it."""
    cache = tmp_path / "cache"
    canary = f"lonely canary {uuid.uuid4().hex}"
    node = Node(id="secret/1", content=canary)
    with Repo.init(pg_url, embedder=Topics(), index_cache=cache) as repo:
        repo.config("recall.approximate_from", "1")
        repo.commit([Node(id=f"a/{i}", content=f"item {i}") for i in range(300)])
        repo.commit([node])
        assert repo.search(canary, k=1, mode="semantic")[0].id == "secret/1"
        vector = stored_vector(repo, node)
    unit = np.frombuffer(vector, dtype="<f4")
    int8 = np.trunc(unit * 127).astype(np.int8).tobytes()
    code = quantised(unit[None, :])[0].tobytes()
    assert holding(cache, int8) and holding(cache, code)
    with Repo.open(pg_url, embedder=Topics()) as repo:  # no cache given: nothing saved, nothing read
        assert repo.search(canary, k=1, mode="semantic")[0].id == "secret/1"
        approx = matrix_of(repo).approx
        assert approx is not None and not approx.saved
    with Repo.open(pg_url, embedder=Topics(), index_cache=cache) as repo:
        assert repo.search("item 9", k=1, mode="semantic")[0].id == "a/9"
        approx = matrix_of(repo).approx
        assert approx is not None and approx.saved and approx.linked_since == 0
        repo.forget("secret/1", "asked to")
        assert "secret/1" not in {h.id for h in repo.search(canary, k=50, mode="semantic")}
    assert holding(cache, int8) == [] and holding(cache, code) == [] and holding(cache, vector) == []
    assert holding(cache, content_hash(node)) == []


def test_compaction_and_a_drop_clean_the_store_directorys_own_index_when_a_cache_is_given(
    tmp_path: Path,
) -> None:
    """A directory store searched once without ``index_cache`` and then with one has files in both."""
    path = tmp_path / "store"
    canary = f"lonely canary {uuid.uuid4().hex}"
    node = Node(id="secret/1", content=canary)
    with filled(path, count=300, more=[node]) as repo:  # saved in recall-index/
        vector = stored_vector(repo, node)
    unit = np.frombuffer(vector, dtype="<f4")
    code = quantised(unit[None, :])[0].tobytes()
    assert holding(path / "recall-index", code)
    with reopened(path, index_cache=tmp_path / "cache") as repo:
        repo.forget("secret/1", "asked to")
        assert repo.gc(grace=timedelta(0), compact=True).compacted
    assert holding(path, code) == [] and holding(path, content_hash(node)) == []
    with Store.open(path) as store:
        store.create_tenant("acme")
    with Repo.open(path, tenant="acme", embedder=Topics()) as acme:  # saved in recall-index/
        acme.commit([Node(id="x", content="item 5")])
        acme.search("item 5", k=1, mode="semantic")
    assert any(name.startswith("00000001-") for name in index_files(path))
    with Store.open(path, index_cache=tmp_path / "cache") as store:
        store.drop_tenant("acme")
    assert not any(name.startswith("00000001-") for name in index_files(path))


def test_dropping_a_tenant_deletes_its_saved_index(tmp_path: Path) -> None:
    path = tmp_path / "store"
    filled(path).close()
    with Store.open(path) as store:
        store.create_tenant("acme")
        with Repo.open(store, tenant="acme", embedder=Topics()) as acme:
            acme.commit([Node(id="x", content="item 5")])
            acme.search("item 5", k=1, mode="semantic")
        scopes = {name.split("-", 1)[0] for name in index_files(path)}
        assert scopes == {"00000000", "00000001"}
        store.drop_tenant("acme")
        assert {name.split("-", 1)[0] for name in index_files(path)} == {"00000000"}


# -- files that do not check out are never trusted -----------------------------------


def _cut_manifest(index: Path) -> None:
    (rows,) = index.glob("*.rows")
    rows.write_bytes(rows.read_bytes()[:-100])


def _flip_manifest(index: Path) -> None:
    (rows,) = index.glob("*.rows")
    data = bytearray(rows.read_bytes())
    data[len(data) // 2] ^= 0xFF
    rows.write_bytes(bytes(data))


def _cut_graph(index: Path) -> None:
    (graph,) = index.glob("*.graph")
    graph.write_bytes(graph.read_bytes()[:-64])


def graph_files(path: Path) -> list[str]:
    return [name for name in index_files(path) if name.endswith(".graph")]


@pytest.mark.parametrize("damage", [_cut_manifest, _flip_manifest, _cut_graph])
def test_a_torn_or_damaged_index_file_is_built_again(tmp_path: Path, damage: object) -> None:
    path = tmp_path / "store"
    with filled(path) as repo:
        expected = ranked(repo, "item 42")
    before = graph_files(path)
    damage(path / "recall-index")  # type: ignore[operator]
    with reopened(path) as repo:
        assert ranked(repo, "item 42") == expected
        approx = matrix_of(repo).approx
        assert approx is not None and approx.saved and len(approx) == 600
    after = graph_files(path)
    assert len(after) == 1 and after != before  # built and saved again, the damaged files replaced
    with reopened(path) as repo:
        assert ranked(repo, "item 42") == expected
        approx = matrix_of(repo).approx
        assert approx is not None and approx.linked_since == 0


def test_another_stores_index_is_not_trusted(tmp_path: Path) -> None:
    """Same tenant scope and model, other vectors: the index identity tells them apart."""
    one, two = tmp_path / "one", tmp_path / "two"
    filled(one).close()
    with Repo.init(two, embedder=Topics(), sync=False) as repo:
        repo.config("recall.approximate_from", "1")
        repo.commit([Node(id=f"z/{i}", content=f"item {5000 + i}") for i in range(1200)])
        expected = ranked(repo, "item 5007")
    shutil.rmtree(two / "recall-index")
    shutil.copytree(one / "recall-index", two / "recall-index")  # a log as long, entries alike
    with reopened(two) as repo:
        assert ranked(repo, "item 5007") == expected
        assert len(matrix_of(repo).approx or []) == 1200


def test_an_index_caught_up_past_the_store_is_not_trusted(tmp_path: Path) -> None:
    """A store file put back from an older copy: the index knows memories it does not have."""
    path = tmp_path / "store"
    with filled(path, count=300) as repo:
        repo.search("item 1", k=1, mode="semantic")
    older = (path / "data.mdb").read_bytes()
    shutil.rmtree(path / "recall-index")  # saved anew below, caught up with the newer memories
    with reopened(path, sync=False) as repo:
        repo.commit([Node(id=f"c/{i}", content=f"item {2000 + i}") for i in range(300)])
        repo.search("item 1", k=1, mode="semantic")
        assert matrix_of(repo).count == 600
    (path / "data.mdb").write_bytes(older)
    with reopened(path) as repo:
        hits = repo.search("item 2005", k=10, mode="semantic")
        assert not any(h.id.startswith("c/") for h in hits)
        assert matrix_of(repo).count == 300
        approximate = ranked(repo, "item 2005")
        repo.config("recall.approximate_from", "off")
        assert ranked(repo, "item 2005") == approximate


# -- read-only handles, read-only media, a save under way ----------------------------


def test_a_read_only_handle_maps_the_saved_index_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with filled(path) as repo:
        expected = ranked(repo, "item 8")
        repo.commit([Node(id="c/1", content="item 3001")])
        repo.search("item 3001", k=1, mode="semantic")  # caught up, not saved: 1 < SAVE_AFTER
    before = {p.name: p.stat().st_mtime_ns for p in (path / "recall-index").iterdir()}
    with reopened(path, readonly=True) as repo:
        assert ranked(repo, "item 8") == expected
        approx = matrix_of(repo).approx
        assert approx is not None and approx.saved and approx.linked_since == 1
    assert {p.name: p.stat().st_mtime_ns for p in (path / "recall-index").iterdir()} == before


def test_a_read_only_handle_without_a_saved_index_builds_one_in_memory_only(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with filled(path) as repo:
        expected = ranked(repo, "item 8")
    shutil.rmtree(path / "recall-index")
    with reopened(path, readonly=True) as repo:
        assert ranked(repo, "item 8") == expected
        approx = matrix_of(repo).approx
        assert approx is not None and not approx.saved
    assert not (path / "recall-index").exists()


def test_a_store_on_a_read_only_medium_searches_through_its_saved_index(tmp_path: Path) -> None:
    where = tmp_path / "disk"
    where.mkdir()
    if os.geteuid() != 0:
        unavailable("mounting a tmpfs needs root")
    command = ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(where)]
    done = subprocess.run(command, capture_output=True)
    if done.returncode != 0:
        unavailable(f"cannot mount a tmpfs: {done.stderr.decode().strip()}")
    try:
        saved, bare = where / "saved", where / "bare"
        with filled(saved) as repo:
            expected = ranked(repo, "item 8")
        filled(bare).close()
        shutil.rmtree(bare / "recall-index")
        subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True, capture_output=True)
        with reopened(saved, readonly=True) as repo:
            assert ranked(repo, "item 8") == expected
            assert (matrix_of(repo).approx or pytest.fail()).saved
        with reopened(bare, readonly=True) as repo:
            assert ranked(repo, "item 8") == expected  # built in memory
    finally:
        # Lazily: a mapping the test still holds must not leave the mount behind.
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_a_save_that_fails_part_way_leaves_the_saved_index_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk that fills (or a process killed) while saving: the old files stay, and are used."""
    path = tmp_path / "store"
    filled(path).close()
    before = {p.name: p.read_bytes() for p in (path / "recall-index").iterdir()}
    with reopened(path, sync=False) as repo:
        repo.commit([Node(id=f"c/{i}", content=f"item {3000 + i}") for i in range(40)])

    def full(self: object, target: str) -> None:
        Path(target).write_bytes(b"half a graph")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(matrix, "SAVE_AFTER", 32)
    monkeypatch.setattr(approximate.Graph, "save", full)
    with reopened(path) as repo:
        assert repo.search("item 3007", k=1, mode="semantic")[0].id == "c/7"  # searched all the same
    assert {p.name: p.read_bytes() for p in (path / "recall-index").iterdir()} == before
    monkeypatch.undo()
    with reopened(path) as repo:
        assert repo.search("item 3007", k=1, mode="semantic")[0].id == "c/7"
        approx = matrix_of(repo).approx
        assert approx is not None and approx.saved and approx.linked_since == 40  # the old one, caught up


def test_a_save_another_process_is_making_is_left_to_it(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with filled(path) as repo:
        expected = ranked(repo, "item 8")
    shutil.rmtree(path / "recall-index")
    (path / "recall-index").mkdir()
    with reopened(path) as repo:
        name = f"{SCOPE.hex()}-{hashlib.blake2b(b'topics-32', digest_size=8).hexdigest()}"
        with open(path / "recall-index" / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # as another process saving it would
            assert ranked(repo, "item 8") == expected
        assert index_files(path) == [f"{name}.lock"]


def test_an_index_cache_must_be_a_path_and_belongs_to_the_store(tmp_path: Path) -> None:
    path = tmp_path / "store"
    filled(path).close()
    with pytest.raises(InvalidInput, match="index_cache"):
        Repo.open(path, index_cache=42)  # type: ignore[arg-type]
    with Store.open(path) as store, pytest.raises(InvalidInput, match="index_cache"):
        Repo.open(store, index_cache=tmp_path / "cache")
    with Repo.open(path, embedder=Topics(), index_cache=tmp_path / "cache") as repo:
        expected = ranked(repo, "item 8")
        assert repo.store.index_location is not None and repo.store.index_location.outside
    assert sorted(p.suffix for p in (tmp_path / "cache").iterdir()) == [".codes", ".graph", ".lock", ".rows"]
    with Repo.open(path, embedder=Topics(), index_cache=tmp_path / "cache") as repo:
        assert ranked(repo, "item 8") == expected
        assert (matrix_of(repo).approx or pytest.fail()).linked_since == 0


# -- what the approximate path finds -------------------------------------------------


def test_a_namespace_of_thousands_is_scored_whole_and_exactly(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with Repo.init(path, embedder=Topics(), sync=False) as repo:
        repo.config("recall.approximate_from", "1")
        repo.commit([Node(id=f"{'big' if i % 3 else 'rest'}/{i}", content=f"item {i}") for i in range(3600)])

        def both(query: str) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
            approximate = ranked(repo, query, prefix="big/")
            repo.config("recall.approximate_from", "off")
            exact = ranked(repo, query, prefix="big/")
            repo.config("recall.approximate_from", "1")
            return approximate, exact

        for query in ("item 5", "item 77", "item 5"):  # the second time from what the handle kept
            approximate, exact = both(query)
            assert approximate == exact and all(i.startswith("big/") for i, _ in approximate)
        best = approximate[0][0]
        repo.forget(best, "asked to")
        approximate, exact = both("item 5")
        assert best not in {i for i, _ in approximate} and approximate == exact
        repo.commit([Node(id="big/new", content="item 5")])
        approximate, exact = both("item 5")
        assert approximate[0][0] == "big/new" and approximate == exact


def test_a_namespace_of_thousands_proposes_nothing_in_python(tmp_path: Path) -> None:
    """Scored whole: no row is proposed to look up its versions, and only the best few are judged."""
    path = tmp_path / "store"
    with filled(path, count=3000) as repo:
        root = bytes.fromhex(repo.resolve("HEAD").tree)
        with repo.kv.read() as txn:
            view = View(Stores(SCOPE), txn)
            members = list(view.tree.items(root, prefix="a/"))
            assert len(members) == 2250  # more than a small namespace, scored whole all the same
            looked_up: list[bytes] = []
            judged: list[str] = []

            def versions(chash: bytes) -> tuple[tuple[bytes, str, int], ...]:
                looked_up.append(chash)
                return ()

            def accept(node_id: str, oid: bytes, expires: int) -> bool:
                judged.append(node_id)
                return True

            found = semantic.semantic(
                view,
                Postings(SCOPE),
                VectorCache(),
                Topics(),
                "item 77",
                accept,
                50,
                namespace=lambda cap: members if len(members) <= cap else None,
                versions=versions,
                approximate_from=1,
                namespace_key=(root, "a/"),
            )
        assert len(found) == 50 and found[0][1] == "a/77"
        assert looked_up == [] and len(judged) == 50


@pytest.mark.slow
def test_unique_matches_are_found_among_200000_near_duplicates() -> None:
    """Each planted vector far from everything else is in the top 10 for a question near it.

    Low-dimensional vectors keep the graph's build to seconds; the mechanism is
    the one a million 384-wide vectors go through.
    """
    rng = np.random.default_rng(5)
    width, count, planted = 16, 200_000, 40
    vectors_ = rng.standard_normal(width).astype(np.float32) + 0.05 * rng.standard_normal(
        (count + planted, width)
    ).astype(np.float32)
    needles = rng.choice(count + planted, planted, replace=False)
    vectors_[needles] = rng.standard_normal((planted, width)).astype(np.float32)
    vectors_ /= np.linalg.norm(vectors_, axis=1, keepdims=True)
    kv, hashes = stored_vectors(vectors_, SCOPE)

    class Near:
        model_id, dim = "m", width

        def __call__(self, texts: list[str]) -> np.ndarray:
            row = int(texts[0])  # a question near planted vector ``row``
            noise = np.random.default_rng(row).standard_normal(width).astype(np.float32)
            return (vectors_[row] + 0.02 * noise)[None, :]

    cache = VectorCache()
    with kv.read() as txn:
        view = View(Stores(SCOPE), txn)
        for row in needles.tolist():
            exact = int(np.argmax(vectors_ @ Near()([str(row)])[0]))
            assert exact == row  # the planted vector is exact search's best, by far
            found = semantic.semantic(
                view,
                Postings(SCOPE),
                cache,
                Near(),
                str(row),
                lambda node_id, oid, expires: True,
                10,
                versions=lambda chash: ((chash, chash.hex(), NEVER),),
                approximate_from=1,
            )
            assert hashes[row] in {oid for oid, _, _ in found[:10]}, row

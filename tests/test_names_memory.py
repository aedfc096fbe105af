"""A handle's memory of names read whole into arrays (recall/names.py).

A long-lived handle that has read both maps whole (forced at once here: a
large ``PER_PAGE`` makes every store "one page") must answer every search as a
fresh handle that reads every name from the store does, through commits
(versions sharing a content), erasures, forgetting and rebuilds; a transaction
older than the memory reads its own names; and the arrays stay compact.
"""

from __future__ import annotations

import shutil
import tempfile
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.internals import vector_cache
from support.name_arrays import no_arrays
from support.tiers import examples

from mnemosyne import Node, Repo
from mnemosyne.recall import names, semantic
from mnemosyne.recall.names import NameMemory
from mnemosyne.recall.postings import Postings
from mnemosyne.recall.text import content_hash

SCOPE = bytes(4)  # the default tenant's key scope
IDS = ["a/1", "a/2", "a/b/3", "a/b/4", "b/1", "b/2", "c"]
TEXTS = ["apple river", "river stone", "stone cloud apple", "ember maple", "apple ember frost"]
PREFIXES = [None, "a/", "a/b/", "z/"]
QUERIES = ["apple river", "ember frost stone"]
LATER = datetime(2100, 1, 1, tzinfo=UTC)


@contextmanager
def arrays_forced() -> Iterator[None]:
    """Every handle reads both maps whole at its first lookup that reads the store; the
    approximate index finds a namespace's members through its walk (screened a batch at a
    time) rather than scoring the namespace whole."""
    before = names.PER_PAGE, semantic.NAMESPACE_WHOLE
    names.PER_PAGE, semantic.NAMESPACE_WHOLE = 10**9, 0
    try:
        yield
    finally:
        names.PER_PAGE, semantic.NAMESPACE_WHOLE = before


def answers(repo: Repo, query: str) -> list[object]:
    return [
        [
            (h.id, h.hash, h.score, h.lexical_rank, h.semantic_rank)
            for h in repo.search(query, k=8, prefix=p, mode=m)
        ]
        for p in PREFIXES
        for m in ("lexical", "semantic", "hybrid")
    ]


commits = st.lists(
    st.tuples(st.sampled_from(IDS), st.sampled_from(TEXTS), st.booleans()), min_size=1, max_size=4
)
steps = st.lists(
    st.tuples(
        st.one_of(
            st.tuples(st.just("commit"), commits),
            st.tuples(st.just("forget"), st.sampled_from(IDS)),
            st.tuples(st.just("delete"), st.sampled_from(IDS)),
            st.tuples(st.just("reindex"), st.booleans()),
            st.tuples(st.just("writer searches"), st.sampled_from(QUERIES)),
        ),
        # Names read one by one before the maps are read whole again: none (every read of the
        # store reads them whole), or about as many as there are documents (the arrays stay,
        # what changed since is read beside them).
        st.sampled_from([10**9, 1]),
    ),
    min_size=1,
    max_size=8,
)


@pytest.mark.slow
@pytest.mark.parametrize("approximate_from", ["1", "off"])
@settings(max_examples=examples(8), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=steps)
def test_a_handle_with_the_arrays_answers_as_a_fresh_handle_without_them(
    approximate_from: str, steps: list[tuple]
) -> None:
    """Semantic rankings through the approximate index (screened a batch at a time) or exact."""
    tmp = Path(tempfile.mkdtemp(prefix="mnemo-names-"))
    try:
        path = tmp / "store"
        with Repo.init(path, sync=False) as repo:
            repo.config("recall.approximate_from", approximate_from)
        with arrays_forced(), Repo.open(path, sync=False) as writer, Repo.open(path, sync=False) as live:
            for repo in (writer, live):
                repo.use_embedder("hash")
            writer.commit([Node(id=i, content=t) for i, t in zip(IDS, TEXTS * 2, strict=False)])
            live.search("apple")  # the arrays are read now, and kept in step from here on
            for (op, arg), per_page in steps:
                names.PER_PAGE = per_page
                current = set(writer.ids())
                if op == "commit":
                    put = {i: Node(id=i, content=t, expires_at=LATER if e else None) for i, t, e in arg}
                    writer.commit(list(put.values()))
                elif op == "forget" and arg in current:
                    writer.forget(arg, reason="asked")
                elif op == "delete" and arg in current:
                    writer.commit(delete=[arg])
                elif op == "reindex":
                    writer.reindex_recall(vectors=arg)
                elif op == "writer searches":
                    writer.search(arg)  # the writer catches the index up (logging changed contents)
                seen = [answers(live, query) for query in QUERIES]
                with no_arrays(), Repo.open(path) as fresh:
                    fresh.use_embedder("hash")
                    assert seen == [answers(fresh, query) for query in QUERIES], (op, arg)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_an_older_transaction_reads_its_own_names_beside_the_arrays(tmp_path: Path) -> None:
    """Numbers are given anew by a rebuild, contents gain versions: an older transaction
    must not take either from the arrays a newer one read."""
    with arrays_forced(), Repo.init(tmp_path / "s") as repo:
        repo.commit([Node(id=f"n{i}", content=f"{TEXTS[i % 5]} x{i}") for i in range(12)])
        repo.commit([Node(id="soon", content="apple river", expires_at=LATER)])
        repo.search("apple")
        cache = vector_cache(repo)
        index = Postings(SCOPE)
        shared = content_hash(repo.get("n0"))
        with repo.kv.read() as old:
            numbers = [index.numbered(old, i) for i in range(14)]
            versions = index.versions_with_content(old, shared)
            before = cache.names(old, index)
            assert [before.number(i) for i in range(14)] == numbers  # read whole at the first miss
            repo.commit([Node(id="again", content=repo.get("n0").content)])  # a second version of n0's
            repo.forget("n3", reason="asked")
            repo.reindex_recall()  # numbers in another order now
            repo.search("apple")
            with repo.kv.read() as new:
                after = cache.names(new, index)
                assert [after.number(i) for i in range(14)] == [index.numbered(new, i) for i in range(14)]
                assert after.versions(shared) == index.versions_with_content(new, shared)
                assert len(after.versions(shared)) == len(versions) + 1
            older = cache.names(old, index)
            assert [older.number(i) for i in range(14)] == numbers
            assert older.versions(shared) == versions
            assert any(v is not None and v[2] != 2**63 - 1 for v in numbers)  # an expiry was read back


def test_the_names_of_a_store_read_whole_take_about_a_hundred_bytes_a_document(tmp_path: Path) -> None:
    """Both maps read whole at 3,000 documents: well under 100 bytes each besides its id
    (dictionaries of tuples took several hundred)."""
    count = 3000
    with Repo.init(tmp_path / "s", sync=False) as repo:
        repo.commit([Node(id=f"t{i % 10}/m{i:05d}", content=f"word{i % 97} apple") for i in range(count)])
        repo.search("apple", mode="lexical")
        index = Postings(SCOPE)
        with repo.kv.read() as txn:
            tracemalloc.start()
            try:
                memory = NameMemory()
                lookups = memory.names(txn, index)
                for i in range(count):  # past as many misses as pages: both maps read whole
                    lookups.number(i)
                del lookups
                held = tracemalloc.get_traced_memory()[0]
            finally:
                tracemalloc.stop()
            assert memory.names(txn, index).number(count - 1) is not None
    ids = len("t0/m00000")
    assert held / count <= 90 + ids, f"{held / count:.0f} bytes a document"

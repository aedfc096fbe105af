"""Incremental maintenance: ``forget`` of a claim updates the claim index where it was, and
``search(valid_at=)`` judges claims in force without decoding candidates.

The claim index is derived: after any sequence of claim commits, merges that record
contradictions and erasures, it must equal a from-scratch rebuild (``fsck`` compares
the derived indexes with one), and facts and timelines must read the same after
``reindex``. A valid-time search must answer what filtering an unfiltered search by
the claims in force would.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import clocks
from support.tiers import examples

from mnemosyne import Claim, Node, Redacted, Repo
from mnemosyne.store.object_store import ObjectStore

Clock = partial(clocks.Clock, start=datetime(2026, 9, 1, tzinfo=UTC))
DAY0 = datetime(2026, 1, 1, tzinfo=UTC)
DAYS = [DAY0 + timedelta(days=d) for d in range(6)]
SUBJECTS = ("mira", "noor")
PREDICATES = ("city", "team")
VALUES = ("oslo", "bergen", "lima")
PROBES = [DAY0 - timedelta(days=1), *DAYS, *(d + timedelta(hours=12) for d in DAYS)]
GONE = DAY0 - timedelta(days=30)
"""An ``expires_at`` before every reading of the store's clock: such a claim is never live."""


def claim_node(node_id: str, subject: str, predicate: str, value: str, start: int, end: int | None) -> Node:
    valid_to = DAYS[end] if end is not None and end > start else None
    return Node(id=node_id, kind="claim", content=Claim(subject, predicate, value, DAYS[start], valid_to))


def commit_all(repo: Repo, nodes: list[Node], **kw: Any) -> None:
    """Commit ``nodes``, in as many commits as it takes for no two of one to start together on one attribute.

    (Within a commit that is refused whatever the claim-conflict policy; across commits
    ``keep`` lets both stand.)
    """
    while nodes:
        batch: dict[Any, Node] = {}
        rest = []
        for node in nodes:
            claim = node.content
            key = (claim.subject, claim.predicate, claim.valid_from) if isinstance(claim, Claim) else node.id
            if key in batch:
                rest.append(node)
            else:
                batch[key] = node
        repo.commit(list(batch.values()), on_claim_conflict="keep", allow_empty=True, **kw)
        nodes = rest


def answers(repo: Repo, at: str) -> list[Any]:
    """Every fact and timeline of the snapshot ``at``, at every probe."""
    out: list[Any] = []
    for subject in SUBJECTS:
        for predicate in PREDICATES:
            out.append(repo.timeline(subject, predicate, at=at))
            out.extend(repo.facts(subject, predicate, valid_at=t, at=at) for t in PROBES)
    return out


def mentioned(repo: Repo, at: str) -> set[str]:
    """The hashes of every claim version the facts and timelines of ``at`` name."""
    found = set()
    for entry in answers(repo, at):
        found.update(f.node.hash for f in entry)
    return found


# -- forget of a claim: the claim index updated where it was equals a rebuild --------------------

claim_specs = st.tuples(
    st.integers(0, 3),  # which id of the branch
    st.sampled_from(SUBJECTS),
    st.sampled_from(PREDICATES),
    st.sampled_from(VALUES),
    st.integers(0, len(DAYS) - 2),
    st.one_of(st.none(), st.integers(1, len(DAYS) - 1)),
)
steps = st.one_of(
    st.tuples(
        st.just("commit"), st.sampled_from(["main", "side"]), st.lists(claim_specs, min_size=1, max_size=3)
    ),
    st.tuples(st.just("delete"), st.sampled_from(["main", "side"]), st.integers(0, 3)),
    st.tuples(st.just("merge")),
    st.tuples(st.just("forget"), st.integers(0, 7), st.booleans()),
)


@pytest.mark.slow
@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(steps, min_size=2, max_size=9))
def test_claim_index_after_forget_equals_a_rebuild(script: list[tuple[Any, ...]]) -> None:
    with Repo.in_memory(clock=Clock(), embedder="none") as repo:
        repo.commit([Node(id="base", content="start")], message="base")
        repo.branch("side")
        written: list[str] = []  # ids in the order first written
        erased: set[str] = set()  # hashes of erased claim versions
        for step_number, step in enumerate(script):
            if step[0] == "commit":
                _, branch, specs = step
                nodes = {}
                for slot, subject, predicate, value, start, end in specs:
                    # Never the bytes of an erased version again: those would be stored
                    # anew, and a rebuild would index them in the commits before too.
                    value = f"{value} {len(written)}:{step_number}"
                    node = claim_node(f"{branch}/{slot}", subject, predicate, value, start, end)
                    nodes[node.id] = node
                    written += [node.id] if node.id not in written else []
                commit_all(repo, list(nodes.values()), branch=branch)
            elif step[0] == "delete":
                _, branch, slot = step
                try:
                    present = repo.get(f"{branch}/{slot}", at=branch) is not None
                except Redacted:
                    present = True  # erased, still in that branch's tree
                if present:
                    repo.commit(delete=[f"{branch}/{slot}"], branch=branch)
            elif step[0] == "merge":
                # Claims on one attribute from both sides are contradictions the merge
                # records (a conflict is left only by a forget dropping an id from main).
                repo.merge("side", strategy="theirs")
            else:
                _, pick, one = step
                if not written:
                    continue
                node_id = written[pick % len(written)]
                versions = [v for v in repo.history(node_id, at="side") + repo.history(node_id) if v.node]
                if one and versions:
                    repo.forget(node_id, "asked to", version=versions[0].hash)
                    erased.add(versions[0].hash)
                else:
                    report = repo.forget(node_id, "asked to")
                    erased.update(r.hash for r in report.redactions)
                report = repo.fsck()
                assert report.ok, report.problems  # the derived indexes equal a rebuild
        before = {branch: answers(repo, branch) for branch in ("main", "side")}
        assert not erased & (mentioned(repo, "main") | mentioned(repo, "side"))
        assert repo.fsck().ok
        repo.reindex()
        assert {branch: answers(repo, branch) for branch in ("main", "side")} == before


def test_forget_of_a_claim_in_an_old_commit_leaves_no_claim_tree_naming_it() -> None:
    with Repo.in_memory(clock=Clock(), embedder="none") as repo:
        first = repo.commit([claim_node("c/old", "mira", "city", "oslo", 0, None)])
        repo.branch("side")
        for i in range(1, 4):
            repo.commit([claim_node(f"c/{i}", "mira", "team", VALUES[i % 3], i, None)])
        repo.commit([claim_node("c/old", "mira", "city", "lima", 1, None)], branch="side")
        old = repo.get("c/old")
        assert old is not None
        repo.forget("c/old", "asked to")
        for at in (first.id, "main", "side"):
            assert repo.facts("mira", "city", valid_at=DAYS[2], at=at) == []
            assert repo.timeline("mira", "city", at=at) == []
        assert repo.fsck().ok
        assert [f.id for f in repo.timeline("mira", "team")] == ["c/1", "c/2", "c/3"]


def test_forget_of_a_claim_reads_no_commit_history(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the commits whose snapshots held it are touched: no replay of history."""
    with Repo.in_memory(clock=Clock(), embedder="none") as repo:
        for i in range(30):
            repo.commit(
                [claim_node(f"c/{i}", "mira", "team", VALUES[i % 3], i % 5, None)], on_claim_conflict="keep"
            )
        repo.commit([claim_node("c/new", "noor", "city", "oslo", 0, None)])
        reads = 0
        load = ObjectStore.commit

        def counted(self: ObjectStore, txn: Any, oid: bytes) -> Any:
            nonlocal reads
            reads += 1
            return load(self, txn, oid)

        monkeypatch.setattr(ObjectStore, "commit", counted)
        repo.forget("c/new", "asked to")
        monkeypatch.undo()
        assert reads <= 5, reads  # a rebuild reads all 32
        assert repo.fsck().ok
        assert repo.facts("noor", "city", valid_at=DAYS[1]) == []


def test_forget_expired_claims_updates_the_claim_index() -> None:
    with Repo.in_memory(clock=Clock(), embedder="none") as repo:
        gone = claim_node("c/gone", "mira", "city", "oslo", 0, None)
        repo.commit([Node(id=gone.id, kind="claim", content=gone.content, expires_at=GONE)])
        repo.commit([claim_node("c/kept", "mira", "city", "lima", 1, None)])
        report = repo.forget_expired()
        assert [r.id for r in report.redactions] == ["c/gone"]
        assert repo.fsck().ok
        assert [f.id for f in repo.timeline("mira", "city")] == ["c/kept"]


# -- search(valid_at=): what filtering an unfiltered search by the claims in force gives --------

search_claims = st.lists(
    st.tuples(
        st.sampled_from(SUBJECTS),
        st.sampled_from(PREDICATES),
        st.sampled_from(VALUES),
        st.integers(0, len(DAYS) - 2),
        st.one_of(st.none(), st.integers(1, len(DAYS) - 1)),
        st.booleans(),  # expired
    ),
    min_size=1,
    max_size=12,
)


def in_force(repo: Repo, hits: list[Any], valid_at: datetime) -> set[str]:
    """Hashes of the hits' claims in force at ``valid_at``, from the timelines' effective intervals."""
    found = set()
    for subject in SUBJECTS:
        for predicate in PREDICATES:
            for fact in repo.timeline(subject, predicate):
                end = fact.effective_to
                if fact.effective_from <= valid_at and (end is None or valid_at < end):
                    found.add(fact.node.hash)
    return found


@pytest.mark.slow
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(search_claims, st.integers(1, 3))
def test_search_valid_at_equals_a_filtered_unfiltered_search(specs: list[Any], batches: int) -> None:
    with Repo.in_memory(clock=Clock(), embedder="hash") as repo:
        nodes = []
        for i, (subject, predicate, value, start, end, expired) in enumerate(specs):
            node = claim_node(f"c/{i}", subject, predicate, value, start, end)
            nodes.append(
                Node(
                    id=node.id,
                    kind="claim",
                    content=node.content,
                    meta={"team": "a"},
                    expires_at=GONE if expired else None,
                )
            )
        nodes.append(Node(id="note", content="mira noor oslo bergen lima city team", meta={"team": "a"}))
        for b in range(batches):  # spread over commits: versions superseded, ids replaced
            commit_all(repo, [n for i, n in enumerate(nodes) if i % batches == b])
        if len(nodes) > 3:  # a second version of an id: the first is no longer in the snapshot
            again = claim_node("c/0", "mira", "city", "lima", 2, None)
            repo.commit(
                [Node(id="c/0", kind="claim", content=again.content, meta={"team": "a"})],
                on_claim_conflict="keep",
            )
        query = "mira noor oslo bergen lima city team"
        everything = repo.search(query, k=100, mode="lexical")
        for valid_at in PROBES:
            force = in_force(repo, everything, valid_at)
            expected = [h.hash for h in everything if h.node.kind == "note" or h.hash in force]
            got = repo.search(query, k=100, mode="lexical", valid_at=valid_at)
            assert [h.hash for h in got] == expected, valid_at
            claims_only = repo.search(query, k=100, mode="lexical", valid_at=valid_at, kind="claim")
            assert [h.hash for h in claims_only] == [h for h in expected if h in force]
            # The meta filter reads every candidate whole: the same answer either way.
            whole = repo.search(query, k=100, mode="lexical", valid_at=valid_at, meta={"team": "a"})
            assert [h.hash for h in whole] == expected
            hybrid = repo.search(query, k=100, valid_at=valid_at)
            assert {h.hash for h in hybrid} == set(expected)


def test_search_valid_at_decodes_the_hits_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Candidates are judged from their raw bytes: a long timeline costs no decoding."""
    with Repo.in_memory(clock=Clock(), embedder="none") as repo:
        repo.commit(
            [
                Node(
                    id=f"mira/city/{v:03d}",
                    kind="claim",
                    content=Claim("mira", "city", f"city {v}", DAY0 + timedelta(days=v)),
                )
                for v in range(60)
            ]
        )
        repo.search("warm up")  # the recall index catches up with the commit, reading every node
        decoded = 0
        node = ObjectStore.node

        def counted(self: ObjectStore, txn: Any, oid: bytes) -> Any:
            nonlocal decoded
            decoded += 1
            return node(self, txn, oid)

        monkeypatch.setattr(ObjectStore, "node", counted)
        [hit] = repo.search("mira city", k=1, valid_at=DAY0 + timedelta(days=7, hours=1))
        monkeypatch.undo()
        assert hit.id == "mira/city/007"
        assert decoded <= 2, decoded  # the hit; once decoded every rejected candidate too

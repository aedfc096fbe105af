"""Claims erased on one store and brought by fetch or push: the claim index drops just them.

The store receiving the redaction records updates the claim trees of the commits
that held an erased claim (as ``forget`` does), rather than rebuilding every
derived index; ``fsck`` compares the result with a rebuild from scratch.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.clocks import Clock
from support.tiers import examples

from mnemosyne import Claim, Node, Redacted, Repo

pytestmark = pytest.mark.slow  # stores on disk, cloned and fetched per example

START = datetime(2026, 1, 1, tzinfo=UTC)
SUBJECTS = ["mira", "jon"]
PREDICATES = ["city", "team"]


def _claim(i: int, subject: str, predicate: str, value: int) -> Node:
    made = Claim(subject, predicate, value, valid_from=START + timedelta(days=value))
    return Node(id=f"claims/{subject}/{predicate}/{i}", kind="claim", content=made)


def _facts(repo: Repo, at: str) -> list[tuple[str, str]]:
    return sorted(
        (fact.id, fact.node.hash)
        for subject in SUBJECTS
        for fact in repo.facts(subject, at=at, valid_at=START + timedelta(days=400))
    )


_writes = st.lists(
    st.tuples(st.sampled_from(SUBJECTS), st.sampled_from(PREDICATES), st.integers(0, 300)),
    min_size=2,
    max_size=8,
)


_SLOW_OK = [HealthCheck.function_scoped_fixture]


@settings(max_examples=examples(12), deadline=None, suppress_health_check=_SLOW_OK)
@given(writes=_writes, erase_count=st.integers(1, 3), by_push=st.booleans())
def test_erased_claims_leave_the_receivers_claim_index_exactly(
    tmp_path_factory, writes, erase_count, by_push
):
    root = tmp_path_factory.mktemp("claims")
    with Repo.init(root / "a", clock=Clock()) as a:
        for i, (subject, predicate, value) in enumerate(writes):  # one commit each: many claim trees
            a.commit([_claim(i, subject, predicate, value)], message=f"w{i}", author="a")
        b = Repo.clone(root / "a", root / "b")
        b.close()
        gone = [f"claims/{s}/{p}/{i}" for i, (s, p, _) in enumerate(writes)][:erase_count]
        erased = {r.hash for r in a.forget(gone, "asked to", author="dpo").redactions}
        if by_push:
            a.store.add_remote("b", root / "b")
            assert a.push("b").tenants[0].redactions == len(erased)
        with Repo.open(root / "b") as b:
            if not by_push:
                assert b.fetch("origin").tenants[0].redactions == len(erased)
                b.pull()
            report = b.fsck()  # the claim index equals one rebuilt from scratch
            assert report.ok, report.problems
            tip = a.resolve("HEAD").id
            assert b.resolve("main").id == tip
            for back in range(len(writes) + 1):  # every snapshot's facts, as on the erasing side
                assert _facts(b, f"main~{back}") == _facts(a, f"{tip}~{back}")
            assert set(b.redactions(erased)) == erased
            for node_id in gone:
                with pytest.raises(Redacted):
                    b.get(node_id, at="main~1")

"""Recall scoped to a use, a sensitivity and a freshness, before ranking, exact top-k as ever.

A memory's ``meta["allowed_for"]`` lists the uses it may serve; ``meta["sensitivity"]``
is a level on the store's scale; ``verified_within`` asks for memories written or
verified lately. Each filter applies before ranking, so a filtered search returns
exactly the best k of what passes, which the property test checks against the
unfiltered ranking.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.clocks import Clock
from support.tiers import examples

from mnemosyne import InvalidInput, Node, Repo

DAY = timedelta(days=1)
SCALE = ["public", "internal", "personal", "restricted"]
WORDS = ["apple", "pear", "plum", "fig", "kiwi", "lime"]

uses = st.sampled_from([None, [], ["support"], ["billing"], ["support", "billing"]])
labels = st.sampled_from([None, *SCALE, "secret"])  # "secret" is off the scale
memory = st.tuples(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    uses,
    labels,
    st.integers(0, 30),  # days before the end it was written
    st.one_of(st.none(), st.integers(0, 30)),  # days before the end it was verified, if it was
)


def labelled(i: int, words: list[str], allowed: list[str] | None, level: str | None) -> Node:
    meta: dict[str, Any] = {}
    if allowed is not None:
        meta["allowed_for"] = allowed
    if level is not None:
        meta["sensitivity"] = level
    return Node(id=f"m/{i:02d}", content=" ".join(words), meta=meta or None)


def passes(
    node: Node, confirmed_days_ago: int, use: str | None, most: str | None, within: int | None, require: bool
) -> bool:
    """The rules, written out independently of the library."""
    meta = node.meta or {}
    if use is not None:
        if "allowed_for" not in meta:
            if require:
                return False
        elif use not in meta["allowed_for"]:
            return False
    if most is not None:
        label = meta.get("sensitivity", "internal")
        level = SCALE.index(label) if label in SCALE else len(SCALE) - 1
        if level > SCALE.index(most):
            return False
    return within is None or confirmed_days_ago <= within


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    memories=st.lists(memory, min_size=1, max_size=14),
    use=st.sampled_from([None, "support", "billing"]),
    most=st.sampled_from([None, *SCALE]),
    within=st.sampled_from([None, 0, 10, 25]),
    require=st.booleans(),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=2),
    k=st.integers(1, 6),
)
def test_a_scoped_search_is_the_top_k_of_the_unscoped_ranking_that_passes(
    memories: list[tuple[list[str], Any, Any, int, int | None]],
    use: str | None,
    most: str | None,
    within: int | None,
    require: bool,
    query: list[str],
    k: int,
) -> None:
    clock = Clock(step=timedelta(0))
    end = clock.now + 40 * DAY
    with Repo.in_memory(clock=clock, embedder="hash") as repo:
        repo.config("recall.require_allowed_for", "true" if require else "false")
        nodes = [
            labelled(i, words, allowed, level) for i, (words, allowed, level, _, _) in enumerate(memories)
        ]
        confirmed: dict[str, int] = {}
        # Writes and verifications in time order (oldest first), each its own commit.
        events = sorted(
            [(written, "write", i) for i, (*_, written, _) in enumerate(memories)]
            + [(checked, "verify", i) for i, (*_, checked) in enumerate(memories) if checked is not None],
            key=lambda event: (-event[0], event[1] == "verify", event[2]),
        )
        for days_ago, what, i in events:
            clock.now = end - days_ago * DAY
            node = nodes[i]
            if what == "write":
                repo.commit([node])
                confirmed[node.id] = days_ago
            elif node.id in confirmed:  # a verification before the write has nothing to verify
                repo.verify(node.id)
                confirmed[node.id] = days_ago
        clock.now = end
        text = " ".join(query)
        window = within * DAY if within is not None else None
        scoped = {"allowed_for": use, "max_sensitivity": most, "verified_within": window}
        for mode in ("lexical", "semantic"):
            everything = repo.search(text, k=len(nodes), mode=mode)
            by_id = {n.id: n for n in nodes}
            want = [
                h.id for h in everything if passes(by_id[h.id], confirmed[h.id], use, most, within, require)
            ][:k]
            got = repo.search(text, k=k, mode=mode, **scoped)
            assert [h.id for h in got] == want, mode
            # Commits at one clock reading are nudged apart by microseconds (record time strictly increases).
            assert all(
                abs(h.confirmed_at - (end - confirmed[h.id] * DAY)) < timedelta(seconds=1) for h in got
            )


def test_allowed_for_keeps_a_preference_from_becoming_a_permission() -> None:
    with Repo.in_memory(embedder="none") as repo:
        repo.commit(
            [
                Node(id="a/support", content="tea preference", meta={"allowed_for": ["support"]}),
                Node(id="a/marketing", content="tea preference", meta={"allowed_for": ["marketing"]}),
                Node(id="a/any", content="tea preference"),
            ]
        )
        assert {h.id for h in repo.search("tea", allowed_for="support")} == {"a/support", "a/any"}
        assert {h.id for h in repo.search("tea")} == {"a/support", "a/marketing", "a/any"}
        repo.config("recall.require_allowed_for", "true")
        assert {h.id for h in repo.search("tea", allowed_for="support")} == {"a/support"}
        assert {h.id for h in repo.search("tea")} == {"a/support", "a/marketing", "a/any"}  # no use asked
        built = repo.context("tea", allowed_for="marketing")
        assert [item.id for item in built.items] == ["a/marketing"]
        assert [n.id for n in repo.nodes(prefix="a/", allowed_for="marketing")] == ["a/marketing"]


def test_sensitivity_scale_defaults_and_settings() -> None:
    with Repo.in_memory(embedder="none") as repo:
        levels = ["public", "internal", "personal", "restricted", "medical", None]
        repo.commit(
            [
                Node(
                    id=f"s/{level or 'unlabeled'}",
                    content="note",
                    meta={"sensitivity": level} if level else None,
                )
                for level in levels
            ]
        )

        def shown(most: str) -> set[str]:
            return {h.id.removeprefix("s/") for h in repo.search("note", max_sensitivity=most)}

        assert shown("public") == {"public"}  # unlabeled counts as internal: not public
        assert shown("internal") == {"public", "internal", "unlabeled"}
        assert shown("personal") == {"public", "internal", "unlabeled", "personal"}
        assert shown("restricted") == set(levels_named(levels))  # off the scale: the most sensitive
        with pytest.raises(InvalidInput, match="public, internal, personal, restricted"):
            repo.search("note", max_sensitivity="secret")
        repo.config("recall.unlabeled_sensitivity", "public")
        assert shown("public") == {"public", "unlabeled"}
        repo.config("recall.sensitivity_levels", "open, medical ,closed")
        assert repo.config("recall.sensitivity_levels") == "open,medical,closed"
        # "public" is off the new scale, so unlabeled memories count as the most sensitive.
        assert shown("medical") == {"medical"}
        assert shown("closed") == set(levels_named(levels))
        with pytest.raises(InvalidInput, match="open, medical, closed"):
            repo.search("note", max_sensitivity="public")
        for key, value in [
            ("recall.require_allowed_for", "yes"),
            ("recall.sensitivity_levels", "only"),
            ("recall.sensitivity_levels", "a,,b"),
            ("recall.unlabeled_sensitivity", ""),
        ]:
            with pytest.raises(InvalidInput, match=key):
                repo.config(key, value)


def levels_named(levels: list[str | None]) -> list[str]:
    return [level or "unlabeled" for level in levels]


def test_labels_are_checked_when_written() -> None:
    with Repo.in_memory(embedder="none") as repo:
        for meta, rule in [
            ({"allowed_for": "support"}, "allowed_for must be a list"),
            ({"allowed_for": ["support", ""]}, "allowed_for must be a list"),
            ({"allowed_for": [3]}, "allowed_for must be a list"),
            ({"sensitivity": 2}, "sensitivity must be a string"),
        ]:
            with pytest.raises(InvalidInput, match=rule):
                repo.commit([Node(id="k", content="v", meta=meta)])
        assert repo.branch_tips() == []  # nothing was written
        repo.commit([Node(id="k", content="v", meta={"allowed_for": [], "sensitivity": "personal"})])
        assert repo.search("v", allowed_for="support") == []  # an empty list allows no use
        with pytest.raises(InvalidInput, match="allowed_for"):
            repo.search("v", allowed_for="")
        with pytest.raises(InvalidInput, match="max_sensitivity"):
            repo.search("v", max_sensitivity=2)  # type: ignore[arg-type]

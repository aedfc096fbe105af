"""Claims and valid time: facts, timelines, claim conflicts, gaps, validation, and a bitemporal model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from functools import partial

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import clocks
from support.clocks import T0
from support.tiers import examples

from mnemosyne import Claim, ClaimConflict, InvalidInput, Node, NotFound, Provenance, Repo

Clock = partial(clocks.Clock, start=datetime(2026, 9, 1, tzinfo=UTC))


def utc(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def claim_node(node_id, value, valid_from, valid_to=None, subject="mira", predicate="deadline", **kw):
    return Node(
        id=node_id,
        kind="claim",
        content=Claim(subject, predicate, value, valid_from, valid_to),
        **kw,
    )


def ids_of(items):
    """The sorted ids of nodes or facts."""
    return sorted(n.id for n in items)


def nodes_of(facts):
    """The claim node of each fact."""
    return [f.node for f in facts]


# -- the passport scenario -------------------------------------------------------------------

SUBJECT, PREDICATE = "mira", "passport_deadline"
E0, E1, E2 = (f"acme/mira/passport_deadline/{e}" for e in ("e0", "e1", "e2"))


def passport(node_id, value, valid_from, step, observation):
    return Node(
        id=node_id,
        kind="claim",
        content=Claim(SUBJECT, PREDICATE, value, utc(valid_from)),
        provenance=Provenance(agent_step=step, observation=observation, tool_call=None, source="chat"),
        event_time=utc(valid_from),
    )


@pytest.fixture
def acme(tmp_path):
    path = tmp_path / "store"
    Repo.init(path, sync=False).close()
    with pytest.raises(NotFound):
        Repo.open(path, tenant="acme")
    repo = Repo.open(path, tenant="acme", create=True, clock=Clock(), sync=False)
    yield repo
    repo.close()


def write_passport(repo):
    e1 = passport(E1, "2026-07-15", "2026-06-01T09:00:00Z", 3, "e1")
    c1 = repo.commit([e1], message="e1", author="agent-7")
    e2 = passport(E2, "2026-06-30", "2026-06-03T10:00:00Z", 5, "e2")
    c2 = repo.commit([e2], message="e2", author="agent-7")
    e0 = passport(E0, "2026-08-01", "2026-05-30T08:00:00Z", 6, "e0")  # recorded last, valid first
    c0 = repo.commit([e0], message="e0 (delayed)", author="agent-7")
    return (e0, e1, e2), (c0, c1, c2)


def test_passport_facts_at_valid_times(acme):
    (e0, e1, e2), (c0, c1, c2) = write_passport(acme)
    assert acme.tenant == "acme"

    at_0604 = acme.facts(SUBJECT, PREDICATE, valid_at=utc("2026-06-04T00:00:00Z"))
    assert nodes_of(at_0604) == [e2]
    [fact] = at_0604
    assert fact.id == E2
    assert fact.node.provenance == Provenance(agent_step=5, observation="e2", source="chat")
    assert fact.node.content.value == "2026-06-30"
    assert fact.commit.id == c2.id and fact.commit.message == "e2"
    assert (fact.effective_from, fact.effective_to) == (utc("2026-06-03T10:00:00Z"), None)
    assert fact.supersedes == E1
    # valid_at may be RFC 3339 text as well as a datetime
    assert acme.facts(SUBJECT, PREDICATE, valid_at="2026-06-04T00:00:00Z") == at_0604
    assert nodes_of(acme.facts(SUBJECT, PREDICATE, valid_at=utc("2026-06-02T00:00:00Z"))) == [e1]
    assert nodes_of(acme.facts(SUBJECT, PREDICATE, valid_at=utc("2026-05-31T00:00:00Z"))) == [e0]
    assert acme.facts(SUBJECT, PREDICATE, valid_at=utc("2026-05-29T00:00:00Z")) == []
    # boundaries are half-open: a claim is in force from its valid_from
    assert nodes_of(acme.facts(SUBJECT, PREDICATE, valid_at=utc("2026-06-03T10:00:00Z"))) == [e2]
    assert nodes_of(acme.facts(SUBJECT, PREDICATE, valid_at=utc("2026-06-03T09:59:59.999999Z"))) == [e1]
    assert nodes_of(acme.facts(SUBJECT, PREDICATE, valid_at=utc("2026-05-30T08:00:00Z"))) == [e0]
    # no predicate: every attribute of the subject; an unknown subject has none
    assert nodes_of(acme.facts(SUBJECT, valid_at=utc("2026-06-04T00:00:00Z"))) == [e2]
    assert acme.facts("somebody-else", valid_at=utc("2026-06-04T00:00:00Z")) == []
    assert acme.facts(SUBJECT, "other", valid_at=utc("2026-06-04T00:00:00Z")) == []

    # record time: before e0 was recorded, May 31 had no answer; before e2, June 4 was e1
    assert acme.facts(SUBJECT, PREDICATE, valid_at=utc("2026-05-31T00:00:00Z"), as_of=c2.record_time) == []
    assert nodes_of(
        acme.facts(SUBJECT, PREDICATE, valid_at=utc("2026-06-04T00:00:00Z"), as_of=c1.record_time)
    ) == [e1]
    assert nodes_of(
        acme.facts(SUBJECT, PREDICATE, valid_at=utc("2026-06-04T00:00:00Z"), as_of=c0.record_time)
    ) == [e2]
    with pytest.raises(NotFound):
        acme.facts(SUBJECT, PREDICATE, as_of=c1.record_time - timedelta(microseconds=1))


def test_passport_timeline(acme):
    (e0, e1, e2), (c0, c1, c2) = write_passport(acme)
    timeline = acme.timeline(SUBJECT, PREDICATE)
    assert [f.id for f in timeline] == [E0, E1, E2]
    assert [f.node for f in timeline] == [e0, e1, e2]
    assert [(f.effective_from, f.effective_to) for f in timeline] == [
        (utc("2026-05-30T08:00:00Z"), utc("2026-06-01T09:00:00Z")),
        (utc("2026-06-01T09:00:00Z"), utc("2026-06-03T10:00:00Z")),
        (utc("2026-06-03T10:00:00Z"), None),
    ]
    assert [f.commit.id for f in timeline] == [c0.id, c1.id, c2.id]
    assert [f.commit.message for f in timeline] == ["e0 (delayed)", "e1", "e2"]
    # e2 replaced e1's value; the delayed e0 slots in before e1 and replaces nothing,
    # and e1 did not replace e0 (e0 was recorded after it)
    assert [f.supersedes for f in timeline] == [None, None, E1]

    # as of before e0 was recorded, the timeline had two claims and e1 was open-ended until e2
    earlier = acme.timeline(SUBJECT, PREDICATE, as_of=c1.record_time)
    assert [(f.id, f.effective_to) for f in earlier] == [(E1, None)]
    assert acme.timeline(SUBJECT, "nothing") == []


def test_passport_equal_valid_from_conflict_policies(acme):
    (_e0, e1, e2), _ = write_passport(acme)
    tip = acme.resolve("HEAD").id
    e3 = passport("acme/mira/passport_deadline/e3", "2026-07-01", "2026-06-03T10:00:00Z", 7, "e3")
    with pytest.raises(ClaimConflict):
        acme.commit([e3], message="e3")
    assert acme.resolve("HEAD").id == tip  # nothing written
    # same start, same value: not a conflict
    same = passport("acme/mira/passport_deadline/e2-again", "2026-06-30", "2026-06-03T10:00:00Z", 7, "x")
    c_same = acme.commit([same])
    june4 = utc("2026-06-04T00:00:00Z")
    assert ids_of(acme.facts(SUBJECT, PREDICATE, valid_at=june4)) == sorted([E2, same.id])
    acme.reset("main", tip)
    assert c_same.id != acme.resolve("HEAD").id

    with pytest.raises(InvalidInput):
        acme.commit([e3], on_claim_conflict="overwrite")

    kept = acme.commit([e3], message="keep both", on_claim_conflict="keep")
    assert ids_of(acme.facts(SUBJECT, PREDICATE, valid_at=june4)) == sorted([E2, e3.id])
    assert nodes_of(acme.facts(SUBJECT, PREDICATE, valid_at=utc("2026-06-02T00:00:00Z"))) == [e1]
    assert {f.id: f.effective_to for f in acme.timeline(SUBJECT, PREDICATE)}[E1] == utc(
        "2026-06-03T10:00:00Z"
    )

    acme.reset("main", tip)
    replaced = acme.commit([e3], message="replace", on_claim_conflict="replace")
    assert nodes_of(acme.facts(SUBJECT, PREDICATE, valid_at=june4)) == [e3]
    assert acme.get(E2) is None  # removed in the same commit
    assert acme.get(E2, at=kept.id) == e2
    assert [f.id for f in acme.timeline(SUBJECT, PREDICATE)] == [E0, E1, e3.id]
    assert [c.id for c in acme.diff(tip, replaced.id).removed] == [E2]

    # correcting the claim itself (same id) is never a conflict
    fixed = passport(e3.id, "2026-07-02", "2026-06-03T10:00:00Z", 8, "e3 fixed")
    acme.commit([fixed])
    assert nodes_of(acme.facts(SUBJECT, PREDICATE, valid_at=june4)) == [fixed]

    # two claims in one commit with the same start and different values: always refused
    a = passport("acme/x/a", "1", "2026-07-01T00:00:00Z", 1, "a")
    b = passport("acme/x/b", "2", "2026-07-01T00:00:00Z", 1, "b")
    for policy in ("refuse", "keep", "replace"):
        with pytest.raises(ClaimConflict):
            acme.commit([a, b], on_claim_conflict=policy)


def test_claim_conflict_spares_claims_removed_or_corrected_in_the_same_commit():
    repo = Repo.in_memory(clock=Clock())
    start = T0
    repo.commit([claim_node("c/1", "x", start)])
    # the old claim is removed in the same commit: no conflict
    repo.commit([claim_node("c/2", "y", start)], delete=["c/1"])
    assert ids_of(repo.facts("mira", "deadline", valid_at=start)) == ["c/2"]
    # the old claim is moved to another start in the same commit: no conflict
    repo.commit([claim_node("c/3", "z", start), claim_node("c/2", "y", start - timedelta(days=1))])
    assert ids_of(repo.facts("mira", "deadline", valid_at=start)) == ["c/3"]
    # other predicates and subjects never conflict
    repo.commit(
        [claim_node("c/4", "w", start, predicate="other"), claim_node("c/5", "v", start, subject="bo")]
    )
    assert ids_of(repo.facts("mira", valid_at=start)) == ["c/3", "c/4"]


# -- valid_to and gaps ---------------------------------------------------------------------------


def test_valid_to_leaves_a_gap():
    repo = Repo.in_memory(clock=Clock())
    d = [T0 + timedelta(days=i) for i in range(10)]
    a = claim_node("g/a", "a", d[1], d[3])  # [1, 3)
    b = claim_node("g/b", "b", d[5])  # [5, ∞)
    c = claim_node("g/c", "c", d[7], d[8])  # [7, 8) — and after 8 nothing: b was cut short at 7
    repo.commit([a, b])
    repo.commit([c])

    def at(i, hours=0):
        return [f.id for f in repo.facts("mira", "deadline", valid_at=d[i] + timedelta(hours=hours))]

    assert at(0) == []
    assert at(1) == ["g/a"]
    assert at(2, 23) == ["g/a"]
    assert at(3) == []  # valid_to is exclusive
    assert at(4) == []
    assert at(5) == ["g/b"]
    assert at(7) == ["g/c"]
    assert at(8) == []  # c ended; b does not come back after a later claim ended
    assert at(9) == []
    assert [(f.id, f.effective_from, f.effective_to) for f in repo.timeline("mira", "deadline")] == [
        ("g/a", d[1], d[3]),
        ("g/b", d[5], d[7]),
        ("g/c", d[7], d[8]),
    ]
    # a gap is not supersession: b started after a ended by itself
    assert [f.supersedes for f in repo.timeline("mira", "deadline")] == [None, None, "g/b"]

    # a claim whose valid_to is later than the next claim's start is still cut short
    repo.commit([claim_node("g/a", "a2", d[1], d[6])])
    assert at(5) == ["g/b"]
    first = repo.timeline("mira", "deadline")[0]
    assert (first.id, first.effective_to) == ("g/a", d[5])


def test_valid_to_equal_to_next_start_is_not_superseded():
    """A claim that ends by itself exactly where the next begins was not cut short by it."""
    repo = Repo.in_memory(clock=Clock())
    d = [T0 + timedelta(days=i) for i in range(4)]
    repo.commit([claim_node("s/a", "a", d[0], d[2])])
    repo.commit([claim_node("s/b", "b", d[2])])
    timeline = repo.timeline("mira", "deadline")
    assert [(f.id, f.effective_to) for f in timeline] == [("s/a", d[2]), ("s/b", None)]
    assert [f.supersedes for f in timeline] == [None, None]


def test_default_valid_at_is_the_store_clock():
    clock = Clock(start=T0)
    repo = Repo.in_memory(clock=clock)
    repo.commit(
        [claim_node("n/1", "old", T0 - timedelta(days=10)), claim_node("n/2", "new", T0 + timedelta(days=1))]
    )
    assert [f.id for f in repo.facts("mira", "deadline")] == ["n/1"]
    clock.now = T0 + timedelta(days=2)
    assert [f.id for f in repo.facts("mira", "deadline")] == ["n/2"]


def test_expired_claims_are_not_in_force():
    clock = Clock(start=T0)
    repo = Repo.in_memory(clock=clock)
    later = T0 + timedelta(days=1)
    repo.commit(
        [
            claim_node("x/1", "first", T0 - timedelta(days=5)),
            claim_node("x/2", "second", T0 - timedelta(days=1), expires_at=later),
        ]
    )
    assert [f.id for f in repo.facts("mira", "deadline", valid_at=T0)] == ["x/2"]
    clock.now = later
    # once x/2 expires it counts as absent: the earlier claim is back in force
    assert [f.id for f in repo.facts("mira", "deadline", valid_at=T0)] == ["x/1"]
    assert [f.id for f in repo.timeline("mira", "deadline")] == ["x/1"]
    assert repo.timeline("mira", "deadline")[0].effective_to is None


# -- validation --------------------------------------------------------------------------------


@pytest.mark.parametrize("offset", [timedelta(0), timedelta(seconds=-1), timedelta(days=-3)])
def test_valid_to_must_follow_valid_from(offset):
    with pytest.raises(InvalidInput):
        Claim("s", "p", 1, T0, T0 + offset)
    Claim("s", "p", 1, T0, T0 + timedelta(microseconds=1))


@pytest.mark.parametrize("confidence", [-0.01, 1.01, 2, float("nan"), float("inf"), True, "0.5"])
def test_bad_confidence_refused(confidence):
    with pytest.raises(InvalidInput):
        Claim("s", "p", 1, T0, confidence=confidence)


@pytest.mark.parametrize("confidence", [0, 1, 0.0, 0.5, 1.0])
def test_confidence_bounds_kept_as_floats(confidence):
    claim = Claim("s", "p", 1, T0, confidence=confidence)
    assert claim.confidence == float(confidence) and isinstance(claim.confidence, float)


@pytest.mark.parametrize("text", ["a\x00b", "a\x01", "\x1f", "line\nbreak", "tab\there", "del\x7f", ""])
@pytest.mark.parametrize("field", ["subject", "predicate"])
def test_control_characters_refused_in_subject_and_predicate(text, field):
    args = {"subject": "s", "predicate": "p", field: text}
    with pytest.raises(InvalidInput):
        Claim(args["subject"], args["predicate"], 1, T0)
    with pytest.raises(InvalidInput):
        Node(kind="claim", content={**args, "value": 1, "valid_from": "2026-06-01T00:00:00Z"})


def test_claim_times_must_be_aware_and_are_normalised_to_utc():
    with pytest.raises(InvalidInput):
        Claim("s", "p", 1, datetime(2026, 6, 1))
    with pytest.raises(InvalidInput):
        Claim("s", "p", 1, T0, datetime(2026, 7, 1))
    east = datetime(2026, 6, 1, 11, tzinfo=timezone(timedelta(hours=2)))
    assert Claim("s", "p", 1, east).valid_from == T0
    assert Claim("s", "p", 1, east).valid_from.tzinfo == UTC


def test_claim_node_from_json_fields():
    node = Node(
        id="j/1",
        kind="claim",
        content={"subject": "mira", "predicate": "p", "value": [1, 2], "valid_from": "2026-06-03T10:00:00Z"},
    )
    assert node.content == Claim("mira", "p", [1, 2], utc("2026-06-03T10:00:00Z"))
    with pytest.raises(InvalidInput):
        Node(kind="claim", content={"subject": "mira", "predicate": "p", "value": 1})  # no valid_from
    with pytest.raises(InvalidInput):
        Node(kind="claim", content={"subject": "s", "predicate": "p", "value": 1, "valid_from": "x", "y": 2})
    with pytest.raises(InvalidInput):
        Node(content=Claim("s", "p", 1, T0))  # a Claim needs kind="claim"
    with pytest.raises(InvalidInput):
        Node(kind="claim", content="not a claim")


# -- a bitemporal model ------------------------------------------------------------------------

CLAIM_IDS = ["k/1", "k/2", "k/3", "k/4", "k/5"]
PREDICATES = ["p", "q"]
VALUES = ["a", "b", "c"]
TIMES = [T0 + timedelta(days=i) for i in range(6)]
PROBES = [TIMES[0] - timedelta(days=1)] + [
    t + delta for t in TIMES for delta in (timedelta(0), timedelta(hours=12))
]


def model_facts(state, predicate, t):
    """From the current claims, those with the greatest valid_from ≤ t whose valid_to is after t."""
    on = [(i, c) for i, c in state.items() if c.predicate == predicate and c.valid_from <= t]
    if not on:
        return []
    start = max(c.valid_from for _, c in on)
    return sorted(i for i, c in on if c.valid_from == start and (c.valid_to is None or c.valid_to > t))


def model_timeline(state, writers, predicate):
    """(id, effective_from, effective_to, supersedes) in timeline order."""
    entries = sorted(((c.valid_from, i, c) for i, c in state.items() if c.predicate == predicate))
    starts = sorted({c.valid_from for _, _, c in entries})
    out = []
    previous = None
    for start, node_id, claim in entries:
        later = [s for s in starts if s > start]
        end = later[0] if later else None
        if claim.valid_to is not None and (end is None or claim.valid_to < end):
            end = claim.valid_to
        supersedes = None
        if previous is not None:
            p_id, p_claim, p_end = previous
            cut_short = p_end == start and p_claim.valid_from < start
            cut_short = cut_short and (p_claim.valid_to is None or p_claim.valid_to > start)
            if cut_short and writers[p_id] < writers[node_id]:
                supersedes = p_id
        out.append((node_id, start, end, supersedes))
        previous = (node_id, claim, end)
    return out


def claim_conflict(state, puts, deletes, policy):
    """What the model expects of a commit: (raises ClaimConflict, ids the policy removes)."""
    by_start = {}
    for claim in puts.values():
        key = (claim.predicate, claim.valid_from)
        if key in by_start and by_start[key].value != claim.value:
            return True, []
        by_start[key] = claim
    removed = []
    for claim in puts.values():
        for other_id, other in state.items():
            if other_id in puts or other_id in deletes:
                continue
            if (other.predicate, other.valid_from) != (claim.predicate, claim.valid_from):
                continue
            if other.value == claim.value:
                continue
            if policy == "refuse":
                return True, []
            if policy == "replace" and other_id not in removed:
                removed.append(other_id)
    return False, removed


claim_specs = st.tuples(
    st.sampled_from(CLAIM_IDS),
    st.sampled_from(PREDICATES),
    st.sampled_from(VALUES),
    st.integers(0, len(TIMES) - 2),
    st.one_of(st.none(), st.integers(1, len(TIMES) - 1)),
)
commit_specs = st.tuples(
    st.lists(claim_specs, min_size=0, max_size=3, unique_by=lambda spec: spec[0]),
    st.lists(st.sampled_from(CLAIM_IDS), max_size=2, unique=True),
    st.sampled_from(["refuse", "keep", "replace"]),
)


def make_claim(predicate, value, start, end):
    valid_to = TIMES[end] if end is not None and end > start else None
    return Claim("subj", predicate, value, TIMES[start], valid_to)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(commit_specs, min_size=1, max_size=8))
def test_facts_and_timeline_against_a_bitemporal_model(script):
    repo = Repo.in_memory(clock=Clock())
    state: dict[str, Claim] = {}  # current claims by id
    writers: dict[str, int] = {}  # id -> index of the commit that wrote its current version
    history = []  # (record time, state, writers) after each commit
    for step, (specs, delete_pool, policy) in enumerate(script):
        puts = {node_id: make_claim(*rest) for node_id, *rest in specs}
        deletes = [i for i in delete_pool if i in state and i not in puts]
        nodes = [Node(id=i, kind="claim", content=c) for i, c in puts.items()]
        conflict, removed = claim_conflict(state, puts, deletes, policy)
        tip = repo.resolve("HEAD").id if history else None
        if conflict:
            with pytest.raises(ClaimConflict):
                repo.commit(nodes, deletes, on_claim_conflict=policy, allow_empty=True)
            assert (repo.resolve("HEAD").id if history else None) == tip
            continue
        commit = repo.commit(nodes, deletes, on_claim_conflict=policy, allow_empty=True)
        for node_id in deletes + removed:
            del state[node_id]
            del writers[node_id]
        for node_id, claim in puts.items():
            if state.get(node_id) != claim:
                writers[node_id] = step
            state[node_id] = claim
        history.append((commit.record_time, dict(state), dict(writers)))

        for predicate in PREDICATES:
            for t in PROBES:
                got = repo.facts("subj", predicate, valid_at=t)
                assert ids_of(got) == model_facts(state, predicate, t), (predicate, t)
                assert all(f.node.content == state[f.id] for f in got)
                # A fact (read by seeks) is exactly its entry on the timeline (read whole).
                on_timeline = {f.id: f for f in repo.timeline("subj", predicate)}
                assert all(f == on_timeline[f.id] for f in got), (predicate, t)
            timeline = repo.timeline("subj", predicate)
            assert [(f.id, f.effective_from, f.effective_to, f.supersedes) for f in timeline] == (
                model_timeline(state, writers, predicate)
            )
        for t in PROBES[::3]:
            everything = [i for p in PREDICATES for i in model_facts(state, p, t)]
            assert ids_of(repo.facts("subj", valid_at=t)) == sorted(everything)

    if not history:
        return
    # Bitemporal: "as of record time R, what did we believe held at valid time t?"
    with pytest.raises(NotFound):
        repo.facts("subj", "p", valid_at=TIMES[0], as_of=history[0][0] - timedelta(microseconds=1))
    for index, (recorded, state, writers) in enumerate(history):
        nxt = history[index + 1][0] if index + 1 < len(history) else recorded + timedelta(days=1)
        for as_of in (recorded, recorded + (nxt - recorded) / 2):
            for predicate in PREDICATES:
                for t in PROBES[::2]:
                    got = repo.facts("subj", predicate, valid_at=t, as_of=as_of)
                    assert ids_of(got) == model_facts(state, predicate, t), (index, predicate, t)
                    assert all(f.node.content == state[f.id] for f in got)
                timeline = repo.timeline("subj", predicate, as_of=as_of)
                assert [(f.id, f.effective_from, f.effective_to, f.supersedes) for f in timeline] == (
                    model_timeline(state, writers, predicate)
                )


def test_a_naive_valid_at_is_refused_by_its_own_name() -> None:
    with Repo.in_memory() as repo:
        repo.commit([Node(id="n", content="x")])
        naive = datetime(2026, 6, 1)
        with pytest.raises(InvalidInput, match=r"^valid_at is a naive datetime"):
            repo.facts("s", "p", valid_at=naive)
        with pytest.raises(InvalidInput, match=r"^valid_at is a naive datetime"):
            repo.search("x", valid_at=naive)
        with pytest.raises(InvalidInput, match=r"^as_of is a naive datetime"):
            repo.facts("s", "p", as_of=naive)
        # time text that does not parse is refused by the argument's name too
        with pytest.raises(InvalidInput, match=r"^valid_at: "):
            repo.facts("s", "p", valid_at="not a time")
        with pytest.raises(InvalidInput, match=r"^as_of: "):
            repo.facts("s", "p", as_of="2026-06-01T00:00:00")  # no offset

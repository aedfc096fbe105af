"""Does it return stale facts? bench/staleness.py on a small trace (100 people, hash embedder).

Mnemosyne's structured reads answer every question right; its recall never shows a
claim that did not hold at the time asked (superseded, deleted, erased); the naive
append-only baseline, on the same trace, does return outdated values, so this test
fails if the trace stops exercising corrections.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the staleness bench writes and queries a whole trace

BENCH = Path(__file__).resolve().parents[1] / "bench" / "staleness.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("staleness_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


@pytest.fixture(scope="module")
def world(bench, tmp_path_factory):
    trace = bench.make_trace(100)
    embedder = bench.HashEmbedder(bench.HASH_DIM)
    drift = bench.make_drift(trace)  # its re-confirmations are commits that change no memory
    repo = bench.write_store(trace, tmp_path_factory.mktemp("staleness") / "agent.mnemo", embedder, drift)
    index = {o.node_id: (f, o) for f, o in trace.observations}
    yield trace, repo, index, embedder
    repo.close()


def test_the_trace_corrects_delays_deletes_and_erases(bench, world):
    trace, *_ = world
    facts = trace.facts
    assert len(facts) == 100 * len(bench.ATTRIBUTES)
    corrections = [len(f.obs) - 1 for f in facts]
    assert set(corrections) == set(range(bench.MAX_CORRECTIONS + 1))
    late = [(f, o) for f in facts for o in f.obs if o.late]
    assert 0.05 < len(late) / sum(corrections) < 0.15
    for f, o in late:  # a delayed letter: valid before a claim the agent recorded earlier
        assert any(p.recorded < o.recorded and p.valid_from > o.valid_from for p in f.obs)
    assert sum(f.deleted is not None for f in facts) == round(0.05 * len(facts))
    assert sum(f.erased is not None for f in facts) == round(0.02 * len(facts))
    assert not any(f.deleted and f.erased for f in facts)
    # The same seed gives the same trace.
    again = bench.make_trace(100)
    assert [(o.node_id, o.value, o.valid_from, o.recorded) for _, o in again.observations] == [
        (o.node_id, o.value, o.valid_from, o.recorded) for _, o in trace.observations
    ]


def test_questions_tell_now_valid_time_and_record_time_apart(bench, world):
    trace, *_ = world
    questions, erased = bench.make_questions(trace)
    assert len(questions) == 3 * (len(trace.facts) - len(erased))
    by_kind = {kind: [q for q in questions if q.kind == kind] for kind in ("now", "at", "as_of")}
    now = {id(q.fact): q.want for q in by_kind["now"]}
    # Answers differ by kind of question, so a system that ignores valid or record time fails some.
    assert sum(q.want is not now[id(q.fact)] for q in by_kind["at"]) > 100
    assert sum(q.want is not now[id(q.fact)] for q in by_kind["as_of"]) > 100
    late_matters = [q for q in by_kind["now"] if q.want and any(o.late for o in q.fact.obs)
                    and max(q.fact.obs, key=lambda o: o.recorded) is not q.want]
    assert late_matters  # the last letter to arrive is not what holds now
    assert sum(q.want is None for q in by_kind["now"]) == round(0.05 * len(trace.facts))  # deleted


def test_structured_reads_answer_every_question(bench, world):
    trace, repo, index, _ = world
    questions, erased = bench.make_questions(trace)
    tally = bench.ask(bench.Structured(repo, index), questions, erased)
    each = len(questions) // 3
    assert dict(tally.asked) == {"now": each, "at": each, "as_of": each}
    assert dict(tally.wrong) == {}
    assert tally.not_in_force == 0
    assert (tally.erased, tally.leaked) == (len(erased), 0)


def test_recall_never_returns_a_superseded_deleted_or_erased_version(bench, world):
    trace, repo, index, _ = world
    questions, erased = bench.make_questions(trace, per_kind=40)
    tally = bench.ask(bench.Recall(repo, index), questions, erased)
    assert dict(tally.asked) == {"now": 40, "at": 40, "as_of": 40}
    assert dict(tally.outdated) == {}  # a miss names another fact; never an old value of this one
    assert tally.not_in_force == 0
    assert (tally.erased, tally.leaked) == (len(erased), 0)
    # It does answer: most questions about a fact that holds get that fact's value.
    holding = [q for q in questions if q.want is not None]
    assert tally.wrong["now"] + tally.wrong["at"] + tally.wrong["as_of"] < 0.6 * len(holding)
    # No filter and a wide net: an erased fact's sentences never come back.
    gone = {o.node_id for f in erased for o in f.obs}
    for fact in erased:
        hits = repo.search(f"{fact.name} {fact.attr.replace('_', ' ')}", k=20)
        assert not gone & {h.id for h in hits}


def test_the_naive_baseline_returns_stale_answers_on_the_same_trace(bench, world):
    trace, _, _, embedder = world
    questions, erased = bench.make_questions(trace)
    top1 = bench.ask(bench.Appended(trace, embedder, 1), questions, erased)
    latest = bench.ask(bench.Appended(trace, embedder, 5), questions, erased)
    for tally in (top1, latest):
        assert tally.rate(tally.outdated, "now") > 0.05  # outdated values returned as current
        assert tally.outdated["as_of"] > 0
        assert tally.not_in_force > 0
        assert tally.leaked > 0  # append-only: an erased fact is still there to find
    assert top1.rate(top1.outdated, "now") > 0.3


def test_the_verification_filter_prevents_stale_answers_about_unheard_changes(bench, world):
    trace, repo, index, _ = world
    drift = bench.make_drift(trace)
    holding = [f for f in trace.facts if bench.expected(f, trace.end) is not None]
    assert 0.10 < len(drift.changed) / len(holding) < 0.20
    assert 0.35 < len(drift.verified) / len(holding) < 0.65
    for fact, when in drift.verified.items():  # re-confirmed after hearing it, before any change
        assert max(o.recorded for o in fact.obs) < when < drift.changed.get(fact, trace.end)
    for fact, when in list(drift.verified.items())[:20]:  # the store says so
        (hit,) = repo.search(fact.name, k=1, prefix=bench.expected(fact, trace.end).node_id)
        assert hit.confirmed_at == when
    questions, _ = bench.make_questions(trace, per_kind=40)
    plain = bench.ask_unheard(bench.Recall(repo, index), questions, drift)
    fresh = bench.ask_unheard(bench.Fresh(repo, index), questions, drift)
    now = [q for q in questions if q.kind == "now" and q.want is not None]
    assert plain.asked == fresh.asked == len(now)
    assert plain.changed == fresh.changed == sum(q.fact in drift.changed for q in now) > 0
    assert plain.stale >= 3  # without the filter, recall answers with what the world no longer says
    assert fresh.stale < plain.stale / 3  # the filter prevents most of them...
    assert fresh.right > plain.right / 3  # ...and still answers from what was confirmed lately
    assert fresh.none > plain.none  # the price: no answer where nothing was confirmed lately
    assert plain.wrong == fresh.wrong == 0


def test_bench_staleness_prints_and_returns_its_table(bench, tmp_path, capsys):
    rows = bench.bench_staleness(tmp_path, subjects=20, embedders=("hash",), questions=10)
    assert [r["system"][:3] for r in rows] == ["(a)", "(b)", "(c)", "(d)", "(b)", "(e)"]
    main, unheard = rows[:4], rows[4:]
    assert all(r["subjects"] == 20 and r["questions"] == 10 for r in main)
    assert rows[0]["stale"] == rows[0]["wrong_now"] == rows[0]["wrong_at"] == rows[0]["wrong_as_of"] == 0
    assert rows[1]["stale"] == rows[1]["outdated_at"] == rows[1]["outdated_as_of"] == 0
    assert unheard[0]["prevented"] == 0
    assert unheard[1]["prevented"] == unheard[0]["stale_world"] - unheard[1]["stale_world"]
    assert all(r["asked"] == r["right"] + r["stale_world"] + r["no_answer"] + r["wrong"] for r in unheard)
    assert all(r["wrong"] == 0 for r in unheard)
    out = capsys.readouterr().out
    assert out.count("\n| (") == 6 and "| system | embedder |" in out and "stale answers prevented" in out
    assert list(tmp_path.iterdir()) == []  # its stores are removed

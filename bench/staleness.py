"""Does it return stale facts? One trace of corrected, late, deleted and erased facts; four systems answer.

The trace (seeded, no download): ``subjects`` people, each with six attributes
(city, employer, passport deadline, diet, favourite language, team). Each attribute
is observed once, then corrected 0 to 5 times over simulated weeks; 10% of the
corrections arrive late (a letter whose valid time is before a claim recorded
earlier); 5% of the facts are deleted afterwards (``commit(delete=...)``) and 2%
erased on request (``repo.forget``). The agent writes each week's observations in
one commit (Sunday, 20:00 by the store's injected clock), so every record time is exact.

Each observation is one claim node, ``claims/<person>/<attribute>/<n>``:
``Claim(name, attribute, {"sentence": ..., "value": ...}, valid_from=...)`` with
``Provenance(observation=..., source=...)``. The sentence lives in the claim's
value, beside the structured value, so the text recall indexes for the claim is the
sentence itself (with the subject, predicate and value); ``facts`` answers with
``value["value"]``.

The answers to four kinds of question come from a simple model of the trace
(``staleness_trace.py``), not from the store: the value now; the value in force at a valid time T (as
known at the end); what the agent believed at a record time R (valid at R, as
known at R); whether an erased fact can still be recalled. The systems:

(a) Mnemosyne's structured reads: ``facts(name, attribute, valid_at=, as_of=)``.
(b) Mnemosyne's recall: ``search(question, k=1, kind="claim", valid_at=, as_of=)``.
(c) a naive append-only vector memory: every observation's text (the same words
    the store indexes) appended with the time it arrived; the answer is the top-1
    by cosine over all of them (as of R: over those that had arrived by R), with
    the same embedder. It keeps no valid time: asked about a valid time T, it gets
    the question with T in its words.
(d) the same, with "latest timestamp wins" among its top 5.

Each system answers the same seeded sample of ``questions`` questions of each kind.
"Wrong" counts any answer but the value in force (a miss: nothing about the fact, or
another fact); "outdated" (for "now": stale) only a value of the fact asked about
that did not hold then: superseded, deleted, a late letter's older value, or not yet
true. A leak is an erased observation among what a system shows for a question about
it: ``facts`` and ``timeline`` now and as of an hour before the erasure for (a); the
top 5 of an unfiltered ``search``, now and as of then, for (b); the top 5 by cosine
for (c) and (d), which never remove anything.

What the agent never heard (``make_drift``): of the facts that hold at the end, 15%
then change in the world with no correction recorded, so the store's value for "now"
is stale and no store can know it; half the facts were re-confirmed once after their
last observation, in one of the last six weeks before the end or before such a change
(``repo.verify`` of the claim in force).
(b) answers their "now" questions without a freshness filter and (e) with
``verified_within=30 days``: the second table counts stale answers (the store's old
value of a fact that changed), right answers and no answers, and the stale answers
the filter prevented.

Call ``bench_staleness(root)`` from bench/run.py, or run this file:

    python bench/staleness.py [--subjects 300] [--minilm-subjects 100] [--questions 200] [--embedders hash,minilm]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from mnemosyne import Claim, HashEmbedder, Node, NotFound, Provenance, Redacted, Repo, default_embedder

# Its sibling, also when this file is loaded by path (tests/test_staleness.py) rather than run from bench/.
sys.path.append(str(Path(__file__).resolve().parent))
from staleness_trace import (
    ATTRIBUTES,
    SEED,
    Drift,
    Fact,
    Obs,
    Question,
    Trace,
    expected,
    make_drift,
    make_questions,
    make_trace,
)
from staleness_trace import MAX_CORRECTIONS as MAX_CORRECTIONS

SUBJECTS = 300
"""People in the default trace, sized for a ~3-minute run (``forget`` of a claim once rebuilt the claim
index from every commit, ~3 s at 1,000 people; it now updates the commits that held the claim)."""
MINILM_SUBJECTS = 100
"""People in the MiniLM trace by default: the store and the baseline embed every sentence and question."""
HASH_DIM = 384
FRESH_WITHIN = timedelta(days=30)
"""The freshness window of (e): memories last written or verified longer ago are left out."""
QUESTIONS = 200
"""Questions of each kind by default (a seeded sample of the facts): every system answers the same ones."""

# -- writing the trace into a store ------------------------------------------------------------


class Clock:
    """The store's clock, set by hand before each write."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def _claim(fact: Fact, o: Obs) -> Node:
    return Node(id=o.node_id, kind="claim",
                content=Claim(fact.name, fact.attr, {"sentence": o.sentence, "value": o.value},
                              valid_from=o.valid_from),
                provenance=Provenance(observation=o.node_id.replace("claims/", "obs/"), source=o.source))


def recall_text(fact: Fact, o: Obs) -> str:
    """The words the store indexes for a claim (subject, predicate, the value map's strings), for the baseline."""
    return f"{fact.name} {fact.attr} {o.sentence} {o.value}"


def write_store(trace: Trace, path: Path, embedder: Any, drift: Drift | None = None) -> Repo:
    """The trace as the agent writes it: a commit a week, deletions in it, erasures after it.

    With ``drift``, also its re-confirmations: one ``verify`` of the claims in force each
    Sunday at 22:00 that has any.
    """
    days: dict[datetime, tuple[list[Node], list[str]]] = defaultdict(lambda: ([], []))
    erasures: dict[datetime, list[str]] = defaultdict(list)
    checks: dict[datetime, list[str]] = defaultdict(list)
    for fact, when in (drift.verified.items() if drift is not None else ()):
        held = expected(fact, trace.end)
        assert held is not None
        checks[when].append(held.node_id)
    for fact in trace.facts:
        for o in fact.obs:
            days[o.recorded][0].append(_claim(fact, o))
        if fact.deleted is not None:
            days[fact.deleted][1].extend(o.node_id for o in fact.obs)
        if fact.erased is not None:
            erasures[fact.erased].extend(o.node_id for o in fact.obs)
    clock = Clock(trace.first_commit)
    repo = Repo.init(path, clock=clock, sync=False, embedder=embedder)
    for when in sorted(days.keys() | erasures.keys() | checks.keys()):
        puts, deletes = days.get(when, ([], []))
        if puts or deletes:
            clock.now = when
            done = repo.commit(put=puts, delete=deletes, author="agent",
                               message=f"week of {when:%Y-%m-%d}: {len(puts)} observations, {len(deletes)} removed")
            assert done.record_time == when, (done.record_time, when)
        for k, node_id in enumerate(erasures.get(when, [])):
            clock.now = when + timedelta(seconds=k)
            repo.forget(node_id, "erasure request", author="dpo")
        if when in checks:
            clock.now = when
            repo.verify(*checks[when], by="agent", note="re-confirmed with the person")
    clock.now = trace.end
    return repo


# -- the systems ---------------------------------------------------------------------------------

Answer = list[tuple[Fact, Obs]]
"""What a system returned for a question: the observations (claims or appended sentences) it shows."""


class Structured:
    """(a): ``facts`` at the question's valid time, as of its record time."""

    name = "(a) Mnemosyne `facts(valid_at=, as_of=)`"

    def __init__(self, repo: Repo, index: dict[str, tuple[Fact, Obs]]) -> None:
        self.repo, self.index = repo, index

    def answer(self, q: Question) -> Answer:
        return self._facts(q.fact, q.valid_at, q.as_of)

    def _facts(self, fact: Fact, valid_at: datetime, as_of: datetime | None) -> Answer:
        try:
            found = self.repo.facts(fact.name, fact.attr, valid_at=valid_at, as_of=as_of)
        except NotFound:  # before the first commit: nothing was believed
            return []
        return [self.index[f.id] for f in found]

    def leaks(self, fact: Fact, question: str) -> Answer:
        assert fact.erased is not None
        before = fact.erased - timedelta(hours=1)  # when the fact was still fully known
        shown = self._facts(fact, self.repo.now(), None)
        shown += [self.index[f.id] for f in self.repo.timeline(fact.name, fact.attr)]
        try:
            shown += [self.index[f.id] for f in self.repo.timeline(fact.name, fact.attr, as_of=before)]
            shown += self._facts(fact, before, before)
        except Redacted:  # the store refuses to show erased bytes: nothing leaks
            pass
        return shown


class Recall:
    """(b): ``search`` top-1 among claims in force at the question's valid time, as of its record time."""

    name = "(b) Mnemosyne `search(valid_at=, as_of=)` top-1"

    def __init__(self, repo: Repo, index: dict[str, tuple[Fact, Obs]]) -> None:
        self.repo, self.index = repo, index

    def answer(self, q: Question) -> Answer:
        hits = self.repo.search(q.text, k=1, kind="claim", valid_at=q.valid_at, as_of=q.as_of)
        return [self.index[h.id] for h in hits]

    def leaks(self, fact: Fact, question: str) -> Answer:
        assert fact.erased is not None
        before = fact.erased - timedelta(hours=1)
        hits = self.repo.search(question, k=5)  # no filter at all: every claim in the snapshot
        hits += self.repo.search(question, k=5, as_of=before)  # the snapshot from before the erasure
        return [self.index[h.id] for h in hits]


class Fresh(Recall):
    """(e): (b) with ``verified_within``: only memories written or re-confirmed lately may answer."""

    name = "(e) Mnemosyne `search(valid_at=, verified_within=30d)` top-1"

    def answer(self, q: Question) -> Answer:
        hits = self.repo.search(
            q.text, k=1, kind="claim", valid_at=q.valid_at, as_of=q.as_of, verified_within=FRESH_WITHIN
        )
        return [self.index[h.id] for h in hits]


class Appended:
    """(c) and (d): every observation appended to a vector list with its arrival time; nothing removed."""

    def __init__(self, trace: Trace, embedder: Any, latest_of: int) -> None:
        self.entries = sorted(trace.observations, key=lambda e: e[1].recorded)
        self.arrived = np.array([o.recorded.timestamp() for _, o in self.entries])
        self.vectors = _embed(embedder, [recall_text(f, o) for f, o in self.entries])
        self.embedder, self.latest_of = embedder, latest_of
        self.name = ("(c) append-only vectors, top-1 by cosine" if latest_of == 1 else
                     f"(d) append-only vectors, latest of top-{latest_of}")

    def answer_all(self, questions: Sequence[Question]) -> list[Answer]:
        """Each question's answer: among entries arrived by its as-of time, the top-k by cosine, latest wins."""
        queries = _embed(self.embedder, [q.text for q in questions])
        cut = np.array([q.as_of.timestamp() if q.as_of else np.inf for q in questions])
        out: list[Answer] = []
        for start in range(0, len(questions), 256):
            scores = queries[start:start + 256] @ self.vectors.T
            scores[self.arrived[None, :] > cut[start:start + 256, None]] = -np.inf
            for row in scores:
                top = [int(i) for i in np.argsort(-row, kind="stable")[: self.latest_of] if row[i] > -np.inf]
                # Entries are in arrival order: the largest index arrived last.
                out.append([self.entries[max(top)]] if top else [])
        return out

    def leaks_all(self, questions: Sequence[str]) -> list[Answer]:
        """The top 5 by cosine over everything appended (what the baseline would show)."""
        queries = _embed(self.embedder, list(questions))
        scores = queries @ self.vectors.T
        return [[self.entries[int(i)] for i in np.argsort(-row, kind="stable")[:5]] for row in scores]


def _embed(embedder: Any, texts: list[str]) -> np.ndarray:
    if not texts:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    vectors = np.asarray(embedder(texts), dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


# -- scoring -------------------------------------------------------------------------------------


@dataclass
class Tally:
    asked: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    wrong: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    outdated: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    not_in_force: int = 0
    """Answers showing a claim that did not hold for its own fact then (superseded, deleted, erased, too early)."""
    erased: int = 0
    leaked: int = 0

    def score(self, q: Question, got: Answer) -> None:
        self.asked[q.kind] += 1
        about = [o for f, o in got if f is q.fact]
        values = sorted({o.value for o in about})
        right = values == ([q.want.value] if q.want else [])
        if not right:
            self.wrong[q.kind] += 1
            if about:  # a value of the fact asked about, but not the one in force: outdated
                self.outdated[q.kind] += 1
        for f, o in got:
            if expected(f, q.valid_at, q.as_of) is not o:
                self.not_in_force += 1

    def rate(self, counts: dict[str, int], kind: str) -> float | None:
        return counts[kind] / self.asked[kind] if self.asked[kind] else None


def ask(system: Any, questions: list[Question], erased: list[Fact]) -> Tally:
    """Put every question to ``system`` and score its answers; check each erased fact for leaks."""
    tally = Tally()
    if isinstance(system, Appended):
        answers = system.answer_all(questions)
        leaks = system.leaks_all([ATTRIBUTES[f.attr].now.format(name=f.name) for f in erased])
    else:
        answers = [system.answer(q) for q in questions]
        leaks = [system.leaks(f, ATTRIBUTES[f.attr].now.format(name=f.name)) for f in erased]
    for q, got in zip(questions, answers, strict=True):
        tally.score(q, got)
    for fact, shown in zip(erased, leaks, strict=True):
        tally.erased += 1
        tally.leaked += any(f is fact for f, _ in shown)
    return tally


@dataclass
class Unheard:
    """Answers to "now" about facts that hold at the end, judged against the world (see :class:`Drift`)."""

    asked: int = 0
    changed: int = 0
    stale: int = 0
    """The store's value of a fact that changed unheard: what the world no longer says."""
    right: int = 0
    none: int = 0
    """Nothing about the fact asked (a miss, or left out as not confirmed lately)."""
    wrong: int = 0
    """Another value of the fact asked, though it did not change (never, with valid time filtered)."""


def ask_unheard(system: Any, questions: list[Question], drift: Drift) -> Unheard:
    """Put the "now" questions about facts that hold to ``system``; score against the world."""
    tally = Unheard()
    for q in questions:
        if q.kind != "now" or q.want is None:
            continue
        tally.asked += 1
        moved = q.fact in drift.changed
        tally.changed += moved
        values = {o.value for f, o in system.answer(q) if f is q.fact}
        if not values:
            tally.none += 1
        elif moved:
            tally.stale += 1  # whatever the store holds, the world changed since
        elif values == {q.want.value}:
            tally.right += 1
        else:
            tally.wrong += 1
    return tally


# -- the bench -------------------------------------------------------------------------------------


def _embedder(name: str) -> Any:
    return HashEmbedder(HASH_DIM) if name == "hash" else default_embedder()


def bench_staleness(
    root: Path,
    subjects: int = SUBJECTS,
    embedders: Sequence[str] = ("hash", "minilm"),
    *,
    minilm_subjects: int = MINILM_SUBJECTS,
    questions: int | None = QUESTIONS,
    seed: int = SEED,
    quiet: bool = False,
) -> list[dict[str, Any]]:
    """Run the four systems on the trace with each embedder; print the markdown table and return its rows.

    The MiniLM trace has ``min(subjects, minilm_subjects)`` subjects (its rows say so).
    Then, per embedder, two rows of the unheard-change table (:func:`unheard_table`):
    ``system``, ``embedder``, ``subjects``, ``asked``, ``changed``, ``stale_world``,
    ``right``, ``no_answer``, ``wrong`` and ``prevented`` (counts). The other rows (they have
    ``stale``): ``system``, ``embedder``, ``subjects``, ``questions``, the rates
    ``stale`` (an outdated value for "now"), ``wrong_now``, ``wrong_at``,
    ``outdated_at``, ``wrong_as_of``, ``outdated_as_of``, ``leak`` (fractions, None
    when not asked), ``not_in_force`` (answers showing a claim that did not hold
    then), ``erased`` (facts erased) and ``seconds`` (to answer).
    """
    rows: list[dict[str, Any]] = []
    for name in embedders:
        n = subjects if name == "hash" else min(subjects, minilm_subjects)
        trace = make_trace(n, seed)
        asked, erased = make_questions(trace, seed, questions)
        drift = make_drift(trace, seed)
        embedder = _embedder(name)
        path = Path(tempfile.mkdtemp(prefix=f"staleness-{name}-", dir=root))
        started = time.perf_counter()
        repo = write_store(trace, path, embedder, drift)
        written = time.perf_counter() - started
        try:
            index = {o.node_id: (f, o) for f, o in trace.observations}
            systems: list[Any] = [Structured(repo, index), Recall(repo, index)]
            systems += [Appended(trace, embedder, 1), Appended(trace, embedder, 5)]
            for system in systems:
                started = time.perf_counter()
                tally = ask(system, asked, erased)
                rows.append(_row(system.name, name, n, tally, time.perf_counter() - started))
                if not quiet:
                    print(f"  {name:<6} {system.name}: {rows[-1]['seconds']:.1f} s", flush=True)
            unheard = [(s, ask_unheard(s, asked, drift)) for s in (Recall(repo, index), Fresh(repo, index))]
            for system, tally in unheard:
                rows.append(_unheard_row(system.name, rows[-1]["embedder"], n, tally, unheard[0][1]))
        finally:
            repo.close()
            shutil.rmtree(path, ignore_errors=True)
        if not quiet:
            print(f"  {name:<6} trace: {n} subjects, {len(trace.observations)} observations, "
                  f"{len(asked)} questions, {len(erased)} erased facts; written in {written:.1f} s", flush=True)
    if not quiet:
        print(table([r for r in rows if "stale" in r]))
        print()
        print(unheard_table([r for r in rows if "changed" in r]))
    return rows


def _unheard_row(system: str, embedder: str, subjects: int, t: Unheard, unfiltered: Unheard) -> dict[str, Any]:
    return {
        "system": system,
        "embedder": embedder,
        "subjects": subjects,
        "asked": t.asked,
        "changed": t.changed,
        "stale_world": t.stale,
        "right": t.right,
        "no_answer": t.none,
        "wrong": t.wrong,
        "prevented": unfiltered.stale - t.stale,
    }


def unheard_table(rows: Sequence[dict[str, Any]]) -> str:
    """The markdown table of the answers about facts that changed unheard, with and without the filter."""
    header = ["system", "embedder", "subjects", '"now" questions', "changed unheard", "stale answers"]
    header += ["right answers", "no answer", "stale answers prevented"]
    keys = ["system", "embedder", "subjects", "asked", "changed", "stale_world", "right", "no_answer", "prevented"]
    return _markdown(header, [[str(r[key]) for key in keys] for r in rows])


def _markdown(header: list[str], cells: list[list[str]]) -> str:
    """A markdown table: the first two columns left-aligned, the rest right-aligned."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * 2 + "---:|" * (len(header) - 2)]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(lines)


def _row(system: str, embedder: str, subjects: int, t: Tally, seconds: float) -> dict[str, Any]:
    return {
        "system": system,
        "embedder": "none (exact reads)" if system.startswith("(a)") else
                    ("MiniLM" if embedder == "minilm" else f"hash-{HASH_DIM}"),
        "subjects": subjects,
        "questions": max(t.asked.values(), default=0),
        "stale": t.rate(t.outdated, "now"),
        "wrong_now": t.rate(t.wrong, "now"),
        "wrong_at": t.rate(t.wrong, "at"),
        "outdated_at": t.rate(t.outdated, "at"),
        "wrong_as_of": t.rate(t.wrong, "as_of"),
        "outdated_as_of": t.rate(t.outdated, "as_of"),
        "leak": t.leaked / t.erased if t.erased else None,
        "erased": t.erased,
        "not_in_force": t.not_in_force,
        "seconds": seconds,
    }


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The markdown table of ``rows``."""
    header = ["system", "embedder", "subjects", "questions of each kind", "stale (now)", "wrong now"]
    header += ["wrong at T (outdated)", "wrong as of R (outdated)", "erased facts leaked"]
    cells = [
        [
            r["system"],
            r["embedder"],
            str(r["subjects"]),
            str(r["questions"]),
            _pct(r["stale"]),
            _pct(r["wrong_now"]),
            f"{_pct(r['wrong_at'])} ({_pct(r['outdated_at'])})",
            f"{_pct(r['wrong_as_of'])} ({_pct(r['outdated_as_of'])})",
            f"{_pct(r['leak'])} of {r['erased']}",
        ]
        for r in rows
    ]
    return _markdown(header, cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--subjects", type=int, default=SUBJECTS)
    parser.add_argument("--minilm-subjects", type=int, default=MINILM_SUBJECTS)
    parser.add_argument("--embedders", default="hash,minilm")
    parser.add_argument("--questions", type=int, default=QUESTIONS, help="of each kind; 0: one per fact")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="mnemo-staleness-"))
    started = time.perf_counter()
    try:
        bench_staleness(root, args.subjects, tuple(args.embedders.split(",")),
                        minilm_subjects=args.minilm_subjects, questions=args.questions or None, seed=args.seed)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\n{time.perf_counter() - started:.0f} s in all")


if __name__ == "__main__":
    main()

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

The answers to four kinds of question come from a simple model of the trace in this
file, not from the store: the value now; the value in force at a valid time T (as
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

Call ``bench_staleness(root)`` from bench/run.py, or run this file:

    python bench/staleness.py [--subjects 300] [--minilm-subjects 100] [--questions 200] [--embedders hash,minilm]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from mnemosyne import Claim, HashEmbedder, Node, NotFound, Provenance, Redacted, Repo, default_embedder

SEED = 20260601
START = datetime(2025, 1, 6, tzinfo=UTC)
COMMIT_HOUR = 20
"""The agent commits each week's observations on Sunday at 20:00 (store clock); erasures follow from 21:00."""
MAX_CORRECTIONS = 5
LATE = 0.10
DELETED = 0.05
ERASED = 0.02
SUBJECTS = 300
"""People in the default trace. Each ``forget`` of a claim rebuilds the claim index from every commit
(~0.4 s at this size, ~3 s at 1,000 people), so the 2% erasures bound the size of a ~3-minute run."""
MINILM_SUBJECTS = 100
"""People in the MiniLM trace by default: the store and the baseline embed every sentence and question."""
HASH_DIM = 384
QUESTIONS = 200
"""Questions of each kind by default (a seeded sample of the facts): every system answers the same ones."""

FIRST = ("Mira Tom Ana Jonas Lea Omar Ines Karl Yuki Nora Ravi Sofia Emil Hana Luca Zoe Femi Ada "
         "Pavel Lina Iker Maya Theo Asha Bruno Elif Nils Rosa Kenji Vera Amir Clara Diego Ida Sami "
         "Greta Malik Noor Otto Wren").split()
LAST = ("Okafor Berg Silva Novak Haddad Tanaka Lindqvist Moreau Rossi Kowalski Petrov Nakamura "
        "Fischer Costa Dubois Ivanova Larsen Mendes Quinn Yilmaz Sato Brandt Keller Varga Horvat "
        "Ortiz Weber Hansen Moreno Aziz Kim Laine Bauer Ferrari Jensen Popescu Nguyen Santos Walsh Vogel").split()


@dataclass(frozen=True)
class Attribute:
    values: tuple[str, ...]
    said: tuple[str, ...]
    """How an observation is worded: ``{name}``, ``{value}``, ``{date}`` (its valid time)."""
    now: str
    at: str


ATTRIBUTES: dict[str, Attribute] = {
    "city": Attribute(
        tuple("Lisbon Berlin Oslo Madrid Vienna Prague Dublin Warsaw Athens Helsinki Zurich Porto "
              "Krakow Tallinn Riga Lyon Milan Ghent Bergen Seville".split()),
        ("{name} says they moved to {value} on {date}.",
         "{name} has been living in {value} since {date}.",
         "New home address for {name} from {date}: {value}."),
        "Which city does {name} live in?",
        "Which city did {name} live in on {date}?",
    ),
    "employer": Attribute(
        ("Acme", "Globex", "Initech", "Umbrella Labs", "Hooli", "Stark Works", "Wayne Freight",
         "Cyberdyne", "Soylent", "Tyrell", "Wonka Foods", "Vandelay Imports", "Pied Piper",
         "Aperture", "Massive Dynamic", "Oscorp"),
        ("{name} started a new job at {value} on {date}.",
         "{name} has worked for {value} since {date}.",
         "HR letter: {name} is employed by {value} from {date}."),
        "Who is {name}'s employer?",
        "Who was {name}'s employer on {date}?",
    ),
    "passport_deadline": Attribute(
        tuple(f"2027-{m:02d}-{d:02d}" for m in range(1, 13) for d in (5, 19)),
        ("The consulate told {name} on {date} that the passport must be renewed by {value}.",
         "{name}'s passport renewal deadline is {value}, per the notice of {date}.",
         "As of {date}, {name} has to renew the passport before {value}."),
        "What is {name}'s passport deadline?",
        "What was {name}'s passport deadline on {date}?",
    ),
    "diet": Attribute(
        ("vegetarian", "vegan", "pescatarian", "gluten-free", "omnivore", "halal", "kosher",
         "lactose-free", "low-carb", "nut-free"),
        ("{name} has eaten a {value} diet since {date}.",
         "From {date} {name} follows a {value} diet.",
         "Dinner note: {name} is {value} as of {date}."),
        "What diet does {name} follow?",
        "What diet did {name} follow on {date}?",
    ),
    "favourite_language": Attribute(
        ("Python", "Rust", "Go", "Haskell", "OCaml", "Kotlin", "Elixir", "Julia", "Zig",
         "TypeScript", "Scala", "Clojure", "Swift", "Erlang"),
        ("Since {date} {name}'s favourite programming language is {value}.",
         "{name} said on {date} that {value} is now their favourite language.",
         "Favourite language of {name} from {date}: {value}."),
        "What is {name}'s favourite language?",
        "What was {name}'s favourite language on {date}?",
    ),
    "team": Attribute(
        ("Payments", "Search", "Infra", "Mobile", "Growth", "Security", "Data", "Support",
         "Billing", "Platform", "Research", "Design"),
        ("{name} joined the {value} team on {date}.",
         "{name} has been on the {value} team since {date}.",
         "Org chart of {date}: {name} is in the {value} team."),
        "Which team is {name} on?",
        "Which team was {name} on on {date}?",
    ),
}


# -- the trace -----------------------------------------------------------------


@dataclass(eq=False)
class Obs:
    """One observation: a claim node, the sentence it was heard as, when it holds and when it arrived."""

    node_id: str
    value: str
    sentence: str
    valid_from: datetime
    recorded: datetime
    late: bool
    source: str


@dataclass(eq=False)
class Fact:
    """One (person, attribute): its observations in record order, and whether it was deleted or erased."""

    uid: str
    name: str
    attr: str
    obs: list[Obs] = field(default_factory=list)
    deleted: datetime | None = None
    erased: datetime | None = None


@dataclass
class Trace:
    facts: list[Fact]
    end: datetime
    first_commit: datetime

    @property
    def observations(self) -> list[tuple[Fact, Obs]]:
        return [(f, o) for f in self.facts for o in f.obs]


def _week(week: int, hour: int = COMMIT_HOUR) -> datetime:
    """Sunday of ``week``, at ``hour``: when that week's commit (or erasure) happens."""
    return START + timedelta(weeks=week, days=6, hours=hour)


def _date(t: datetime) -> str:
    return f"{t.day} {t:%B %Y}"


def make_trace(subjects: int, seed: int = SEED) -> Trace:
    """The observations, deletions and erasures of ``subjects`` people, from ``seed`` alone."""
    rng = random.Random(seed)
    names = [f"{a} {b}" for a in FIRST for b in LAST]
    if subjects > len(names):
        raise ValueError(f"at most {len(names)} subjects")
    facts: list[Fact] = []
    for i, name in enumerate(rng.sample(names, subjects)):
        for attr in ATTRIBUTES:
            facts.append(_fact(rng, Fact(f"u{i:04d}", name, attr)))
    order = list(range(len(facts)))
    rng.shuffle(order)
    n_deleted, n_erased = round(DELETED * len(facts)), round(ERASED * len(facts))
    for k, index in enumerate(order[: n_deleted + n_erased]):
        fact = facts[index]
        week = (fact.obs[-1].recorded - START).days // 7 + rng.randint(1, 4)
        if k < n_deleted:
            fact.deleted = _week(week)  # in that week's commit
        else:
            fact.erased = _week(week, COMMIT_HOUR + 1)  # forget runs after the week's commit
    last = max(max(o.recorded for o in f.obs) for f in facts)
    last = max([last, *(f.deleted or last for f in facts), *(f.erased or last for f in facts)])
    first = min(o.recorded for f in facts for o in f.obs)
    return Trace(facts, last.replace(hour=0) + timedelta(days=2), first)


def _fact(rng: random.Random, fact: Fact) -> Fact:
    spec = ATTRIBUTES[fact.attr]
    week = rng.randrange(0, 8)
    for n in range(rng.randint(0, MAX_CORRECTIONS) + 1):
        if n:
            week += rng.randint(1, 8)
        recorded = _week(week)
        late = n > 0 and rng.random() < LATE
        latest = max((o.valid_from for o in fact.obs), default=recorded)
        if late:  # a letter dated before a claim recorded earlier, delivered only now
            valid = latest - timedelta(minutes=rng.randint(60, 6 * 7 * 24 * 60))
        else:
            valid = recorded - timedelta(minutes=rng.randint(60, 6 * 24 * 60))  # during that week
        while any(o.valid_from == valid for o in fact.obs):
            valid -= timedelta(minutes=1)
        before = in_force(fact.obs, valid, None)
        taken = {fact.obs[-1].value} if fact.obs else set()
        if before is not None:
            taken.add(before.value)
        value = rng.choice([v for v in spec.values if v not in taken])
        sentence = rng.choice(spec.said).format(name=fact.name, value=value, date=_date(valid))
        source = "letter, delivered late" if late else rng.choice(("chat", "email", "form"))
        fact.obs.append(Obs(f"claims/{fact.uid}/{fact.attr}/{n}", value, sentence, valid, recorded, late, source))
    return fact


# -- the reference answers: a model of the trace, independent of the store -------------------


def in_force(obs: Iterable[Obs], valid_at: datetime, known_by: datetime | None) -> Obs | None:
    """The observation holding at ``valid_at`` among those recorded by ``known_by``: latest valid_from wins."""
    held = [o for o in obs if o.valid_from <= valid_at and (known_by is None or o.recorded <= known_by)]
    return max(held, key=lambda o: o.valid_from) if held else None


def expected(fact: Fact, valid_at: datetime, as_of: datetime | None = None) -> Obs | None:
    """The right answer: None when nothing holds (never said, deleted by then, or erased)."""
    if fact.erased is not None:
        return None
    if fact.deleted is not None and (as_of is None or as_of >= fact.deleted):
        return None
    return in_force(fact.obs, valid_at, as_of)


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


def write_store(trace: Trace, path: Path, embedder: Any) -> Repo:
    """The trace as the agent writes it: a commit a week, deletions in it, erasures after it."""
    days: dict[datetime, tuple[list[Node], list[str]]] = defaultdict(lambda: ([], []))
    erasures: dict[datetime, list[str]] = defaultdict(list)
    for fact in trace.facts:
        for o in fact.obs:
            days[o.recorded][0].append(_claim(fact, o))
        if fact.deleted is not None:
            days[fact.deleted][1].extend(o.node_id for o in fact.obs)
        if fact.erased is not None:
            erasures[fact.erased].extend(o.node_id for o in fact.obs)
    clock = Clock(trace.first_commit)
    repo = Repo.init(path, clock=clock, sync=False, embedder=embedder)
    for when in sorted(days.keys() | erasures.keys()):
        puts, deletes = days.get(when, ([], []))
        if puts or deletes:
            clock.now = when
            done = repo.commit(put=puts, delete=deletes, author="agent",
                               message=f"week of {when:%Y-%m-%d}: {len(puts)} observations, {len(deletes)} removed")
            assert done.record_time == when, (done.record_time, when)
        for k, node_id in enumerate(erasures.get(when, [])):
            clock.now = when + timedelta(seconds=k)
            repo.forget(node_id, "erasure request", author="dpo")
    clock.now = trace.end
    return repo


# -- the questions -------------------------------------------------------------------------------


@dataclass
class Question:
    kind: str  # "now", "at" or "as_of"
    fact: Fact
    text: str
    valid_at: datetime
    as_of: datetime | None
    want: Obs | None


def make_questions(trace: Trace, seed: int = SEED, per_kind: int | None = None) -> tuple[list[Question], list[Fact]]:
    """Questions of each kind (one per fact not erased, or a seeded sample of ``per_kind``); the erased facts."""
    rng = random.Random(seed + 1)
    out: list[Question] = []
    for fact in trace.facts:
        if fact.erased is not None:
            continue
        spec = ATTRIBUTES[fact.attr]
        now = spec.now.format(name=fact.name)
        out.append(Question("now", fact, now, trace.end, None, expected(fact, trace.end)))
        lo = min(o.valid_from for o in fact.obs) - timedelta(weeks=2)
        t = _odd_second(rng, lo, trace.end)
        out.append(Question("at", fact, spec.at.format(name=fact.name, date=_date(t)), t, None,
                            expected(fact, t)))
        last = max([o.recorded for o in fact.obs] + [fact.deleted or trace.first_commit])
        r = _odd_second(rng, max(trace.first_commit, fact.obs[0].recorded - timedelta(days=3)),
                        last + timedelta(weeks=2))
        out.append(Question("as_of", fact, now, r, r, expected(fact, r, r)))
    if per_kind is not None:
        keep: set[int] = set()
        for kind in ("now", "at", "as_of"):
            of_kind = [i for i, q in enumerate(out) if q.kind == kind]
            keep.update(rng.sample(of_kind, min(per_kind, len(of_kind))))
        out = [q for i, q in enumerate(out) if i in keep]
    return out, [f for f in trace.facts if f.erased is not None]


def _odd_second(rng: random.Random, lo: datetime, hi: datetime) -> datetime:
    """A time in [lo, hi) that no valid_from (whole minutes) or record time (20:00) equals."""
    span = int((hi - lo).total_seconds()) // 60
    return lo + timedelta(minutes=rng.randrange(max(span, 1)), seconds=rng.randint(1, 59))


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
    Each row: ``system``, ``embedder``, ``subjects``, ``questions``, the rates
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
        embedder = _embedder(name)
        path = Path(tempfile.mkdtemp(prefix=f"staleness-{name}-", dir=root))
        started = time.perf_counter()
        repo = write_store(trace, path, embedder)
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
        finally:
            repo.close()
            shutil.rmtree(path, ignore_errors=True)
        if not quiet:
            print(f"  {name:<6} trace: {n} subjects, {len(trace.observations)} observations, "
                  f"{len(asked)} questions, {len(erased)} erased facts; written in {written:.1f} s", flush=True)
    if not quiet:
        print(table(rows))
    return rows


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
    lines = [
        "| system | embedder | subjects | questions of each kind | stale (now) | wrong now "
        "| wrong at T (outdated) | wrong as of R (outdated) | erased facts leaked |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['system']} | {r['embedder']} | {r['subjects']} | {r['questions']} | {_pct(r['stale'])} "
            f"| {_pct(r['wrong_now'])} "
            f"| {_pct(r['wrong_at'])} ({_pct(r['outdated_at'])}) | {_pct(r['wrong_as_of'])} "
            f"({_pct(r['outdated_as_of'])}) | {_pct(r['leak'])} of {r['erased']} |"
        )
    return "\n".join(lines)


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

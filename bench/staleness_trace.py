"""The staleness bench's trace: seeded observations of people's attributes, and the right answers.

Used by bench/staleness.py (see its docstring for the trace and the systems that answer).
``make_trace`` builds the corrected, late, deleted and erased facts from a seed alone;
``in_force`` and ``expected`` model the answers, independent of the store;
``make_questions`` samples the questions of each kind with their expected answers;
``make_drift`` adds what the agent never heard: values that changed in the world after
their last observation, and when the agent re-confirmed a value (``verify``).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

SEED = 20260601
START = datetime(2025, 1, 6, tzinfo=UTC)
COMMIT_HOUR = 20
"""The agent commits each week's observations on Sunday at 20:00 (store clock); erasures follow from 21:00."""
MAX_CORRECTIONS = 5
LATE = 0.10
DELETED = 0.05
ERASED = 0.02
DRIFTED = 0.15
"""Facts holding at the end whose value then changed in the world, unheard: no correction was recorded."""
RECHECKED = 0.5
"""Facts the agent re-confirmed (``verify``) once after their last observation, before any unheard change."""
RECHECK_WEEKS = 6
"""A re-confirmation falls in one of the last this many weeks it could (the agent re-asks now and then)."""
VERIFY_HOUR = 22
"""Re-confirmations are recorded on Sundays at 22:00, after the week's commit and erasures."""

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


# -- what the agent never heard -----------------------------------------------------------------


@dataclass
class Drift:
    """Unheard changes and re-confirmations, over the facts that hold at the end of the trace.

    Attributes:
        changed: facts whose value changed in the world after their last observation
            (when), with no correction recorded: the store's value for "now" is stale.
        verified: facts the agent re-confirmed after their last observation (when),
            before any unheard change: ``repo.verify`` of the claim in force.
    """

    changed: dict[Fact, datetime]
    verified: dict[Fact, datetime]


def make_drift(trace: Trace, seed: int = SEED) -> Drift:
    """Which facts changed unheard and which were re-confirmed, each at a week's end, from ``seed`` alone."""
    rng = random.Random(seed + 2)
    changed: dict[Fact, datetime] = {}
    verified: dict[Fact, datetime] = {}
    for fact in trace.facts:
        if expected(fact, trace.end) is None:
            continue  # deleted or erased: nothing to go stale or to re-confirm
        last = max(o.recorded for o in fact.obs)
        first = (last - START).days // 7 + 1
        weeks = [w for w in range(first, first + 104) if _week(w, VERIFY_HOUR) < trace.end]
        if rng.random() < DRIFTED and weeks:
            week = rng.choice(weeks)
            changed[fact] = _week(week, VERIFY_HOUR + 1)
            weeks = [w for w in weeks if w < week]  # re-asked after the change, the agent would have heard it
        if rng.random() < RECHECKED and weeks:
            verified[fact] = _week(rng.choice(weeks[-RECHECK_WEEKS:]), VERIFY_HOUR)
    return Drift(changed, verified)

"""An agent's memory over six steps, then its history, shown by the ``mnemo`` command line.

``make demo`` runs this file. It recreates ``./demo.mnemo`` and commits what an
agent learns about a user: facts, a correction, a per-line edit, a deletion, an
erasure the user asks for (``forget``: the bytes leave the store, a redaction
record stays) and a speculative run on a branch. The store's clock is
simulated, so the story keeps its dates (June 2026) whenever it runs. Then it
shows ``log``, ``show`` (now and as of an earlier time), ``history``, ``blame``,
``diff`` and ``branch`` by running the ``mnemo`` command line; where that is not
installed, it prints the same answers through the Python API.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from mnemosyne import Claim, Commit, InvalidInput, Node, Provenance, Repo

STORE = Path("demo.mnemo")
MIRA = "users/mira"
DEADLINE = f"{MIRA}/passport_deadline"
TRIP = f"{MIRA}/notes/trip"
PASSPORT = f"{MIRA}/passport_number"
JUNE_2 = "2026-06-02T00:00:00Z"
AGENT = "agent-7"


class SimulatedClock:
    """The store's clock, moved by hand from one step of the story to the next."""

    def __init__(self) -> None:
        self.now = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        """The current simulated time."""
        return self.now

    def set(self, text: str) -> datetime:
        """Move the clock to an RFC 3339 time and return it."""
        self.now = datetime.fromisoformat(text)
        return self.now


def remember(clock: SimulatedClock) -> None:
    """Create the store and commit six steps of an agent's work."""
    if STORE.is_dir():
        shutil.rmtree(STORE)
    elif STORE.exists():
        STORE.unlink()
    with Repo.init(STORE, clock=clock) as repo:

        def step(
            when: str, story: str, put: list[Node], delete: tuple[str, ...] = (), branch: str | None = None
        ) -> None:
            clock.set(when)
            commit = repo.commit(put=put, delete=delete, message=story, author=AGENT, branch=branch)
            print(f"  {commit.id[:7]}  {when[:16]}  {story}{f' (on {branch})' if branch else ''}")

        def said(step_no: int, observation: str, source: str, tool_call: str | None = None) -> Provenance:
            return Provenance(agent_step=step_no, observation=observation, tool_call=tool_call, source=source)

        print(f"Recording an agent's memory in {STORE}/ (simulated clock):")
        chat = said(1, "chat/m1", "chat")
        step(
            "2026-06-01T09:00:00+00:00",
            "Mira introduces herself",
            [
                Node(id=f"{MIRA}/profile/name", content="Mira Okafor", provenance=chat),
                Node(id=f"{MIRA}/prefs/language", content="pt-PT", provenance=chat),
                Node(id=DEADLINE, content="2026-07-15", provenance=chat, meta={"sensitivity": "personal"}),
                Node(id=PASSPORT, content="C01X00T47", provenance=chat, meta={"sensitivity": "personal"}),
                Node(
                    id=f"{MIRA}/claims/lives_in/m1",
                    kind="claim",
                    content=Claim(
                        "mira",
                        "lives_in",
                        "Lisbon",
                        valid_from=datetime(2024, 3, 1, tzinfo=UTC),
                        confidence=0.9,
                        evidence=("chat/m1",),
                    ),
                    provenance=chat,
                ),
            ],
        )
        step(
            "2026-06-01T09:05:00+00:00",
            "Calendar lookup finds a trip",
            [
                Node(
                    id=TRIP,
                    content="Trip to Tokyo, 2026-07-20 to 2026-08-02\nFlight: TP 1234\nVisa: unknown",
                    provenance=said(2, "calendar/event/881", "calendar", tool_call="calendar.search#1"),
                )
            ],
        )
        step(
            "2026-06-02T14:00:00+00:00",
            "Correction: the consulate moved the passport deadline",
            [Node(id=DEADLINE, content="2026-06-30", provenance=said(3, "email/e2", "email"))],
        )
        step(
            "2026-06-03T10:00:00+00:00",
            "Visa check answers one line of the trip note",
            [
                Node(
                    id=TRIP,
                    content="Trip to Tokyo, 2026-07-20 to 2026-08-02\nFlight: TP 1234\n"
                    "Visa: not needed for stays up to 90 days",
                    provenance=said(4, "visa/jp/pt", "web", tool_call="visa.check#7"),
                )
            ],
        )
        step(
            "2026-06-04T08:00:00+00:00",
            "Mira asks to stop assuming a language",
            [],
            delete=(f"{MIRA}/prefs/language",),
        )
        clock.set("2026-06-04T08:30:00+00:00")
        erased = repo.forget(PASSPORT, "Mira's erasure request", author="dpo")
        assert erased.commit is not None
        print(
            f"  {erased.commit.id[:7]}  2026-06-04T08:30  Mira asks to erase her passport number "
            f"(forget: {len(erased.redactions)} version erased, a redaction record kept)"
        )
        clock.set("2026-06-04T09:00:00+00:00")
        repo.branch("what-if", author=AGENT)
        step(
            "2026-06-04T09:01:00+00:00",
            "Speculative run: what if she pays for urgent renewal?",
            [
                Node(id=DEADLINE, content="2026-07-10", provenance=said(5, "plan/urgent", "planner")),
                Node(id=f"{MIRA}/plans/urgent_renewal", content={"fee_eur": 65, "days": 5}),
            ],
            branch="what-if",
        )


# -- showing it ----------------------------------------------------------------------


def _time(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _value(content: Any) -> str:
    if isinstance(content, str):
        return content.replace("\n", " / ")
    if isinstance(content, Claim):
        content = msgspec.structs.asdict(content)
    return json.dumps(content, default=str)


def _print_log(commits: list[Commit]) -> None:
    for c in commits:
        print(f"{c.id[:7]}  {_time(c.record_time)}  {c.author}  {c.message}")


def _print_node(node: Node | None) -> None:
    if node is None:
        print("(absent)")
        return
    provenance = {k: v for k, v in msgspec.structs.asdict(node.provenance).items() if v is not None}
    print(f"{node.id}  {node.hash[:7]}  {node.kind}")
    print(f"  content     {_value(node.content)}")
    print(f"  provenance  {json.dumps(provenance)}")


def _fallback_queries() -> dict[str, Callable[[Repo], None]]:
    """The same questions through the Python API, for when the CLI is not installed."""

    def history(repo: Repo) -> None:
        for v in repo.history(DEADLINE):
            when = _time(v.commit.record_time)
            print(f"{v.hash[:7]}  {v.status:<10}  {v.commit.id[:7]}  {when}  {v.node.content}")

    def erased(repo: Repo) -> None:
        for v in repo.history(PASSPORT):
            why = f"erased by {v.redaction.author}: {v.redaction.reason}" if v.redaction else ""
            print(f"{v.hash[:7]}  {v.status:<10}  {v.commit.id[:7]}  {_time(v.commit.record_time)}  {why}")

    def blame(repo: Repo) -> None:
        b = repo.blame(TRIP)
        print(f"{TRIP}: written by {b.commit.id[:7]} ({b.commit.author}, {_time(b.commit.record_time)})")
        for line in b.lines:
            print(f"{line.commit[:7]}  {_time(line.record_time)}  {line.text}")

    def diff(a: str, b: str) -> Callable[[Repo], None]:
        def run(repo: Repo) -> None:
            d = repo.diff(a, b)
            for ch in d.added:
                print(f"+ {ch.id}  {_value(ch.new.content if ch.new else None)}")
            for ch in d.removed:
                print(f"- {ch.id}")
            for ch in d.modified:
                old = _value(ch.old.content if ch.old else None)
                new = _value(ch.new.content if ch.new else None)
                print(f"~ {ch.id}  {old} -> {new}")

        return run

    def branches(repo: Repo) -> None:
        for name, tip in repo.branch_tips():
            print(f"{'*' if name == repo.head else ' '} {name:<8} {tip.id[:7]}  {tip.message}")

    return {
        "log": lambda repo: _print_log(list(repo.log())),
        "show": lambda repo: _print_node(repo.get(DEADLINE)),
        "show-as-of": lambda repo: _print_node(repo.get(DEADLINE, as_of=datetime.fromisoformat(JUNE_2))),
        "history": history,
        "erased": erased,
        "blame": blame,
        "diff-since": diff(f"main@{{{JUNE_2}}}", "main"),
        "diff-branch": diff("main", "what-if"),
        "branch": branches,
        "search": lambda repo: [
            print(f"{hit.score:.4f}  {hit.id}  {_value(hit.node.content)}")
            for hit in repo.search("when must the passport be renewed", k=3)
        ],
        "context": lambda repo: print(repo.context("passport deadline", budget_tokens=60).render()),
    }


QUERIES = [
    ("log", "What happened, newest first", ["log"]),
    ("show", "What is true now", ["show", DEADLINE]),
    ("show-as-of", "What the agent believed on June 2 (record time)", ["show", DEADLINE, "--as-of", JUNE_2]),
    ("history", "Every version of the deadline, and what replaced it", ["history", DEADLINE]),
    ("erased", "The erased passport number: history keeps its hash, not its bytes", ["history", PASSPORT]),
    ("blame", "Who wrote each line of the trip note, and when", ["blame", TRIP]),
    ("diff-since", "What changed since June 2", ["diff", f"main@{{{JUNE_2}}}", "main"]),
    ("diff-branch", "What the speculative run would change", ["diff", "main", "what-if"]),
    ("branch", "Branches", ["branch"]),
    ("search", "Recall by meaning and words", ["search", "when must the passport be renewed", "-k", "3"]),
    (
        "context",
        "A cited context for a prompt, within 60 tokens",
        ["context", "passport deadline", "--budget", "60"],
    ),
]


def choose_embedder() -> str:
    """Use the built-in offline model when its extra is installed, else the tiny test embedder."""
    with Repo.open(STORE) as repo:
        for name in ("minilm", "hash"):
            try:
                repo.config("embedder", name)
            except InvalidInput:
                continue
            return name
    return "none"


def cli_available() -> bool:
    """Whether ``python -m mnemo_cli`` runs here."""
    done = subprocess.run(
        [sys.executable, "-m", "mnemo_cli", "--help"], capture_output=True, check=False, timeout=60
    )
    return done.returncode == 0


def show() -> None:
    """Ask the store the questions of the README, through the CLI when it is there."""
    use_cli = cli_available()
    fallback = _fallback_queries()
    for name, title, args in QUERIES:
        print(f"\n# {title}")
        print(f"$ mnemo --repo {STORE} {' '.join(args)}", flush=True)
        if use_cli:
            done = subprocess.run(
                [sys.executable, "-m", "mnemo_cli", "--repo", str(STORE), *args], check=False
            )
            if done.returncode != 0:
                raise SystemExit(f"mnemo {' '.join(args)} exited with {done.returncode}")
        else:
            with Repo.open(STORE) as repo:
                fallback[name](repo)
    if not use_cli:
        print("\n(the mnemo command line is not installed here: answers printed through the Python API)")


def main() -> None:
    """Record the story, then show it."""
    remember(SimulatedClock())
    print(f"(semantic recall with the {choose_embedder()} embedder)")
    show()
    print(f"\nThe store is in ./{STORE}; explore it with: .venv/bin/mnemo --repo {STORE} log")


if __name__ == "__main__":
    main()

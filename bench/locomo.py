"""Reading LoCoMo-format conversations: turns as memories, questions with their evidence.

LoCoMo (Maharana et al., "Evaluating Very Long-Term Conversational Memory of LLM
Agents", ACL 2024) publishes long two-person conversations in sessions, with
questions annotated with the turns that hold their evidence. The files are read
where they lie (``--data DIR``); nothing of them is kept in the project.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

CATEGORIES = (1, 2, 3, 4)
"""The categories with an answer (5 is adversarial: no evidence to recall)."""

_DIA = re.compile(r"^D(\d+):(\d+)$")
_SESSION = re.compile(r"^session_(\d+)$")


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    speaker: str
    content: str
    when: datetime


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: frozenset[str]


@dataclass(frozen=True)
class Conversation:
    name: str
    sessions: list[list[Turn]]
    questions: list[Question]

    @property
    def turns(self) -> list[Turn]:
        return [turn for session in self.sessions for turn in session]


def session_time(text: str) -> datetime:
    """``1:56 pm on 8 May, 2023`` as a UTC time."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def turn_content(turn: dict[str, object]) -> str:
    """What an agent would remember of a turn: who said what, and a shared photo's caption."""
    text = f"{turn['speaker']}: {turn['text']}"
    caption = turn.get("blip_caption")
    if caption:
        text += f" [shares a photo: {caption}]"
    return text


def load(path: Path) -> Conversation:
    """One conversation file; malformed evidence entries (and questions left with none) are skipped."""
    data = json.loads(path.read_text())
    conv = data.get("conversation", data)
    numbers = sorted(int(m.group(1)) for key in conv if (m := _SESSION.match(key)))
    sessions: list[list[Turn]] = []
    known: set[str] = set()
    for n in numbers:
        when = session_time(conv[f"session_{n}_date_time"])
        turns = [
            Turn(t["dia_id"], n, t["speaker"], turn_content(t), when)
            for t in conv[f"session_{n}"]
            if _DIA.match(t.get("dia_id", ""))
        ]
        known.update(t.dia_id for t in turns)
        sessions.append(turns)
    questions = []
    for qa in data["qa"]:
        if qa.get("category") not in CATEGORIES:
            continue
        evidence = frozenset(e.strip() for e in qa.get("evidence", []) if e.strip() in known)
        if evidence:
            questions.append(Question(qa["question"], int(qa["category"]), evidence))
    return Conversation(path.stem, sessions, questions)


def load_all(folder: Path) -> list[Conversation]:
    """Every ``*.json`` conversation of ``folder``, by name."""
    return [load(path) for path in sorted(folder.glob("*.json"))]


def memory_id(turn: Turn) -> str:
    """The id a turn is remembered under: ``chat/s<session>/t<turn>``."""
    match = _DIA.match(turn.dia_id)
    assert match is not None
    return f"chat/s{match.group(1)}/t{match.group(2)}"

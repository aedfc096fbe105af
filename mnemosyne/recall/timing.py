"""Questions that ask when, and memories that say when.

A question such as "When did Mira move to Lisbon?" is answered by the memory
that names the time ("We moved to Lisbon last May"), not by the one that only
mentions Lisbon again. In a hybrid search such a question lifts candidates whose
text names a time by :data:`TIME_WEIGHT` (ADR 74 has the measure: on five long
conversations, "when" questions found 0.824 -> 0.859 of their evidence in the
top 10, and no other kind lost). Only the text is read: an event time is set
on every memory of a conversation alike, so it tells none of them apart.
"""

from __future__ import annotations

import re

TIME_WEIGHT = 0.1
"""What a candidate naming a time gains in a hybrid score (on the [0, 1.5] scale of
:func:`mnemosyne.recall.fusion.fuse`) when the query asks when."""

_ASKS_WHEN = re.compile(
    r"^\W*(when|how long|since when|what (year|month|date|day|time|week|weekend))\b"
    r"|\b(when did|when does|when do|when is|when was|when will|what date|which (year|month|day))\b",
    re.IGNORECASE,
)

_NAMES_A_TIME = re.compile(
    r"\b(yesterday|today|tonight|tomorrow"
    r"|last (week|weekend|month|year|night|summer|winter|spring|fall|autumn|time)"
    r"|next (week|weekend|month|year)|ago|weekend"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday"
    r"|january|february|march|april|june|july|august|september|october|november|december"
    r"|(19|20)\d\d)\b",
    re.IGNORECASE,
)
# "may" is left out: as a verb it is far more common than the month.


def asks_when(query: str) -> bool:
    """Whether ``query`` asks for a time ("When did …", "How long …", "What year …")."""
    return _ASKS_WHEN.search(query) is not None


def names_a_time(text: str) -> bool:
    """Whether ``text`` names a time: a day, a month, a year, "yesterday", "last week", "… ago"."""
    return _NAMES_A_TIME.search(text) is not None

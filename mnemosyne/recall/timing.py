"""Questions that ask when, and memories that say when.

A question such as "When did Mira move to Lisbon?" is answered by the memory
that names the time ("We moved to Lisbon last May"), not by the one that only
mentions Lisbon again. Both are features of a hybrid search's ranking
(:mod:`mnemosyne.recall.ranker`; ADRs 74 and 81). Only the text is read: an event
time is set on every memory of a conversation alike, so it tells none of them apart.
"""

from __future__ import annotations

import itertools
import re

_ASKS_WHEN = re.compile(
    r"^\W*(when|how long|since when|what (year|month|date|day|time|week|weekend))\b"
    r"|\b(when did|when does|when do|when is|when was|when will|what date|which (year|month|day))\b",
    re.IGNORECASE,
)

_WORD = re.compile(r"\w+")
_YEAR = re.compile(r"\b(19|20)\d\d\b")
_TIME_WORDS = frozenset(
    "yesterday today tonight tomorrow ago weekend monday tuesday wednesday thursday friday saturday sunday"
    " january february march april june july august september october november december".split()
)
_AFTER_LAST = frozenset("week weekend month year night summer winter spring fall autumn time".split())
_AFTER_NEXT = frozenset("week weekend month year".split())
# "may" is left out: as a verb it is far more common than the month.


def asks_when(query: str) -> bool:
    """Whether ``query`` asks for a time ("When did …", "How long …", "What year …")."""
    return _ASKS_WHEN.search(query) is not None


def names_a_time(text: str) -> bool:
    """Whether ``text`` names a time: a day, a month, a year, "yesterday", "last week", "… ago".

    Read word by word (a hybrid search asks it of every candidate; one pass over the
    words is twice as fast as a regular expression of alternatives).
    """
    found = _WORD.findall(text.lower())
    present = set(found)
    if not _TIME_WORDS.isdisjoint(present) or _YEAR.search(text) is not None:
        return True
    if "last" in present or "next" in present:
        for word, following in itertools.pairwise(found):
            if (word == "last" and following in _AFTER_LAST) or (word == "next" and following in _AFTER_NEXT):
                return True
    return False

"""What recall reads of a node: its text, its words, and the hash of its content."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import Stemmer

from mnemosyne.model import codec
from mnemosyne.model.objects import Claim, Node

MAX_WORD = 64
"""Longer runs of letters and digits (ids, base64) are cut to this many characters."""
# The group keeps a run's first MAX_WORD characters and the match swallows the rest:
# the cut happens inside the regex engine rather than in a Python loop over words.
# "_" separates words ([^\W_] is \w without it): a claim's predicate passport_deadline
# is found by "passport", as the id users/mira/passport_deadline always was.
_WORD = re.compile(rf"(\w{{1,{MAX_WORD}}})\w*", re.UNICODE)
_WORD_NO_UNDERSCORE = re.compile(rf"([^\W_]{{1,{MAX_WORD}}})[^\W_]*", re.UNICODE)  # slower: only where "_" is

STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with".split()
)
"""Words a query leaves out (Lucene's English set) unless it has no other: they rank nothing."""

_STEMMER = Stemmer.Stemmer("english")
_STEMS_KEPT = 1 << 16
"""Stems remembered (a dict look-up is ~5x cheaper than the stemmer); a text's words repeat."""


class _Stems(dict[str, str]):
    """Word -> stem, computed on first sight (``__missing__``), so a known word costs one look-up in C."""

    def __missing__(self, word: str) -> str:
        stem: str = _STEMMER.stemWord(word)
        self[word] = stem
        return stem


_STEMS = _Stems()


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)
    elif isinstance(value, dict):
        for item in value.values():
            _strings(item, out)


def text_of(node: Node) -> str:
    """The text recall indexes and embeds, and a context shows.

    Text content as it is; the string values of JSON content (or, when it holds
    none, the content as compact JSON, so a number or a map of numbers still
    reads); a claim's subject, predicate and value.
    """
    content = node.content
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, Claim):
        parts.extend([content.subject, content.predicate])
        _strings(content.value, parts)
        if not isinstance(content.value, str):
            parts.append(str(content.value))
    else:
        _strings(content, parts)
        if not any(part.strip() for part in parts):
            return json.dumps(content, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return " ".join(parts)


_ID_SEPARATORS = re.compile(r"[/_.\-]+")


def id_words(node_id: str) -> list[str]:
    """The words of an id: its segments, split at ``/``, ``_``, ``-`` and ``.`` too.

    So ``users/mira/prefs/language`` is found by "mira" and "language".
    """
    # Ids of one namespace share all but their last segment, so the words before the
    # last "/" are remembered, and a last segment of ASCII letters and digits (a
    # counter, a hex id) is one word as it stands: the two regexes run on the rest
    # only (on every id they took a tenth of a rebuild's postings work, 2.5 µs an
    # id). The parts' words are the whole's: "/" becomes a space, which no word
    # spans and lower() sees no case context across (its one context rule, final
    # sigma, stops at a space). A counter's digits have no stem to find.
    head, _, tail = node_id.rpartition("/")
    found = [*_prefix_words(head)]
    if tail.isascii() and tail.isdigit():
        found.append(tail[:MAX_WORD])
    elif tail.isascii() and tail.isalnum():
        found.append(_STEMS[tail[:MAX_WORD].lower()])
    else:
        found += _separated_words(tail)
    return found


@functools.lru_cache(maxsize=4096)
def _prefix_words(prefix: str) -> tuple[str, ...]:
    """The words of an id's part before its last "/" (bounded: ids may have any shape)."""
    return tuple(_separated_words(prefix))


def _separated_words(text: str) -> list[str]:
    return words(_ID_SEPARATORS.sub(" ", text))


def document_words(node: Node) -> list[str]:
    """The words the lexical index keeps for one version: its text's, then its id's."""
    return words(text_of(node)) + id_words(node.id)


def words(text: str) -> list[str]:
    """The terms of ``text``, in order: its words lower-cased and stemmed.

    A word is a run of Unicode letters and digits; English words are reduced to
    their Snowball stem, so "researched", "researching" and "research" are one
    term (a word of another script passes through unchanged).
    """
    if len(_STEMS) > _STEMS_KEPT:
        _STEMS.clear()
    lowered = text.lower()
    found = (_WORD_NO_UNDERSCORE if "_" in lowered else _WORD).findall(lowered)
    return list(map(_STEMS.__getitem__, found))


def forget_words() -> None:
    """Drop what this process remembers of texts' words (stems, id prefixes): erasure calls it.

    The caches hold words of the memories indexed, in this process only; an erased
    memory's words must not outlive it there either.
    """
    _STEMS.clear()
    _prefix_words.cache_clear()


def unstemmed_words(text: str) -> list[str]:
    """The words of ``text`` as layouts before 5 indexed them: lower-cased runs of word characters.

    A read-only handle searching an index not yet re-indexed asks in these terms.
    """
    found: list[str] = _WORD.findall(text.lower())
    return found


def query_words(text: str) -> list[str]:
    """The terms a query ranks by: :func:`words` without stop words (all of them when it has no other)."""
    found = _WORD_NO_UNDERSCORE.findall(text.lower())
    kept = [word for word in found if word not in STOP_WORDS]
    return words(" ".join(kept or found))


def content_hash(node: Node) -> bytes:
    """blake3 of the canonical bytes of the node's content alone: equal texts, equal keys."""
    return codec.object_id(codec.encode(node.content))

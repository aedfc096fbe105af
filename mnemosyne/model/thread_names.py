"""How a LangGraph thread's branch is named: readable, reversible, a valid branch name (ADR 28).

A thread is the branch ``threads/<segment>``. The segment of a *plain* thread id
(letters, digits, ``.``, ``_``, ``-``, starting with a letter or digit, no ``..``,
not ending in ``.`` or ``.lock``, at most 80 characters) is the id itself. Any
other id is escaped: ``_``, then the id with every character but letters,
digits, ``-`` and ``.`` written as ``_`` and two upper-case hex digits per UTF-8
byte (a ``.`` too where it would end the name or follow another ``.``). So
``user@example.com`` is ``threads/_user_40example.com``, ``chat 1`` is
``threads/_chat_201`` and ``a/b`` is ``threads/_a_2Fb``, and each reads back to its
id. An escaped segment longer than 80 characters keeps a readable prefix and ends
in ``_x`` and 32 hex digits of the id's SHA-256: an id that long does not read
back from its name, but every checkpoint node keeps the id (``thread_id``).

Before ADR 28 every id that was not plain was ``_`` and those 32 digest digits
alone (:func:`legacy_thread_branch`); the saver still finds a thread kept under
that name and writes on there, and ``Repo.threads`` lists it.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from mnemosyne.errors import InvalidInput
from mnemosyne.model.objects import Commit

THREADS_PREFIX = "threads/"
"""Every thread's branch starts with this."""

MAX_SEGMENT = 80
"""The longest segment a thread's branch ends in (a thread's node ids nest three more below it)."""

_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,79}")
# Spelled out rather than taken from ``string``, which ``import mnemosyne`` need not load.
_LITERAL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-.")
_HEX = frozenset("0123456789ABCDEF")
_DIGEST_MARK = "_x"
_DIGEST_DIGITS = 32


def is_plain(name: str) -> bool:
    """Whether ``name`` stands for itself in a branch name or an id segment (see the module)."""
    return bool(_PLAIN.fullmatch(name)) and ".." not in name and not name.endswith((".", ".lock"))


def _digest(name: str) -> str:
    import hashlib  # OpenSSL's hashes load in milliseconds: only a name that needs a digest pays

    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_DIGITS]


def _escaped(name: str) -> list[str]:
    """The escaped form of ``name``, one token per character (a literal, or ``_XX`` per byte)."""
    tokens: list[str] = []
    last = len(name) - 1
    for index, char in enumerate(name):
        literal = char in _LITERAL
        if char == "." and (index == last or (tokens and tokens[-1] == ".") or name[index:] == ".lock"):
            literal = False  # no "..", and no name ending in "." or ".lock"
        if literal:
            tokens.append(char)
        else:
            tokens.append("".join(f"_{byte:02X}" for byte in char.encode("utf-8", "surrogatepass")))
    return tokens


def _check(thread_id: object) -> str:
    if not isinstance(thread_id, str):
        raise InvalidInput(f"a thread id must be text, not {type(thread_id).__name__}")
    return thread_id


def thread_segment(thread_id: str) -> str:
    """The last segment of ``thread_id``'s branch name: the id when plain, else escaped.

    Raises:
        InvalidInput: ``thread_id`` is not text.
    """
    if is_plain(_check(thread_id)):
        return thread_id
    tokens = _escaped(thread_id)
    whole = "_" + "".join(tokens)
    if len(whole) <= MAX_SEGMENT:
        return whole
    prefix = "_"
    for token in tokens:
        if len(prefix) + len(token) > MAX_SEGMENT - len(_DIGEST_MARK) - _DIGEST_DIGITS:
            break
        prefix += token
    return prefix + _DIGEST_MARK + _digest(thread_id)


def thread_branch_name(thread_id: str) -> str:
    """The branch a new thread ``thread_id`` gets: ``threads/`` and its segment.

    ``Repo.thread_branch`` says which branch holds an existing thread (one kept
    under its :func:`legacy_thread_branch` name, too).

    Raises:
        InvalidInput: ``thread_id`` is not text.
    """
    return THREADS_PREFIX + thread_segment(thread_id)


def legacy_thread_branch(thread_id: str) -> str | None:
    """The branch a thread that is not plain had before ADR 28 (``threads/_`` and a digest); None when plain.

    Raises:
        InvalidInput: ``thread_id`` is not text.
    """
    if is_plain(_check(thread_id)):
        return None
    return THREADS_PREFIX + "_" + _digest(thread_id)


def thread_id_of(branch: str) -> str | None:
    """The thread id a thread's branch name reads back to; None when the name holds a digest instead.

    None, too, for a branch that is not a thread's (not ``threads/<one segment>``,
    or a segment this encoding would not have made).
    """
    if not isinstance(branch, str) or not branch.startswith(THREADS_PREFIX):
        return None
    segment = branch[len(THREADS_PREFIX) :]
    if not segment or "/" in segment:
        return None
    if not segment.startswith("_"):
        return segment if is_plain(segment) else None
    data = bytearray()
    index = 1
    while index < len(segment):
        char = segment[index]
        if char == "_":
            pair = segment[index + 1 : index + 3]
            if len(pair) != 2 or not set(pair) <= _HEX:
                return None  # a digest (``_x…``), or no escape of ours
            data.append(int(pair, 16))
            index += 3
        elif char in _LITERAL:
            data.append(ord(char))
            index += 1
        else:
            return None
    try:
        thread_id = data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None
    # Only the one name the encoding gives an id reads back (so "_abc", which no id is escaped to, does not).
    return thread_id if thread_segment(thread_id) == segment else None


def is_thread_branch(branch: str) -> bool:
    """Whether ``branch`` is named as a thread's is: ``threads/`` and one segment."""
    rest = branch[len(THREADS_PREFIX) :] if branch.startswith(THREADS_PREFIX) else ""
    return bool(rest) and "/" not in rest


def checkpoint_thread_id(content: Any) -> str | None:
    """The thread id a checkpoint node's content keeps (``thread_id``); None for any other node."""
    if isinstance(content, dict) and "checkpoint" in content and isinstance(content.get("thread_id"), str):
        return str(content["thread_id"])
    return None


class Thread(msgspec.Struct, frozen=True, kw_only=True):
    """One LangGraph thread of a tenant: its id, its branch and the commit at its tip.

    Attributes:
        thread_id: the thread's id, read back from the branch name, or from a
            checkpoint on it when the name holds a digest (an id longer than 80
            characters escaped, or a name from before ADR 28); None when neither
            says (a thread with pending writes and no checkpoint).
        branch: the branch that holds the thread (``mnemo log --thread``'s).
        commit: the commit at the branch's tip: the thread's last write.
    """

    thread_id: str | None
    branch: str
    commit: Commit

"""How LangGraph's threads, namespaces and checkpoints are named in a store (ADRs 17 and 26).

A thread is a branch named by :mod:`mnemosyne.model.thread_names`: ``threads/`` and
the thread id, escaped when it is not plain, so it reads back (``Repo.thread_branch``
finds a thread kept under its name from before, too). Inside the branch, each
namespace, checkpoint id, task id and channel is one id segment. A checkpoint or task
id is the name itself when it is plain (letters, digits, ``.``, ``_``, ``-``, starting
with a letter or digit) and otherwise ``_`` plus a digest (:func:`segment`). A namespace
and a channel read as themselves (ADR 65): :func:`namespace_segment` and
:func:`channel_segment`. The real names are kept in the nodes.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from typing import Any

from langchain_core.runnables import RunnableConfig

from mnemosyne import CommitResult, InvalidInput
from mnemosyne.integrations.langgraph.namespaces import escape, unescape
from mnemosyne.model.thread_names import THREADS_PREFIX, is_plain, thread_branch_name

BRANCH_PREFIX = THREADS_PREFIX
"""Every thread's branch starts with this."""


def segment(name: str) -> str:
    """One id segment standing for a namespace, checkpoint id or task id, distinct for distinct names.

    A plain name stands for itself; anything else (``/``, spaces, unicode, the
    empty root namespace, a long name, a name starting with ``_``) becomes ``_``
    and 32 hex digits of its SHA-256, which no plain name can equal.

    Raises:
        InvalidInput: ``name`` is not a string.
    """
    if not isinstance(name, str):
        raise InvalidInput(f"a namespace, checkpoint id or task id must be text, not {type(name).__name__}")
    return _segment(name)


@functools.lru_cache(maxsize=4096)
def _segment(name: str) -> str:
    # Cached: every put and read names its namespace and channels again (a digest for the root one).
    if is_plain(name):
        return name
    return "_" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:32]


ROOT_NAMESPACE = "_root"
"""The segment of the empty (root) namespace.

Never another namespace's: a plain name stands for itself and ``root`` is plain, so
no escaped name is ``_root``; and no digest an earlier version wrote is either.
"""

_LONGEST = 80
"""The longest readable segment, in UTF-8 bytes; past it, a readable prefix, ``~`` and a digest."""


def namespace_segment(ns: str) -> str:
    """The id segment of checkpoint namespace ``ns``: readable, reversible, distinct (ADR 65).

    A plain name stands for itself (as it did before); the empty root namespace is
    ``_root``; any other name is ``_`` and the name, with ``%``, ``/``, ``~`` and
    control or invisible characters percent-encoded (``child:1ef…`` is
    ``_child:1ef…``). The leading ``_`` keeps every such segment apart from the
    ``_`` and 32 hex digits earlier versions wrote there (:func:`segment`), as
    only a plain name is 32 hex digits. A segment past 80 characters keeps a
    readable prefix and ends in ``~`` and a digest of the name (:func:`name_of`
    then says None: the checkpoint nodes keep the name).

    Raises:
        InvalidInput: ``ns`` is not a string.
    """
    if not isinstance(ns, str):
        raise InvalidInput(f"a namespace must be text, not {type(ns).__name__}")
    return _namespace_segment(ns)


@functools.lru_cache(maxsize=4096)
def _namespace_segment(ns: str) -> str:
    if is_plain(ns):
        return ns
    if not ns:
        return ROOT_NAMESPACE
    return _bounded("_" + escape(ns), ns)


def channel_segment(channel: str) -> str:
    """A channel's id segment: its name, ``%``, ``/``, ``~``, control and invisible characters escaped.

    ``messages``, ``__start__`` and ``branch:to:agent`` stand for themselves. A
    segment past 80 characters keeps a readable prefix, then ``~`` and a digest.

    Raises:
        InvalidInput: ``channel`` is not a string.
    """
    if not isinstance(channel, str):
        raise InvalidInput(f"a channel must be text, not {type(channel).__name__}")
    return _channel_segment(channel)


@functools.lru_cache(maxsize=4096)
def _channel_segment(channel: str) -> str:
    return _bounded(escape(channel), channel)


def _bounded(escaped: str, name: str) -> str:
    """``escaped``, or past :data:`_LONGEST` characters a readable prefix, ``~`` and a digest of ``name``."""
    if len(escaped.encode("utf-8", "surrogatepass")) <= _LONGEST:
        return escaped
    prefix = escaped[: _LONGEST - 33]
    while len(prefix.encode("utf-8", "surrogatepass")) > _LONGEST - 33:
        prefix = prefix[:-1]
    if "%" in prefix[-2:]:
        prefix = prefix[: prefix.rindex("%")]  # never half an escape
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{prefix}~{digest}"


def name_of(segment_text: str) -> str | None:
    """The namespace a :func:`namespace_segment` stands for; None for a digested or earlier form."""
    if segment_text == ROOT_NAMESPACE:
        return ""
    if not segment_text.startswith("_"):
        return segment_text if is_plain(segment_text) else None
    rest = segment_text[1:]
    if "~" in rest:
        return None
    try:
        name = unescape(rest)
    except UnicodeDecodeError:
        return None
    return name if namespace_segment(name) == segment_text else None


def thread_branch(thread_id: str) -> str:
    """The branch a new thread ``thread_id`` gets (``Repo.thread_branch``: the one that holds it)."""
    return thread_branch_name(thread_id)


def unpack(packed: list[str]) -> tuple[str, bytes]:
    """A serialized value as checkpoints and writes held it before ADR 33: ``[type, base64]``."""
    return packed[0], base64.b64decode(packed[1])


def made_on(result: CommitResult) -> str:
    """The tip a commit was made on (the tip itself for a commit that changed nothing)."""
    return result.parents[0] if result.created and result.parents else result.id


def configurable(config: RunnableConfig) -> dict[str, Any]:
    """A config's ``configurable`` part, which must name a thread.

    Raises:
        InvalidInput: it names none.
    """
    found = config.get("configurable")
    if not isinstance(found, dict) or "thread_id" not in found:
        raise InvalidInput("the config must name a thread: {'configurable': {'thread_id': ...}}")
    return found

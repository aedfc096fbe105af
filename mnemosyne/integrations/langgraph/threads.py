"""How LangGraph's threads, namespaces and checkpoints are named in a store (ADRs 17 and 26).

A thread is a branch named by :mod:`mnemosyne.model.thread_names`: ``threads/`` and
the thread id, escaped when it is not plain, so it reads back (``Repo.thread_branch``
finds a thread kept under its name from before, too). Inside the branch, each
namespace, checkpoint id and task id is one id segment: the name itself when it is
plain (letters, digits, ``.``, ``_``, ``-``, starting with a letter or digit) and
otherwise ``_`` plus a digest; the real names are kept in the nodes.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from typing import Any

from langchain_core.runnables import RunnableConfig

from mnemosyne import CommitResult, InvalidInput
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

"""How LangGraph's threads, namespaces and checkpoints are named in a store (ADR 0017).

A thread is the branch ``threads/<segment>``; each id segment is the name itself
when it is plain (letters, digits, ``.``, ``_``, ``-``, starting with a letter or
digit) and otherwise ``_`` plus a digest, so any thread id, namespace or task id
maps to a valid id and branch name; the real names are kept in the nodes.
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

from langchain_core.runnables import RunnableConfig

from mnemosyne import CommitResult, InvalidInput

BRANCH_PREFIX = "threads/"
"""Every thread's branch starts with this."""

_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,79}")


def segment(name: str) -> str:
    """One id (and branch name) segment standing for ``name``, distinct for distinct names.

    A plain name stands for itself; anything else (``/``, spaces, unicode, the
    empty root namespace, a long name, a name starting with ``_``) becomes ``_``
    and 32 hex digits of its SHA-256, which no plain name can equal.

    Raises:
        InvalidInput: ``name`` is not a string.
    """
    if not isinstance(name, str):
        raise InvalidInput(f"a thread id, namespace or task id must be a string, not {type(name).__name__}")
    if _PLAIN.fullmatch(name) and ".." not in name and not name.endswith((".", ".lock")):
        return name
    return "_" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def thread_branch(thread_id: str) -> str:
    """The branch holding ``thread_id``'s checkpoints."""
    return BRANCH_PREFIX + segment(thread_id)


def pack(typed: tuple[str, bytes]) -> list[str]:
    """LangGraph's serialized value (type, bytes) as JSON content: [type, base64]."""
    return [typed[0], base64.b64encode(typed[1]).decode("ascii")]


def unpack(packed: list[str]) -> tuple[str, bytes]:
    """The serialized value :func:`pack` stored."""
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

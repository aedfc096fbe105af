"""The request bodies of the HTTP API: one struct each, read strictly, described in the OpenAPI document.

A body is JSON read by the library's strict reader (a key given twice, ``NaN``
and oversized integers are refused; nodes are read as ``mnemo commit`` reads
them); a field the body does not take is refused, naming it and the ones it
takes, so a misspelt filter is never silently ignored.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from mnemosyne import InvalidInput, Node
from mnemosyne.model.choices import ClaimPolicy, Kind, MergeStrategy, SearchMode
from mnemosyne.model.defaults import CONTEXT_BUDGET, CONTEXT_K, SEARCH_K
from mnemosyne.model.jsonform import from_builtins, json_values, type_info

B = TypeVar("B", bound=msgspec.Struct)


class CommitBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One commit: nodes to write and ids to remove, atomically.

    Attributes:
        put: nodes in their JSON form (a node without an id gets a generated one).
        delete: ids to remove from the branch (history keeps them).
        message: why.
        author: who (default: the token's name, else ``unknown``).
        branch: the branch to commit to (default: HEAD's branch).
        meta: a JSON map kept in the commit.
        allow_empty: record a commit even when nothing changes.
        on_claim_conflict: ``refuse``, ``replace`` or ``keep``.
    """

    put: list[Node] = []
    delete: list[str] = []
    message: str = ""
    author: str | None = None
    branch: str | None = None
    meta: dict[str, Any] | None = None
    allow_empty: bool = False
    on_claim_conflict: ClaimPolicy = "refuse"


class SearchBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A search: the query and every filter :meth:`Repo.search` takes.

    ``verified_within`` is a duration (``30d``, ``12h``, ``90m``, ``45s``); times are RFC 3339.
    """

    query: str
    k: int = SEARCH_K
    at: str | None = None
    as_of: str | None = None
    prefix: str | None = None
    valid_at: str | None = None
    kind: Kind | None = None
    meta: dict[str, Any] | None = None
    mode: SearchMode = "hybrid"
    run_id: str | None = None
    allowed_for: str | None = None
    max_sensitivity: str | None = None
    verified_within: str | None = None


class ContextBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A context: the query, the token budget and every filter :meth:`Repo.context` takes."""

    query: str
    budget_tokens: int = CONTEXT_BUDGET
    k: int = CONTEXT_K
    at: str | None = None
    as_of: str | None = None
    prefix: str | None = None
    valid_at: str | None = None
    run_id: str | None = None
    allowed_for: str | None = None
    max_sensitivity: str | None = None
    verified_within: str | None = None


class VerifyBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Re-confirm the current versions of ``ids`` (a commit that changes no memory)."""

    ids: list[str]
    by: str | None = None
    note: str | None = None
    branch: str | None = None


class BranchBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Create branch ``name`` at revision ``at`` (default: HEAD), or with no commits (``orphan``)."""

    name: str
    at: str | None = None
    orphan: bool = False
    author: str | None = None


class MergeBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Merge revision ``source`` into branch ``into`` (default: the current branch).

    ``resolutions`` maps an id in conflict to ``ours``, ``theirs``, ``base``,
    ``delete`` or a node (its JSON form) to write.
    """

    source: str
    into: str | None = None
    resolutions: dict[str, Any] | None = None
    strategy: MergeStrategy | None = None
    message: str | None = None
    author: str | None = None
    allow_unrelated_histories: bool = False


class ForgetBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Erase every version of each of ``ids`` for real (or one ``version`` of a single id)."""

    ids: list[str]
    reason: str
    author: str | None = None
    version: str | None = None


class HistoriesBody(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Several ids read from one snapshot in one request (:meth:`Repo.histories`).

    Attributes:
        ids: the node ids (each once in the answer, in the order given).
        at: a revision (default: HEAD).
        as_of: read the branch as it was at this record time (RFC 3339).
        limit: at most this many versions of each id, the newest (0: the nodes alone).
        include_expired: give ``node`` even past its ``expires_at``.
    """

    ids: list[str]
    at: str | None = None
    as_of: str | None = None
    limit: int | None = None
    include_expired: bool = False


BODIES: tuple[type[msgspec.Struct], ...] = (
    CommitBody,
    SearchBody,
    ContextBody,
    VerifyBody,
    BranchBody,
    MergeBody,
    ForgetBody,
    HistoriesBody,
)
"""Every body the API reads."""


def read_body(raw: bytes, cls: type[B]) -> B:
    """The body ``raw`` holds, as ``cls``.

    Raises:
        InvalidInput: not UTF-8 JSON, not one object, a field ``cls`` does not
            take, or a value that does not fit (each naming where).
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"the request body is not UTF-8 text (bad byte at offset {exc.start})") from None
    values = json_values(text, "the request body")
    if len(values) != 1 or not isinstance(values[0][1], dict):
        raise InvalidInput(f"the request body must be one JSON object ({cls.__name__})")
    value = values[0][1]
    taken = [field.encode_name for field in type_info(cls).fields]  # type: ignore[attr-defined]
    unknown = sorted(set(value) - set(taken))
    if unknown:
        raise InvalidInput(f"the request body has no field {unknown[0]!r} (it takes {', '.join(taken)})")
    return from_builtins(value, cls, "")  # errors name the field: put[2], meta

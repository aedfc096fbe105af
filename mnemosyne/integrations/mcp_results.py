"""The MCP server's result shapes: the library's JSON form of each result, as typed output schemas.

Split from :mod:`mnemosyne.integrations.mcp_server`, which returns these from its tools;
the SDK publishes each as the tool's output schema.
"""

from typing import Any

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

from mnemosyne.model.choices import Kind
from mnemosyne.model.results import Status

# -- result shapes ------------------------------------------------------------------
# The library's JSON form of each result, as typed output schemas. Unknown keys pass
# through (extra="allow"): a field the library adds later still reaches the client.

_FORM = ConfigDict(extra="allow")


@with_config(_FORM)
class ProvenanceJSON(TypedDict):
    """Where a memory came from."""

    agent_step: int | None
    observation: str | None
    tool_call: str | None
    source: str | None


@with_config(_FORM)
class NodeJSON(TypedDict):
    """One version of one memory, with every field and its hash."""

    id: str
    content: Any
    kind: Kind
    provenance: ProvenanceJSON
    event_time: str | None
    meta: dict[str, Any]
    expires_at: str | None
    hash: str


@with_config(_FORM)
class CommitJSON(TypedDict):
    """A commit: its snapshot (tree), parents, record time, author and message."""

    id: str
    tree: str
    parents: list[str]
    record_time: str
    author: str
    message: str
    meta: dict[str, Any]
    verified: list[str]


@with_config(_FORM)
class CommitResultJSON(CommitJSON):
    """What a write did: the commit, the ids it wrote, and whether it recorded anything."""

    put_ids: list[str]
    modified_ids: list[str]
    deleted_ids: list[str]
    created: bool


@with_config(_FORM)
class RedactionJSON(TypedDict):
    """The record an erasure leaves: who erased which version, when and why."""

    id: str
    hash: str
    time: str
    author: str
    reason: str


@with_config(_FORM)
class ListJSON(TypedDict):
    """One page of memories in id order, and ``next_after``: where the next page starts (null: none)."""

    nodes: list[NodeJSON]
    next_after: str | None


@with_config(_FORM)
class HitJSON(TypedDict):
    """One search hit: the version current in the snapshot searched, and its ranks."""

    id: str
    hash: str
    node: NodeJSON
    score: float
    lexical_rank: int | None
    semantic_rank: int | None
    confirmed_at: str | None


@with_config(_FORM)
class RecallJSON(TypedDict):
    """The hits, best first."""

    hits: list[HitJSON]


@with_config(_FORM)
class ContextItemJSON(TypedDict):
    """One memory in a context, with its citation (id and hash)."""

    id: str
    hash: str
    text: str
    tokens: int
    score: float
    claim_in_force: bool
    confirmed_at: str | None
    event_time: str | None
    context_for: str | None


@with_config(_FORM)
class ContextJSON(TypedDict):
    """The best memories that fit the budget, and ``text``: them rendered for a prompt."""

    query: str
    budget_tokens: int
    tokens: int
    items: list[ContextItemJSON]
    text: str


@with_config(_FORM)
class VersionJSON(TypedDict):
    """One version of an id, with its derived status and the commit that wrote it."""

    id: str
    hash: str
    node: NodeJSON | None
    commit: CommitJSON
    status: Status
    ended_by: str | None
    superseded_by: str | None
    redaction: RedactionJSON | None
    verified: CommitJSON | None


@with_config(_FORM)
class HistoryJSON(TypedDict):
    """Every version of an id, newest first."""

    versions: list[VersionJSON]


@with_config(_FORM)
class BlameLineJSON(TypedDict):
    """One line (or JSON field) and the commit that wrote it."""

    key: str | None
    text: str
    commit: str
    author: str
    record_time: str


@with_config(_FORM)
class BlameJSON(TypedDict):
    """Who wrote the current version of an id, when, and from what."""

    id: str
    hash: str
    node: NodeJSON | None
    commit: CommitJSON
    lines: list[BlameLineJSON]
    redacted: bool
    redaction: RedactionJSON | None
    verified: CommitJSON | None


@with_config(_FORM)
class ChangeJSON(TypedDict):
    """One id that differs between two snapshots (a side is null when absent or erased)."""

    id: str
    old: NodeJSON | None
    new: NodeJSON | None
    old_hash: str | None
    new_hash: str | None
    redacted: bool


@with_config(_FORM)
class DiffJSON(TypedDict):
    """What changed from revision ``a`` to revision ``b``."""

    a: str
    b: str
    added: list[ChangeJSON]
    removed: list[ChangeJSON]
    modified: list[ChangeJSON]


@with_config(_FORM)
class LogJSON(TypedDict):
    """Commits, newest first."""

    commits: list[CommitJSON]


@with_config(_FORM)
class FactJSON(TypedDict):
    """A claim in force, with the commit that recorded it and its effective interval."""

    id: str
    node: NodeJSON
    commit: CommitJSON
    effective_from: str
    effective_to: str | None
    supersedes: str | None
    confirmed_at: str | None


@with_config(_FORM)
class FactsJSON(TypedDict):
    """The claims in force."""

    facts: list[FactJSON]


@with_config(_FORM)
class ForgetJSON(TypedDict):
    """What an erasure did: records made now, records from before, the commit that dropped the id."""

    redactions: list[RedactionJSON]
    already_erased: list[RedactionJSON]
    commit: CommitJSON | None

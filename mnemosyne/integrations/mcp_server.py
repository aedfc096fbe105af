"""An MCP server over one tenant of a store: the store's tools for an agent's host.

A face, as the command line is: each tool parses its arguments, calls the public
API of :class:`mnemosyne.Repo` and returns the result in the library's one JSON
form (:func:`mnemosyne.to_json`), described by a typed output schema. Nothing
here decides anything about memory.

- **Tools.** Reads: ``recall`` (search), ``context``, ``get``, ``list`` (ids under
  a prefix, a page at a time), ``history``, ``blame``, ``diff``, ``log``, ``facts``.
  Writes, offered only when the store is open for writing: ``remember`` (commit
  nodes given in their JSON form), ``delete`` (remove ids in a commit; history
  keeps them), ``verify`` (record that memories were re-confirmed), and
  ``forget`` (erasure) only when the server is built with ``allow_erase``.
- **Arguments.** A tool refuses an argument it does not take, naming it and the
  ones it takes: a misnamed argument is never silently ignored.
- **Resources.** Each memory is also a resource, ``mnemo://memory/{id}``, and so
  is its history, ``mnemo://history/{id}``. The server offers no prompts and does
  not advertise any (the SDK would).
- **Provenance.** ``remember`` fills the provenance fields a node leaves absent
  or null: ``source`` becomes ``"mcp"`` and ``tool_call`` names the tool and the
  request (``remember#7``). Fields the caller gave are kept as given, and a node
  given with its ``hash`` is written exactly as described (the hash pins every
  field, provenance included).
- **Author.** Of every write (``remember``, ``delete``, ``verify``, ``forget``): the
  server's configured author, else the name the MCP client gave in its
  ``clientInfo``, else the configured fallback.
- **Errors.** A :class:`mnemosyne.MnemoError` (and anything else a tool raises)
  becomes a tool error carrying its message on one line; the server keeps
  serving. Arguments of the wrong type are refused by the SDK, also as a tool error.
- **Freshness.** Every call opens its own read or write transaction, so each call
  sees what other processes committed before it, on the branch as it is then.

Needs the ``mcp`` extra (``pip install 'mnemosyne[mcp]'``, the official SDK's 2.x line).
"""

from collections.abc import Callable, Collection
from datetime import timedelta
from itertools import islice
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field, WithJsonSchema

from mnemosyne import InvalidInput, NotFound, Repo, to_json
from mnemosyne.integrations.mcp_protocol import OneLineServer, reported, resource_reported, strict
from mnemosyne.integrations.mcp_results import (
    BlameJSON,
    CommitJSON,
    CommitResultJSON,
    ContextJSON,
    DiffJSON,
    FactsJSON,
    ForgetJSON,
    HistoryJSON,
    ListJSON,
    LogJSON,
    NodeJSON,
    RecallJSON,
)
from mnemosyne.model.choices import ClaimPolicy, Kind
from mnemosyne.model.defaults import CONTEXT_BUDGET, DEFAULT_AUTHOR, SEARCH_K
from mnemosyne.model.jsonform import node_from_builtins, to_builtins
from mnemosyne.model.times import parse_duration

SOURCE = "mcp"
"""The provenance ``source`` of a memory written through this server (when the node names none)."""

LOG_LIMIT = 20
"""Commits ``log`` returns by default: an agent's context is small."""

LIST_LIMIT = 20
"""Memories ``list`` returns by default, a page; ``next_after`` says where the next one starts."""

LIST_MAX = 1000
"""The most memories one ``list`` page holds: a larger page would swamp the host, not help it."""

MEMORY_URI = "mnemo://memory/{+id}"
"""The resource of a memory (its current version on the server's branch); ``+``: ids hold ``/``."""

HISTORY_URI = "mnemo://history/{+id}"
"""The resource of a memory's history: every version, newest first."""

# -- arguments ----------------------------------------------------------------------

_TIME = {"type": ["string", "null"], "description": "RFC 3339 time; a bare date is midnight UTC."}
NODE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A node in the library's JSON form; only content is required.",
    "properties": {
        "id": {
            "type": ["string", "null"],
            "description": "The memory's stable key, '/'-separated (users/mira/prefs/language); "
            "omitted or null: generated.",
        },
        "content": {"description": "Text or any JSON value; for a claim, its object (see kind)."},
        "kind": {
            "enum": ["note", "claim", None],
            "description": "note (default), or claim: content is {subject, predicate, value, "
            "valid_from, valid_to?, confidence?, evidence?}.",
        },
        "provenance": {
            "type": ["object", "null"],
            "properties": {
                "agent_step": {"type": ["integer", "null"]},
                "observation": {"type": ["string", "null"]},
                "tool_call": {"type": ["string", "null"]},
                "source": {"type": ["string", "null"]},
            },
            "additionalProperties": False,
        },
        "event_time": _TIME,
        "meta": {"type": ["object", "null"], "description": "A JSON map for application policy."},
        "expires_at": _TIME,
        "hash": {
            "type": ["string", "null"],
            "description": "When given, must be the hash of the node described; the node is then "
            "written exactly as given.",
        },
    },
    "required": ["content"],
    "additionalProperties": False,
}
"""The published schema of one node; the library's strict reader checks each node itself."""

# The SDK validates only that each node is an object: the library's reader refuses the
# rest (unknown fields, a key twice, bad times, a hash that does not match) in its own words.
NodeArg = Annotated[dict[str, Any], WithJsonSchema(NODE_SCHEMA)]
Id = Annotated[str, Field(description="A node id, e.g. users/mira/prefs/language.")]
Prefix = Annotated[str | None, Field(description="Only ids under this namespace, e.g. users/mira/.")]
Rev = Annotated[
    str,
    Field(description="A revision: a branch, HEAD, a commit id or a prefix of 4+ hex, REV~N, BRANCH@{TIME}."),
]
OptionalRev = Annotated[
    str | None, Field(description="A revision to read instead of the server's branch (default: its tip).")
]
AsOf = Annotated[
    str | None,
    Field(description="Read the branch as it stood at this record time (RFC 3339): what was believed then."),
]
ValidAt = Annotated[
    str | None,
    Field(description="Claims must be in force at this valid time (RFC 3339); notes always pass."),
]
AllowedFor = Annotated[
    str | None,
    Field(
        description="The use the memories are for: a memory whose meta allowed_for lists uses is "
        "returned only for those; one without the list for any use (unless the store requires it)."
    ),
]
MaxSensitivity = Annotated[
    str | None,
    Field(
        description="The most sensitive level to return, on the store's scale (by default public, "
        "internal, personal, restricted); a memory's level is its meta sensitivity (unlabeled: internal)."
    ),
]
VerifiedWithin = Annotated[
    str | None,
    Field(
        description="Leave out memories last confirmed (written or verified) longer ago than this "
        "duration: 30d, 12h, 90m, 1d12h."
    ),
]

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)


class MemoryTools:
    """The tools of one server over one :class:`Repo`; each call reads or writes afresh.

    Args:
        repo: the open store (one tenant of it), kept open while the server runs.
        branch: the branch reads default to and writes go to (default: HEAD's
            branch, read at each call).
        author: who writes; None to take the MCP client's name.
        fallback_author: who writes when neither is known.
    """

    def __init__(
        self, repo: Repo, *, branch: str | None, author: str | None, fallback_author: str = DEFAULT_AUTHOR
    ) -> None:
        self.repo = repo
        self.branch = branch
        self.author = author
        self.fallback_author = fallback_author

    def remember(
        self,
        nodes: Annotated[
            list[NodeArg],
            Field(description="The memories to write, each a node in the library's JSON form."),
        ],
        message: Annotated[str, Field(description="Why: the commit message.")],
        ctx: Context,
        on_claim_conflict: Annotated[
            ClaimPolicy,
            Field(
                description="A claim starting when another on its (subject, predicate) does, with "
                "another value: refuse, replace the others, or keep both."
            ),
        ] = "refuse",
    ) -> CommitResultJSON:
        """Write memories (nodes in the store's JSON form) in one commit; returns the commit and ids.

        Writing an id again makes a new version; history keeps the old ones. Provenance
        fields left out are filled: source "mcp", tool_call this call ("remember#<request
        id>"), so a repeated call writes new versions; nodes that name their own
        provenance.tool_call can be sent again safely (same versions: created false).
        """
        with reported():
            if not nodes:
                raise InvalidInput("nodes: give at least one node to remember")
            call = tool_call("remember", ctx)
            put = [
                node_from_builtins(with_provenance(value, call), f"nodes[{index}]")
                for index, value in enumerate(nodes)
            ]
            made = self.repo.commit(
                put=put,
                message=message,
                author=self.author_for(ctx),
                branch=self.branch,
                on_claim_conflict=on_claim_conflict,
            )
            result: CommitResultJSON = to_builtins(made)
            return result

    def recall(
        self,
        query: Annotated[str, Field(description="What to recall, in words.")],
        k: Annotated[int, Field(description="At most this many hits.")] = SEARCH_K,
        prefix: Prefix = None,
        kind: Annotated[Kind | None, Field(description="Only notes or only claims.")] = None,
        valid_at: ValidAt = None,
        allowed_for: AllowedFor = None,
        max_sensitivity: MaxSensitivity = None,
        verified_within: VerifiedWithin = None,
    ) -> RecallJSON:
        """Recall memories by words and meaning: the current versions only, best first.

        Use, sensitivity and freshness filter before ranking: the hits are the best of
        what passes. Each hit's confirmed_at says when it was last written or verified.
        """
        with reported():
            hits = self.repo.search(
                query,
                k=k,
                at=self.branch,
                prefix=prefix,
                kind=kind,
                valid_at=valid_at,
                allowed_for=allowed_for,
                max_sensitivity=max_sensitivity,
                verified_within=_window(verified_within),
            )
            return {"hits": to_builtins(hits)}

    def context(
        self,
        query: Annotated[str, Field(description="What the memories are for, in words.")],
        budget_tokens: Annotated[
            int, Field(description="The token budget (one token per four characters).")
        ] = CONTEXT_BUDGET,
        allowed_for: AllowedFor = None,
        max_sensitivity: MaxSensitivity = None,
        verified_within: VerifiedWithin = None,
    ) -> ContextJSON:
        """The best memories for a query that fit a token budget, each cited as [id@hash7]."""
        with reported():
            packed = self.repo.context(
                query,
                budget_tokens,
                at=self.branch,
                allowed_for=allowed_for,
                max_sensitivity=max_sensitivity,
                verified_within=_window(verified_within),
            )
            result: ContextJSON = to_builtins(packed)
            result["text"] = packed.render()
            return result

    def get(self, id: Id, at: OptionalRev = None, as_of: AsOf = None) -> NodeJSON:
        """One memory: the version of an id in a snapshot, with its provenance and hash."""
        with reported():
            node = self.repo.get(id, at=at or self.branch, as_of=as_of)
            if node is None:
                place = at or self.branch or "HEAD"
                raise NotFound(f"{id} is not in {place}" + (f" as of {as_of}" if as_of else ""))
            result: NodeJSON = to_builtins(node)
            return result

    def list_memories(
        self,
        prefix: Prefix = None,
        limit: Annotated[
            int, Field(description=f"At most this many memories (1 to {LIST_MAX}) in this page.")
        ] = LIST_LIMIT,
        after: Annotated[
            str | None,
            Field(description="Start after this id: the previous page's next_after (default: the start)."),
        ] = None,
        at: OptionalRev = None,
        as_of: AsOf = None,
        allowed_for: AllowedFor = None,
        max_sensitivity: MaxSensitivity = None,
    ) -> ListJSON:
        """Browse memories by id, in id order, a page at a time; each in full, with its hash.

        next_after is null on the last page; otherwise pass it as after to read the
        next page. Expired and erased memories are left out, as recall leaves them out.
        """
        with reported():
            if isinstance(limit, bool) or not 1 <= limit <= LIST_MAX:
                raise InvalidInput(f"limit must be from 1 to {LIST_MAX}, not {limit}")
            found = self.repo.nodes(
                at=at or self.branch,
                as_of=as_of,
                prefix=prefix,
                after=after,
                allowed_for=allowed_for,
                max_sensitivity=max_sensitivity,
            )
            page = list(islice(found, limit + 1))  # one more than shown: is there a next page?
            shown = page[:limit]
            more = len(page) > limit
            return {"nodes": to_builtins(shown), "next_after": shown[-1].id if more else None}

    def history(self, id: Id) -> HistoryJSON:
        """Every version of an id, newest first, each current, superseded, deleted, expired or redacted."""
        with reported():
            versions = self.repo.history(id, at=self.branch)
            if not versions:
                raise NotFound(f"{id} has no history in {self.branch or 'HEAD'}")
            return {"versions": to_builtins(versions)}

    def blame(self, id: Id) -> BlameJSON:
        """Who wrote the current version of an id, when and from what; per line or field."""
        with reported():
            result: BlameJSON = to_builtins(self.repo.blame(id, at=self.branch))
            return result

    def diff(self, a: Rev, b: Rev) -> DiffJSON:
        """What changed from revision a to revision b: ids added, removed and modified."""
        with reported():
            result: DiffJSON = to_builtins(self.repo.diff(a, b))
            return result

    def log(
        self,
        limit: Annotated[int, Field(description="At most this many commits.")] = LOG_LIMIT,
        node: Annotated[str | None, Field(description="Only the commits that changed this id.")] = None,
    ) -> LogJSON:
        """Commits of the branch, newest first."""
        with reported():
            return {"commits": to_builtins(list(self.repo.log(at=self.branch, node=node, limit=limit)))}

    def facts(
        self,
        subject: Annotated[str, Field(description="Whose facts, e.g. mira.")],
        predicate: Annotated[str | None, Field(description="One attribute; default: all of them.")] = None,
        valid_at: Annotated[
            str | None, Field(description="The world time asked about (RFC 3339; default: now).")
        ] = None,
        as_of: AsOf = None,
    ) -> FactsJSON:
        """The claims in force on a subject at a valid time, as believed at a record time."""
        with reported():
            found = self.repo.facts(subject, predicate, valid_at=valid_at, as_of=as_of, at=self.branch)
            return {"facts": to_builtins(found)}

    def delete(
        self,
        ids: Annotated[list[str], Field(description="The ids to remove from the branch.")],
        message: Annotated[str, Field(description="Why: the commit message.")],
        ctx: Context,
    ) -> CommitResultJSON:
        """Remove memories from the branch in one commit, without erasing them.

        The ids leave the current snapshot (recall, get and list no longer find them);
        history keeps every version, so get with at (an earlier commit) still reads
        them and remember can write them again. An id not in the branch is an error
        and nothing is removed. To erase a memory for real, forget does that.
        """
        with reported():
            if not ids:
                raise InvalidInput("ids: give at least one id to delete")
            made = self.repo.commit(
                delete=ids, message=message, author=self.author_for(ctx), branch=self.branch
            )
            result: CommitResultJSON = to_builtins(made)
            return result

    def verify(
        self,
        ids: Annotated[list[str], Field(description="The ids whose current versions were re-confirmed.")],
        ctx: Context,
        note: Annotated[
            str | None, Field(description="How or why they were confirmed: the commit message.")
        ] = None,
    ) -> CommitJSON:
        """Record that memories were re-confirmed as they stand, without writing new versions.

        One commit that changes no memory; its record time is when they were last
        confirmed, which recall's verified_within and each hit's confirmed_at read.
        Returns the commit; its verified lists the ids.
        """
        with reported():
            made = self.repo.verify(*ids, by=self.author_for(ctx), note=note, branch=self.branch)
            result: CommitJSON = to_builtins(made)
            return result

    def forget(
        self,
        id: Id,
        reason: Annotated[str, Field(description="Why: kept in the redaction record.")],
        ctx: Context,
    ) -> ForgetJSON:
        """Erase every version of an id for real, on every branch, leaving a redaction record.

        The bytes (content, provenance, meta) leave the store and its indexes; the id
        leaves the store's current branch in a new commit. Reading an erased version
        then fails, saying who erased it, when and why.
        """
        with reported():
            result: ForgetJSON = to_builtins(self.repo.forget(id, reason, author=self.author_for(ctx)))
            return result

    def memory(self, id: str) -> str:
        """The current version of a memory on the server's branch, in its JSON form."""
        with resource_reported():
            node = self.repo.get(id, at=self.branch)
            if node is None:
                raise NotFound(f"{id} is not in {self.branch or 'HEAD'}")
            return to_json(node)

    def versions(self, id: str) -> str:
        """Every version of a memory, newest first: what the history tool returns."""
        with resource_reported():
            found = self.repo.history(id, at=self.branch)
            if not found:
                raise NotFound(f"{id} has no history in {self.branch or 'HEAD'}")
            return to_json({"versions": to_builtins(found)})

    def author_for(self, ctx: Context) -> str:
        """Who writes in this call: the configured author, else the client's name, else the fallback."""
        if self.author:
            return self.author
        params = ctx.request_context.session.client_params
        name = params.client_info.name.strip() if params is not None else ""
        return name or self.fallback_author


def _window(text: str | None) -> timedelta | None:
    """A ``verified_within`` duration given as text (``30d``), or None."""
    return parse_duration(text, "verified_within") if text is not None else None


def tool_call(tool: str, ctx: Context) -> str:
    """How a write names its call in provenance: the tool and the request id (``remember#7``)."""
    request = ctx.request_context.request_id
    return tool if request is None else f"{tool}#{request}"


def with_provenance(value: Any, call: str) -> Any:
    """A node's JSON with the provenance fields it leaves absent or null filled in.

    ``source`` becomes :data:`SOURCE` and ``tool_call`` ``call``; fields the
    caller gave stay as given. A node given with its ``hash`` is left as it is
    (the hash pins every field), and so is anything that is not a node object
    with an object (or no) provenance: the library's reader then says what is wrong.
    """
    if not isinstance(value, dict) or value.get("hash") is not None:
        return value
    given = value.get("provenance")
    if given is not None and not isinstance(given, dict):
        return value
    filled = dict(given or {})
    for key, default in (("source", SOURCE), ("tool_call", call)):
        if filled.get(key) is None:
            filled[key] = default
    return {**value, "provenance": filled}


def instructions(tools: Collection[str]) -> str:
    """What the server tells the model about itself, naming only the tools it offers."""
    parts = [
        "Long-term memory with history. Each memory is a node: an id such as users/mira/prefs/language, "
        "content (text or JSON), and provenance."
    ]
    if "remember" in tools:
        parts.append(
            "remember writes nodes (writing an id again makes a new version; history keeps the old "
            "ones); delete removes ids from the branch (history keeps them too); verify records that "
            "memories were re-confirmed as they stand."
        )
    else:
        parts.append("The store is read-only here: no tool writes.")
    parts.append(
        "recall and context find memories by words and meaning; list browses ids by prefix, a page at "
        "a time; get reads one; history, blame, log and diff say what changed, who wrote it and when; "
        "facts reads claims (kind 'claim') by valid time."
    )
    if "forget" in tools:
        parts.append("forget erases an id for real, on every branch: only when asked to.")
    parts.append(
        "Each memory is also a resource: mnemo://memory/{id}, and its history mnemo://history/{id}. "
        "Results are the store's JSON form; errors are one line, and a tool refuses arguments it does "
        "not take."
    )
    return " ".join(parts)


def build_server(
    repo: Repo,
    *,
    branch: str | None = None,
    author: str | None = None,
    fallback_author: str = DEFAULT_AUTHOR,
    allow_erase: bool = False,
    writable: bool = True,
) -> MCPServer:
    """An MCP server exposing ``repo``'s tools and resources; run it with ``.run("stdio")``.

    A store open read-only (``repo.readonly``) gets the reading tools only: a tool
    that could only fail is not offered. So does a server built with
    ``writable=False`` (``mnemo serve`` builds one for read tokens).

    Args:
        repo: the open store, bound to one tenant; the caller closes it after the server stops.
        branch: the branch reads default to and the writing tools write to (default:
            HEAD's branch at each call).
        author: who writes; None to use the MCP client's name (its ``clientInfo``).
        fallback_author: who writes when neither ``author`` nor a client name is known.
        allow_erase: also register ``forget``, which erases memories for real.
        writable: offer the writing tools (when the store is open for writing).

    Raises:
        NotFound: ``branch`` names no branch.
    """
    if branch is not None and branch not in repo.branches() and branch != repo.head:
        raise NotFound(f"no branch {branch!r} (create it with 'mnemo branch {branch}')")
    tools = MemoryTools(repo, branch=branch, author=author, fallback_author=fallback_author)
    # Not idempotent: a repeated remember writes new versions (each call's request id lands
    # in provenance, unless the caller names its own tool_call), a repeated verify a new
    # confirmation.
    write = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False)
    # delete removes from the snapshot (history keeps it), forget erases; a second call
    # changes nothing more.
    removal = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True)
    writes = writable and not repo.readonly
    offered: list[tuple[Callable[..., Any], str, ToolAnnotations]] = []
    if writes:
        offered.append((tools.remember, "remember", write))
    offered += [
        (tools.recall, "recall", READ),
        (tools.context, "context", READ),
        (tools.get, "get", READ),
        (tools.list_memories, "list", READ),
        (tools.history, "history", READ),
        (tools.blame, "blame", READ),
        (tools.diff, "diff", READ),
        (tools.log, "log", READ),
        (tools.facts, "facts", READ),
    ]
    if writes:
        offered += [(tools.delete, "delete", removal), (tools.verify, "verify", write)]
        if allow_erase:
            offered.append((tools.forget, "forget", removal))
    served = [strict(fn, name, annotations) for fn, name, annotations in offered]
    server = OneLineServer(instructions=instructions([tool.name for tool in served]), tools=served)
    json = "application/json"
    server.resource(MEMORY_URI, name="memory", description=MemoryTools.memory.__doc__, mime_type=json)(
        tools.memory
    )
    server.resource(HISTORY_URI, name="history", description=MemoryTools.versions.__doc__, mime_type=json)(
        tools.versions
    )
    return server

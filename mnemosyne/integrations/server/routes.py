"""The routes of the HTTP API: each parses its request, calls :class:`Repo`, and returns the result.

A handler runs in a worker thread with the tenant's warm ``Repo`` and returns a
:class:`Reply`: a library result (rendered in the one JSON form), or an
iterator of them (JSON Lines, streamed), with the status and headers the route
gives; the steps of a fetch or push over HTTP (``transfer/…``) pass msgpack
bodies to :meth:`Repo.answer_transfer` and return its bytes. Nothing here
decides anything about memory. The table :data:`ROUTES` is the API: the
dispatcher matches it, the OpenAPI document describes it.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import Any

from mnemosyne import (
    Blame,
    Commit,
    CommitResult,
    Context,
    Contradiction,
    Diff,
    Fact,
    ForgetReport,
    Freshness,
    History,
    Hit,
    InvalidInput,
    MergeResult,
    Node,
    NotFound,
    ReadRecord,
    RefConflict,
    Version,
)
from mnemosyne.integrations.server.bodies import (
    BranchBody,
    CommitBody,
    ContextBody,
    ForgetBody,
    HistoriesBody,
    MergeBody,
    SearchBody,
    VerifyBody,
)
from mnemosyne.integrations.server.calls import (
    ALLOWED_FOR,
    AS_OF,
    AT,
    LIMIT,
    MAX_SENSITIVITY,
    PREFIX,
    TENANT,
    VALID_AT,
    VERIFIED_WITHIN,
    Branches,
    Call,
    ForgetReports,
    IdList,
    Param,
    PreconditionFailed,
    Reply,
    Route,
    Tip,
    branch_etag,
    verified_within_of,
)
from mnemosyne.integrations.server.transfer_routes import TRANSFER_ROUTES
from mnemosyne.model.choices import CHOICES
from mnemosyne.model.jsonform import node_from_builtins, place

# -- reads --------------------------------------------------------------------------


def _get_node(call: Call) -> Reply:
    at, as_of = call.text("at"), call.text("as_of")
    etag = branch_etag(call.repo, at, as_of)
    node_id = call.path["id"]
    node = call.repo.get(node_id, at=at, as_of=as_of, include_expired=call.flag("include_expired"))
    if node is None:
        raise NotFound(f"{node_id} is not in {at or 'HEAD'}" + (f" as of {as_of}" if as_of else ""))
    return Reply(node, etag=etag)


def _list_nodes(call: Call) -> Reply:
    at, as_of = call.text("at"), call.text("as_of")
    etag = branch_etag(call.repo, at, as_of)
    found: Iterator[Node] = call.repo.nodes(
        at=at,
        as_of=as_of,
        prefix=call.text("prefix"),
        include_expired=call.flag("include_expired"),
        allowed_for=call.text("allowed_for"),
        max_sensitivity=call.text("max_sensitivity"),
        verified_within=call.duration("verified_within"),
        after=call.text("after"),
    )
    limit = call.integer("limit")
    return Reply(lines=found if limit is None else islice(found, limit), etag=etag)


def _histories(call: Call) -> Reply:
    body: HistoriesBody = call.body
    found = call.repo.histories(
        body.ids, at=body.at, as_of=body.as_of, limit=body.limit, include_expired=body.include_expired
    )
    return Reply(found)


def _ids(call: Call) -> Reply:
    at, as_of = call.text("at"), call.text("as_of")
    etag = branch_etag(call.repo, at, as_of)
    listing = call.repo.ids(at=at, as_of=as_of, prefix=call.text("prefix"))
    return Reply(IdList(commit=listing.commit, ids=list(listing)), etag=etag)


def _log(call: Call) -> Reply:
    at, as_of = call.text("at"), call.text("as_of")
    etag = branch_etag(call.repo, at, as_of)
    node = call.text("node")
    found = call.repo.log(at=at, node=node, limit=call.integer("limit"), as_of=as_of)
    return Reply(lines=found, etag=etag)


def _commit_of(call: Call) -> Reply:
    return Reply(call.repo.resolve(call.path["rev"], as_of=call.text("as_of")))


def _history(call: Call) -> Reply:
    node_id = call.path["id"]
    return Reply(call.repo.history(node_id, at=call.text("at"), limit=call.integer("limit")))


def _blame(call: Call) -> Reply:
    return Reply(call.repo.blame(call.path["id"], at=call.text("at")))


def _diff(call: Call) -> Reply:
    b = call.text("b")
    if b is None:
        raise InvalidInput(
            "?b= is required: the revision to compare with (and ?a=, default: the empty snapshot)"
        )
    return Reply(call.repo.diff(call.text("a"), b, as_of=call.text("as_of")))


def _facts(call: Call) -> Reply:
    found = call.repo.facts(
        call.path["subject"],
        call.path.get("predicate"),
        valid_at=call.text("valid_at"),
        as_of=call.text("as_of"),
        at=call.text("at"),
        verified_within=call.duration("verified_within"),
    )
    return Reply(found)


def _timeline(call: Call) -> Reply:
    found = call.repo.timeline(
        call.path["subject"], call.path["predicate"], as_of=call.text("as_of"), at=call.text("at")
    )
    return Reply(found)


def _contradictions(call: Call) -> Reply:
    return Reply(call.repo.contradictions(at=call.text("at"), recorded=call.flag("recorded")))


def _search(call: Call) -> Reply:
    body: SearchBody = call.body
    hits = call.repo.search(
        body.query,
        k=body.k,
        at=body.at,
        as_of=body.as_of,
        prefix=body.prefix,
        valid_at=body.valid_at,
        kind=body.kind,
        meta=body.meta,
        mode=body.mode,
        run_id=body.run_id,
        allowed_for=body.allowed_for,
        max_sensitivity=body.max_sensitivity,
        verified_within=verified_within_of(body.verified_within),
    )
    return Reply(hits)


def _context(call: Call) -> Reply:
    body: ContextBody = call.body
    packed = call.repo.context(
        body.query,
        body.budget_tokens,
        k=body.k,
        at=body.at,
        as_of=body.as_of,
        prefix=body.prefix,
        valid_at=body.valid_at,
        run_id=body.run_id,
        allowed_for=body.allowed_for,
        max_sensitivity=body.max_sensitivity,
        verified_within=verified_within_of(body.verified_within),
    )
    return Reply(packed)


def _reads(call: Call) -> Reply:
    return Reply(call.repo.reads(call.path["run_id"]))


def _branches(call: Call) -> Reply:
    repo = call.repo
    head = repo.head
    tips = [Tip(name=name, commit=commit) for name, commit in repo.branch_tips()]
    if head not in {tip.name for tip in tips}:
        tips = sorted([*tips, Tip(name=head, commit=None)], key=lambda tip: tip.name)
    return Reply(Branches(head=head, branches=tips))


def _branch_tip(call: Call) -> Reply:
    name = call.path["name"]
    tip = call.repo.tip(name)
    if tip is None:
        raise NotFound(f"no branch {name!r} with commits")
    return Reply(Tip(name=name, commit=call.repo.resolve(tip)), etag=tip)


def _freshness(call: Call) -> Reply:
    return Reply(call.repo.freshness(call.path["name"]))


# -- writes -------------------------------------------------------------------------


def _commit(call: Call) -> Reply:
    body: CommitBody = call.body
    repo = call.repo
    parent = None
    if call.if_match is not None:
        branch = body.branch or repo.head
        tip = repo.tip(branch)
        if tip is None or (call.if_match != "*" and call.if_match != tip):
            if call.if_match != "*":
                repo.resolve(call.if_match)  # naming no commit is NotFound, as Repo.commit's parent=
            raise PreconditionFailed(branch, call.if_match, tip)
        parent = tip
    try:
        made = repo.commit(
            put=body.put,
            delete=body.delete,
            message=body.message,
            author=call.author(body.author),
            branch=body.branch,
            parent=parent,
            meta=body.meta,
            allow_empty=body.allow_empty,
            on_claim_conflict=body.on_claim_conflict,
        )
    except RefConflict as error:
        if call.if_match is None:
            raise
        raise PreconditionFailed(body.branch or repo.head, call.if_match, None, str(error)) from None
    location = f"/v1/tenants/{call.tenant}/commits/{made.id}"
    return Reply(made, status=201 if made.created else 200, etag=made.id, location=location)


def _verify(call: Call) -> Reply:
    body: VerifyBody = call.body
    made = call.repo.verify(*body.ids, by=call.author(body.by), note=body.note, branch=body.branch)
    return Reply(made, status=201, etag=made.id)


def _create_branch(call: Call) -> Reply:
    body: BranchBody = call.body
    start = call.repo.branch(body.name, at=body.at, orphan=body.orphan, author=call.author(body.author))
    return Reply(Tip(name=body.name, commit=start), status=201)


def _delete_branch(call: Call) -> Reply:
    name = call.path["name"]
    gone = call.repo.delete_branch(name, author=call.author(None))
    return Reply(Tip(name=name, commit=gone))


def _merge(call: Call) -> Reply:
    body: MergeBody = call.body
    resolutions: dict[str, Any] | None = None
    if body.resolutions is not None:
        resolutions = {}
        for node_id, choice in body.resolutions.items():
            if isinstance(choice, dict):
                resolutions[node_id] = node_from_builtins(choice, place("resolutions", f"[{node_id!r}]"))
            elif isinstance(choice, str) and choice in CHOICES:
                resolutions[node_id] = choice
            else:
                raise InvalidInput(
                    f"{place('resolutions', f'[{node_id!r}]')}: "
                    f"{', '.join(CHOICES)} or a node object, not {choice!r}"
                )
    result = call.repo.merge(
        body.source,
        into=body.into,
        resolutions=resolutions,
        strategy=body.strategy,
        message=body.message,
        author=call.author(body.author),
        allow_unrelated_histories=body.allow_unrelated_histories,
    )
    return Reply(result)


def _forget(call: Call) -> Reply:
    body: ForgetBody = call.body
    author = call.author(body.author)
    done = call.repo.forget(body.ids, body.reason, author=author, version=body.version)
    # One erasure of them all (one transaction, one commit), told id by id.
    reports = [
        ForgetReport(
            redactions=[r for r in done.redactions if r.id == node_id],
            already_erased=[r for r in done.already_erased if r.id == node_id],
            commit=done.commit,
        )
        for node_id in dict.fromkeys(body.ids)
    ]
    return Reply(ForgetReports(reports=reports))


# -- the table ------------------------------------------------------------------------

ROUTES: tuple[Route, ...] = (
    Route(
        "GET",
        TENANT + "/branches",
        "read",
        "The current branch, and every branch with the commit at its tip.",
        _branches,
        response=Branches,
    ),
    Route(
        "GET",
        TENANT + "/branches/{name}",
        "read",
        "One branch and its tip; ETag: the tip's id (for If-Match on a commit).",
        _branch_tip,
        response=Tip,
        headers=("ETag",),
        quick=True,
    ),
    Route(
        "GET",
        TENANT + "/freshness/{name}",
        "read",
        "A branch's tip (null: no commits yet) and the tenant's erasure count, from one snapshot: "
        "what a client that keeps what it read compares before serving it again.",
        _freshness,
        response=Freshness,
        quick=True,
    ),
    Route(
        "GET",
        TENANT + "/nodes/{id}",
        "read",
        "One memory: the version of an id in a snapshot (404 when absent, 410 when erased).",
        _get_node,
        query=(AT, AS_OF, Param("include_expired", "boolean", "Return it even past its expires_at.")),
        response=Node,
        headers=("ETag",),
        quick=True,
    ),
    Route(
        "GET",
        TENANT + "/nodes",
        "read",
        "The memories of a snapshot, by id, as JSON Lines (page with after= and limit=).",
        _list_nodes,
        query=(
            AT,
            AS_OF,
            PREFIX,
            Param("after", "string", "Start after this id: the last id of the previous page."),
            LIMIT,
            Param("include_expired", "boolean", "Include memories past their expires_at."),
            ALLOWED_FOR,
            MAX_SENSITIVITY,
            VERIFIED_WITHIN,
        ),
        response=Node,
        lines=True,
        headers=("ETag",),
    ),
    Route(
        "POST",
        TENANT + "/histories",
        "read",
        "Several ids read from one snapshot in one request, each with its history "
        "(limit 0: the nodes alone); an id absent, expired or erased has node null.",
        _histories,
        body=HistoriesBody,
        response=dict[str, History],
    ),
    Route(
        "GET",
        TENANT + "/ids",
        "read",
        "The ids of a snapshot, in order, reading no node, and the commit listed "
        "(null: no commits yet; pass its id as at= to read the same snapshot).",
        _ids,
        query=(AT, AS_OF, PREFIX),
        response=IdList,
        headers=("ETag",),
    ),
    Route(
        "GET",
        TENANT + "/log",
        "read",
        "Commits reachable from a revision, newest first, as JSON Lines (streamed).",
        _log,
        query=(AT, Param("node", "string", "Only the commits that changed this id."), LIMIT, AS_OF),
        response=Commit,
        lines=True,
        headers=("ETag",),
    ),
    Route(
        "GET",
        TENANT + "/commits/{rev}",
        "read",
        "The commit a revision names.",
        _commit_of,
        query=(AS_OF,),
        response=Commit,
    ),
    Route(
        "GET",
        TENANT + "/history/{id}",
        "read",
        "Every version of an id, newest first, each with its status.",
        _history,
        query=(AT, LIMIT),
        response=list[Version],
    ),
    Route(
        "GET",
        TENANT + "/blame/{id}",
        "read",
        "Who wrote the current version of an id, when and from what; per line or field.",
        _blame,
        query=(AT,),
        response=Blame,
    ),
    Route(
        "GET",
        TENANT + "/diff",
        "read",
        "What changed from revision a (default: the empty snapshot) to revision b.",
        _diff,
        query=(
            Param("a", "string", "The old revision (default: the empty snapshot)."),
            Param("b", "string", "The new revision.", required=True),
            AS_OF,
        ),
        response=Diff,
    ),
    Route(
        "GET",
        TENANT + "/facts/{subject}",
        "read",
        "The claims in force on a subject at a valid time, as believed at a record time.",
        _facts,
        query=(VALID_AT, AS_OF, AT, VERIFIED_WITHIN),
        response=list[Fact],
    ),
    Route(
        "GET",
        TENANT + "/facts/{subject}/{predicate}",
        "read",
        "The claims in force on one attribute of a subject.",
        _facts,
        query=(VALID_AT, AS_OF, AT, VERIFIED_WITHIN),
        response=list[Fact],
    ),
    Route(
        "GET",
        TENANT + "/timeline/{subject}/{predicate}",
        "read",
        "Every claim on one attribute, by valid_from.",
        _timeline,
        query=(AS_OF, AT),
        response=list[Fact],
    ),
    Route(
        "GET",
        TENANT + "/contradictions",
        "read",
        "Open contradictions: merged claims that disagree.",
        _contradictions,
        query=(AT, Param("recorded", "boolean", "The contradictions the commit at= recorded instead.")),
        response=list[Contradiction],
    ),
    Route(
        "POST",
        TENANT + "/search",
        "read",
        "Recall memories by words and meaning, from one snapshot.",
        _search,
        recall=True,
        body=SearchBody,
        response=list[Hit],
    ),
    Route(
        "POST",
        TENANT + "/context",
        "read",
        "The best memories for a query that fit a token budget, each cited.",
        _context,
        recall=True,
        body=ContextBody,
        response=Context,
    ),
    Route(
        "GET",
        TENANT + "/reads/{run_id}",
        "read",
        "What searches and contexts recorded under a run id returned, oldest first.",
        _reads,
        response=list[ReadRecord],
    ),
    Route(
        "POST",
        TENANT + "/commits",
        "write",
        "Commit nodes and removals atomically (201; 200 when nothing changed). "
        "If-Match: the tip the client read, else 412 and nothing is written.",
        _commit,
        body=CommitBody,
        response=CommitResult,
        status=201,
        headers=("ETag", "Location"),
    ),
    Route(
        "POST",
        TENANT + "/verify",
        "write",
        "Record that the current versions of ids were re-confirmed.",
        _verify,
        body=VerifyBody,
        response=Commit,
        status=201,
        headers=("ETag",),
    ),
    Route(
        "POST",
        TENANT + "/branches",
        "write",
        "Create a branch at a revision (default: HEAD).",
        _create_branch,
        body=BranchBody,
        response=Tip,
        status=201,
    ),
    Route(
        "DELETE",
        TENANT + "/branches/{name}",
        "write",
        "Delete a branch (its reflog stays); not the current one.",
        _delete_branch,
        response=Tip,
    ),
    Route(
        "POST",
        TENANT + "/merge",
        "write",
        "Merge a revision into a branch; conflicts come back as data, with nothing written.",
        _merge,
        body=MergeBody,
        response=MergeResult,
    ),
    Route(
        "POST",
        TENANT + "/forget",
        "admin",
        "Erase every version of ids for real, leaving redaction records.",
        _forget,
        body=ForgetBody,
        response=ForgetReports,
    ),
    *TRANSFER_ROUTES,
)
"""Every route under a tenant, with the role it needs."""

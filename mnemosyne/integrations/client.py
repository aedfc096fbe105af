"""A Python client of a served store (``mnemo serve``): ``mnemosyne.connect(url, token=...)``.

The handle it returns, a :class:`ServedRepo`, has :class:`~mnemosyne.Repo`'s
method names, arguments and result types for what an agent does (commit, get,
nodes, log, history, blame, diff, facts, timeline, search, context, verify,
branches, merge, forget), each result decoded from the one JSON form, and
raises the library's errors (``NotFound``, ``RefConflict``, …) from the
server's error bodies, plus :class:`~mnemosyne.AccessDenied` for a token
refused. So an agent loop moves from a local store to a served one by changing
the line that opens it::

    repo = Repo.open("agent.mnemo")                              # local
    repo = mnemosyne.connect("http://127.0.0.1:7777", token=TOKEN)  # served

A commit with ``parent=`` is sent with ``If-Match``: the server writes it only
if the branch is still there, else ``RefConflict`` and nothing is written, as
locally. Streams (``log``, ``nodes``) are read as the caller iterates. Needs
``httpx`` (``pip install 'mnemosyne[client]'``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
import msgspec

from mnemosyne.errors import (
    InvalidInput,
    NotFound,
    Redacted,
)
from mnemosyne.integrations.client_http import Http, Rev, duration_text, path_segment, rev_text, time_text
from mnemosyne.model.access import Role, Token
from mnemosyne.model.choices import ClaimPolicy, MergeStrategy, SearchMode
from mnemosyne.model.defaults import CONTEXT_BUDGET, CONTEXT_K, SEARCH_K
from mnemosyne.model.jsonform import from_builtins, node_builtins
from mnemosyne.model.objects import Commit, Node
from mnemosyne.model.reports import ForgetReport
from mnemosyne.model.results import (
    Blame,
    CommitResult,
    Context,
    Contradiction,
    Diff,
    Fact,
    Freshness,
    History,
    Hit,
    MergeResult,
    ReadRecord,
    Version,
)
from mnemosyne.model.thread_names import legacy_thread_branch, thread_branch_name
from mnemosyne.model.times import TimeLike
from mnemosyne.model.validation import check_json

T = TypeVar("T")

DEFAULT_TIMEOUT = 60.0
"""Seconds a request may take (the first search after a bulk load indexes first)."""

_FULL_ID = re.compile(r"[0-9a-f]{64}")


def connect(
    url: str, *, token: str, tenant: str | None = None, timeout: float = DEFAULT_TIMEOUT
) -> ServedRepo:
    """A handle on one tenant of the store served at ``url``, used as a :class:`Repo` is.

    Args:
        url: where ``mnemo serve`` listens (``http://127.0.0.1:7777``; a path
            before ``/v1`` is kept, for a server behind a reverse proxy).
        token: the token (``mnemo token create``): it names the tenant and the role.
        tenant: the tenant expected (default: the token's own).
        timeout: seconds one request may take.

    Raises:
        AccessDenied: the server does not honour the token.
        NotFound: nothing answers at ``url``, or ``tenant`` is not the token's.
    """
    return ServedRepo(url, token=token, tenant=tenant, timeout=timeout)


class Listing(Iterator[str]):
    """The ids of a snapshot in order, and the commit listed (as :meth:`Repo.ids` gives them).

    Attributes:
        commit: the commit whose snapshot they are; None on a branch with no commits yet.
    """

    def __init__(self, commit: Commit | None, ids: list[str]) -> None:
        self.commit = commit
        self._ids = iter(ids)

    def __next__(self) -> str:
        return next(self._ids)


class _IdList(msgspec.Struct, frozen=True, kw_only=True):
    commit: Commit | None
    ids: list[str]


class ServedRepo:
    """One tenant of a served store, with :class:`~mnemosyne.Repo`'s methods for an agent's work.

    Open one with :func:`connect`; close it (or use it as a context manager) to
    release its connections. Safe to share between threads.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str,
        tenant: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """Use :func:`connect` (``transport``: an httpx transport, for tests)."""
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidInput(f"a served store's URL starts with http:// or https://, not {url!r}")
        if not isinstance(token, str) or not token:
            raise InvalidInput("give the token: connect(url, token=...)")
        self.url = url.rstrip("/")
        self._http = Http(self.url, token, timeout, transport)
        try:
            self.token: Token = self._http.json("GET", "/v1/whoami", Token)
            if tenant is not None and tenant != self.token.tenant:
                raise NotFound(f"no tenant {tenant!r} (this token reaches tenant {self.token.tenant!r})")
        except BaseException:
            self._http.close()
            raise
        self._base = f"/v1/tenants/{quote(self.token.tenant, safe='')}"

    # -- the handle ----------------------------------------------------------------

    @property
    def tenant(self) -> str:
        """The tenant this handle reaches (its token's)."""
        return self.token.tenant

    @property
    def role(self) -> Role:
        """The token's role: ``read``, ``write`` or ``admin``."""
        return self.token.role

    @property
    def readonly(self) -> bool:
        """Whether writes are refused (a read token)."""
        return self.token.role == "read"

    def close(self) -> None:
        """Release the connections."""
        self._http.close()

    def __enter__(self) -> ServedRepo:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<ServedRepo {self.url} tenant={self.tenant}>"

    def now(self) -> datetime:
        """This machine's clock, in UTC (expiry given as a duration is reckoned from it).

        The server judges expiry by its own clock: keep the two in step (NTP), as
        any clients of one store must.
        """
        return datetime.now(UTC)

    def use_embedder(self, embedder: object) -> None:
        """Refused: a served store's embeddings are the server's (``mnemo serve --embedder NAME``).

        Raises:
            InvalidInput: always.
        """
        raise InvalidInput(
            "a served store embeds with the server's embedder: start mnemo serve with --embedder "
            "(or set the store's embedder) instead of giving one to the client"
        )

    # -- writing -------------------------------------------------------------------

    def commit(
        self,
        put: Iterable[Node] = (),
        delete: Iterable[str] = (),
        *,
        message: str = "",
        author: str | None = None,
        branch: str | None = None,
        parent: Rev | None = None,
        meta: dict[str, Any] | None = None,
        allow_empty: bool = False,
        on_claim_conflict: ClaimPolicy = "refuse",
    ) -> CommitResult:
        """Record nodes and removals as one atomic commit (see :meth:`Repo.commit`).

        ``author`` defaults to the token's name. ``parent`` is sent as ``If-Match``.

        Raises:
            RefConflict: ``parent`` was given and the branch has moved past it.
        """
        nodes = [node_builtins(node) if isinstance(node, Node) else node for node in put]
        for node in nodes:
            if not isinstance(node, dict):
                raise InvalidInput("put takes Node objects")
        if meta is not None:
            check_json(meta, "meta")  # NaN would travel as null: refused here, as Repo.commit refuses it
        body = {
            "put": nodes,
            "delete": list(delete),
            "message": message,
            "author": author,
            "branch": branch,
            "meta": meta,
            "allow_empty": allow_empty,
            "on_claim_conflict": on_claim_conflict,
        }
        headers = {}
        if parent is not None:
            expected = rev_text(parent)
            if expected is None or not _FULL_ID.fullmatch(expected):
                expected = self.resolve(parent).id
            headers["if-match"] = f'"{expected}"'
        return self._http.json("POST", f"{self._base}/commits", CommitResult, body=body, headers=headers)  # type: ignore[no-any-return]

    def verify(
        self, *ids: str, by: str | None = None, note: str | None = None, branch: str | None = None
    ) -> Commit:
        """Record that the current versions of ``ids`` were re-confirmed (see :meth:`Repo.verify`)."""
        body = {"ids": list(ids), "by": by, "note": note, "branch": branch}
        return self._http.json("POST", f"{self._base}/verify", Commit, body=body)  # type: ignore[no-any-return]

    # -- reading -------------------------------------------------------------------

    def resolve(self, rev: Rev = "HEAD", *, as_of: TimeLike | None = None) -> Commit:
        """The commit a revision names (see :meth:`Repo.resolve`)."""
        path = f"{self._base}/commits/{path_segment(rev_text(rev) or '', 'rev')}"
        return self._http.json("GET", path, Commit, params={"as_of": time_text(as_of, "as_of")})  # type: ignore[no-any-return]

    def get(
        self, id: str, *, at: Rev | None = None, as_of: TimeLike | None = None, include_expired: bool = False
    ) -> Node | None:
        """The version of ``id`` in a snapshot, or None when absent (see :meth:`Repo.get`).

        Raises:
            Redacted: the version there was erased.
        """
        params = {
            "at": rev_text(at),
            "as_of": time_text(as_of, "as_of"),
            "include_expired": include_expired or None,
        }
        try:
            return self._http.json("GET", f"{self._base}/nodes/{path_segment(id, 'id')}", Node, params=params)  # type: ignore[no-any-return]
        except Redacted:
            raise
        except NotFound as error:
            if str(error).startswith(f"{id} is not in "):
                return None
            raise

    def nodes(
        self,
        *,
        at: Rev | None = None,
        as_of: TimeLike | None = None,
        prefix: str | None = None,
        include_expired: bool = False,
        allowed_for: str | None = None,
        max_sensitivity: str | None = None,
        verified_within: timedelta | None = None,
        after: str | None = None,
        limit: int | None = None,
    ) -> Iterator[Node]:
        """The nodes of a snapshot, by id, streamed (see :meth:`Repo.nodes`; ``limit``: a page)."""
        params = {
            "at": rev_text(at),
            "as_of": time_text(as_of, "as_of"),
            "prefix": prefix,
            "include_expired": include_expired or None,
            "allowed_for": allowed_for,
            "max_sensitivity": max_sensitivity,
            "verified_within": duration_text(verified_within),
            "after": after,
            "limit": limit,
        }
        return self._http.lines(f"{self._base}/nodes", Node, params)

    def ids(
        self, *, at: Rev | None = None, as_of: TimeLike | None = None, prefix: str | None = None
    ) -> Listing:
        """The ids in a snapshot, in order, reading no node, and the commit listed (see :meth:`Repo.ids`)."""
        params = {"at": rev_text(at), "as_of": time_text(as_of, "as_of"), "prefix": prefix}
        found: _IdList = self._http.json("GET", f"{self._base}/ids", _IdList, params=params)
        return Listing(found.commit, found.ids)

    def histories(
        self,
        ids: Iterable[str],
        *,
        at: Rev | None = None,
        as_of: TimeLike | None = None,
        limit: int | None = None,
        include_expired: bool = False,
    ) -> dict[str, History]:
        """Each of ``ids`` in a snapshot with its history, in one request (see :meth:`Repo.histories`).

        With ``limit=0`` the nodes alone: several ids read in one round trip.
        """
        if isinstance(ids, str) or not isinstance(ids, Iterable):
            raise InvalidInput("ids must be an iterable of ids (a list of strings), not one string")
        body = {
            "ids": list(ids),
            "at": rev_text(at),
            "as_of": time_text(as_of, "as_of"),
            "limit": limit,
            "include_expired": include_expired,
        }
        return self._http.json("POST", f"{self._base}/histories", dict[str, History], body=body)  # type: ignore[no-any-return]

    def log(
        self,
        *,
        at: Rev | None = None,
        node: str | None = None,
        limit: int | None = None,
        as_of: TimeLike | None = None,
    ) -> Iterator[Commit]:
        """Commits reachable from ``at``, newest first, streamed (see :meth:`Repo.log`)."""
        params = {"at": rev_text(at), "node": node, "limit": limit, "as_of": time_text(as_of, "as_of")}
        return self._http.lines(f"{self._base}/log", Commit, params)

    def history(self, id: str, *, at: Rev | None = None, limit: int | None = None) -> list[Version]:
        """Every version of ``id`` in ``at``'s history, newest first (see :meth:`Repo.history`)."""
        path = f"{self._base}/history/{path_segment(id, 'id')}"
        return self._http.json("GET", path, list[Version], params={"at": rev_text(at), "limit": limit})  # type: ignore[no-any-return]

    def blame(self, id: str, *, at: Rev | None = None) -> Blame:
        """Who wrote the current version of ``id``, when, from what (see :meth:`Repo.blame`)."""
        path = f"{self._base}/blame/{path_segment(id, 'id')}"
        return self._http.json("GET", path, Blame, params={"at": rev_text(at)})  # type: ignore[no-any-return]

    def diff(self, a: Rev | None, b: Rev, *, as_of: TimeLike | None = None) -> Diff:
        """What changed from revision ``a`` (None: the empty snapshot) to ``b`` (see :meth:`Repo.diff`)."""
        params = {"a": rev_text(a), "b": rev_text(b), "as_of": time_text(as_of, "as_of")}
        return self._http.json("GET", f"{self._base}/diff", Diff, params=params)  # type: ignore[no-any-return]

    def facts(
        self,
        subject: str,
        predicate: str | None = None,
        *,
        valid_at: TimeLike | None = None,
        as_of: TimeLike | None = None,
        at: Rev | None = None,
        verified_within: timedelta | None = None,
    ) -> list[Fact]:
        """The claims in force on ``subject`` at ``valid_at`` (see :meth:`Repo.facts`)."""
        path = f"{self._base}/facts/{path_segment(subject, 'subject')}"
        if predicate is not None:
            path += f"/{path_segment(predicate, 'predicate')}"
        params = {
            "valid_at": time_text(valid_at, "valid_at"),
            "as_of": time_text(as_of, "as_of"),
            "at": rev_text(at),
            "verified_within": duration_text(verified_within),
        }
        return self._http.json("GET", path, list[Fact], params=params)  # type: ignore[no-any-return]

    def timeline(
        self, subject: str, predicate: str, *, as_of: TimeLike | None = None, at: Rev | None = None
    ) -> list[Fact]:
        """Every claim on one (subject, predicate), by ``valid_from`` (see :meth:`Repo.timeline`)."""
        path = (
            f"{self._base}/timeline/{path_segment(subject, 'subject')}/{path_segment(predicate, 'predicate')}"
        )
        params = {"as_of": time_text(as_of, "as_of"), "at": rev_text(at)}
        return self._http.json("GET", path, list[Fact], params=params)  # type: ignore[no-any-return]

    def contradictions(self, *, at: Rev | None = None, recorded: bool = False) -> list[Contradiction]:
        """Open contradictions at ``at`` (see :meth:`Repo.contradictions`)."""
        params = {"at": rev_text(at), "recorded": recorded or None}
        return self._http.json("GET", f"{self._base}/contradictions", list[Contradiction], params=params)  # type: ignore[no-any-return]

    # -- recall --------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        k: int = SEARCH_K,
        at: Rev | None = None,
        as_of: TimeLike | None = None,
        prefix: str | None = None,
        valid_at: TimeLike | None = None,
        kind: str | None = None,
        meta: dict[str, Any] | None = None,
        mode: SearchMode = "hybrid",
        run_id: str | None = None,
        allowed_for: str | None = None,
        max_sensitivity: str | None = None,
        verified_within: timedelta | None = None,
    ) -> list[Hit]:
        """Recall memories by words and meaning, from one snapshot (see :meth:`Repo.search`)."""
        body = {
            "query": query,
            "k": k,
            "at": rev_text(at),
            "as_of": time_text(as_of, "as_of"),
            "prefix": prefix,
            "valid_at": time_text(valid_at, "valid_at"),
            "kind": kind,
            "meta": meta,
            "mode": mode,
            "run_id": run_id,
            "allowed_for": allowed_for,
            "max_sensitivity": max_sensitivity,
            "verified_within": duration_text(verified_within),
        }
        return self._http.json("POST", f"{self._base}/search", list[Hit], body=body)  # type: ignore[no-any-return]

    def context(
        self,
        query: str,
        budget_tokens: int = CONTEXT_BUDGET,
        *,
        k: int = CONTEXT_K,
        at: Rev | None = None,
        as_of: TimeLike | None = None,
        prefix: str | None = None,
        valid_at: TimeLike | None = None,
        run_id: str | None = None,
        allowed_for: str | None = None,
        max_sensitivity: str | None = None,
        verified_within: timedelta | None = None,
    ) -> Context:
        """The smallest cited context for ``query`` that fits the budget (see :meth:`Repo.context`)."""
        body = {
            "query": query,
            "budget_tokens": budget_tokens,
            "k": k,
            "at": rev_text(at),
            "as_of": time_text(as_of, "as_of"),
            "prefix": prefix,
            "valid_at": time_text(valid_at, "valid_at"),
            "run_id": run_id,
            "allowed_for": allowed_for,
            "max_sensitivity": max_sensitivity,
            "verified_within": duration_text(verified_within),
        }
        return self._http.json("POST", f"{self._base}/context", Context, body=body)  # type: ignore[no-any-return]

    def reads(self, run_id: str) -> list[ReadRecord]:
        """What searches and contexts recorded under ``run_id`` returned (see :meth:`Repo.reads`)."""
        path = f"{self._base}/reads/{path_segment(run_id, 'run_id')}"
        return self._http.json("GET", path, list[ReadRecord])  # type: ignore[no-any-return]

    # -- branches ------------------------------------------------------------------

    def _branches(self) -> tuple[str, list[tuple[str, Commit | None]]]:
        found = self._http.call("GET", f"{self._base}/branches")
        tips: list[tuple[str, Commit | None]] = []
        for entry in found["branches"]:
            commit = entry["commit"]
            tips.append((str(entry["name"]), None if commit is None else from_builtins(commit, Commit)))
        return str(found["head"]), tips

    @property
    def head(self) -> str:
        """The name of the current branch."""
        return self._branches()[0]

    def branches(self) -> list[str]:
        """Names of the branches that have commits, sorted."""
        return [name for name, commit in self._branches()[1] if commit is not None]

    def branch_tips(self) -> list[tuple[str, Commit]]:
        """Each branch with the commit at its tip, sorted by name."""
        return [(name, commit) for name, commit in self._branches()[1] if commit is not None]

    def tip(self, branch: str) -> str | None:
        """The id of the commit at ``branch``'s tip; None when it has no commits."""
        try:
            found = self._http.call("GET", f"{self._base}/branches/{path_segment(branch, 'branch')}")
        except NotFound:
            return None
        return str(found["commit"]["id"])

    def freshness(self, branch: str) -> Freshness:
        """A branch's tip and the tenant's erasure count, from one snapshot (see :meth:`Repo.freshness`)."""
        path = f"{self._base}/freshness/{path_segment(branch, 'branch')}"
        return self._http.json("GET", path, Freshness)  # type: ignore[no-any-return]

    def thread_branch(self, thread_id: str) -> str:
        """The branch that holds LangGraph thread ``thread_id``, or would (see :meth:`Repo.thread_branch`).

        A plain id is answered without a request; any other is looked up among the
        branches (one request), as a thread written before ADR 28's naming keeps its
        old branch.
        """
        name = thread_branch_name(thread_id)
        legacy = legacy_thread_branch(thread_id)
        if legacy is None:
            return name
        there = set(self.branches())
        return legacy if name not in there and legacy in there else name

    def branch(
        self, name: str, *, at: Rev | None = None, orphan: bool = False, author: str | None = None
    ) -> Commit | None:
        """Create branch ``name`` at ``at`` (default: HEAD); the commit it starts at (:meth:`Repo.branch`)."""
        body = {"name": name, "at": rev_text(at), "orphan": orphan, "author": author}
        found = self._http.call("POST", f"{self._base}/branches", body=body)
        return from_builtins(found["commit"], Commit | None, "the server's answer")  # type: ignore[arg-type]

    def delete_branch(self, name: str, *, author: str | None = None) -> Commit | None:
        """Delete a branch; the commit it pointed at (see :meth:`Repo.delete_branch`)."""
        del author  # the server records the token's name
        found = self._http.call("DELETE", f"{self._base}/branches/{path_segment(name, 'branch')}")
        return from_builtins(found["commit"], Commit | None, "the server's answer")  # type: ignore[arg-type]

    def merge(
        self,
        source: Rev,
        *,
        into: str | None = None,
        resolutions: Mapping[str, str | Node] | None = None,
        strategy: MergeStrategy | None = None,
        message: str | None = None,
        author: str | None = None,
        allow_unrelated_histories: bool = False,
    ) -> MergeResult:
        """Merge revision ``source`` into ``into``; conflicts come back as data (see :meth:`Repo.merge`)."""
        sent = None
        if resolutions is not None:
            sent = {
                key: node_builtins(value) if isinstance(value, Node) else value
                for key, value in resolutions.items()
            }
        body = {
            "source": rev_text(source),
            "into": into,
            "resolutions": sent,
            "strategy": strategy,
            "message": message,
            "author": author,
            "allow_unrelated_histories": allow_unrelated_histories,
        }
        return self._http.json("POST", f"{self._base}/merge", MergeResult, body=body)  # type: ignore[no-any-return]

    # -- erasure -------------------------------------------------------------------

    def forget(
        self, id: str | Sequence[str], reason: str, *, author: str | None = None, version: str | None = None
    ) -> ForgetReport:
        """Erase every version of ``id`` (or one; or of several ids, together) for real; needs an admin token.

        See :meth:`Repo.forget`.
        """
        ids = [id] if isinstance(id, str) else list(id)
        body = {"ids": ids, "reason": reason, "author": author, "version": version}
        found = self._http.call("POST", f"{self._base}/forget", body=body)
        reports = [from_builtins(one, ForgetReport, "the server's answer") for one in found["reports"]]
        if len(reports) == 1:
            return reports[0]
        # The server tells one erasure id by id: put it back together.
        return ForgetReport(
            redactions=[r for one in reports for r in one.redactions],
            already_erased=[r for one in reports for r in one.already_erased],
            commit=next((one.commit for one in reports if one.commit is not None), None),
        )

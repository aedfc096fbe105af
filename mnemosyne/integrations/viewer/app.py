"""``mnemo ui``: a local, read-only browser viewer of one store, on the public API only.

Pages (each takes ``?tenant=`` and ``?branch=``; default the handle's tenant and
the current branch): the log ``/`` (commit graph, paginated), a commit
``/commit/<rev>`` (its diff against its first parent and the contradictions it
recorded), a memory ``/node/<id>`` (the current version, blame, every version's
status), a timeline ``/facts/<subject>/<predicate>`` (a bitemporal chart) and
``/search?q=``. Server-rendered HTML with inline SVG and one stylesheet; no
script, nothing from another origin.

Safe by default (see :class:`Guard`): only GET and HEAD, only a Host header
naming the address served (a DNS-rebinding page cannot read the memory),
every value from the store escaped by Jinja2's autoescape, and a
Content-Security-Policy that forbids anything but this origin's own files.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlencode

import jinja2
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mnemosyne import InvalidInput, NotFound, Repo
from mnemosyne.model.validation import show_invisible

from . import diffs, pages

HERE = Path(__file__).resolve().parent
CSP = "default-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'"
"""Nothing but this origin's own stylesheet: no script runs, no byte comes from elsewhere."""
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]
READ_METHODS = frozenset({"GET", "HEAD"})


def _timeline_of(request: Request) -> tuple[str, str]:
    """The subject and predicate a ``/facts/<subject>/<predicate>`` address names.

    Split on the raw path, before percent-decoding: links encode a ``/`` inside a
    subject or predicate as ``%2F``, which the decoded path would show as a separator.
    """
    raw = request.scope.get("raw_path")
    rest = raw.decode("latin-1").split("?", 1)[0] if isinstance(raw, bytes) else ""
    prefix = "/facts/"
    if not rest.startswith(prefix):  # no raw path (a test transport): the decoded one
        subject, _, predicate = request.path_params["rest"].rpartition("/")
        return subject, predicate
    parts = rest[len(prefix) :].split("/")
    if len(parts) != 2:
        subject, _, predicate = unquote(rest[len(prefix) :]).rpartition("/")
        return subject, predicate
    return unquote(parts[0]), unquote(parts[1])


class Guard:
    """The ASGI middleware that keeps the viewer local and read-only.

    A request whose Host header is not the address served (``127.0.0.1:PORT``)
    or ``localhost:PORT`` is refused with 403: a page on another site whose name
    was rebound to 127.0.0.1 sends its own name, so it can never read a page.
    Any method but GET and HEAD is 405. Every response gets the security headers.
    """

    def __init__(self, app: ASGIApp, hosts: Iterable[str]) -> None:
        self.app = app
        self.hosts = frozenset(host.lower() for host in hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one request, or refuse it."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = next((value for name, value in scope["headers"] if name == b"host"), b"")
        if host.decode("latin-1").lower() not in self.hosts:
            await _plain(send, 403, "forbidden: this viewer answers only to its own address\n")
            return
        if scope["method"] not in READ_METHODS:
            await _plain(send, 405, "method not allowed: the viewer only reads\n", [(b"allow", b"GET, HEAD")])
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, secured)


async def _plain(send: Send, status: int, text: str, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = text.encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        *(extra or []),
        *SECURITY_HEADERS,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%SZ") if value is not None else ""


def _short(value: str | None) -> str:
    return value[:7] if value else ""


def _node_path(node_id: str) -> str:
    # The id stands in the URL as it is, slashes included; anything else a URL
    # would read differently (``?``, ``#``, ``%``, spaces) is percent-encoded.
    return "/node/" + quote(node_id, safe="/")


def _visible(value: Any) -> Any:
    """A value as a page shows it: invisible characters (U+202E, U+200B, ...) as escapes.

    An id or a memory holding a right-to-left override or a zero-width space would
    otherwise pass for another on the page.
    """
    if isinstance(value, str) and not value.isascii():
        shown = show_invisible(value)
        return Markup(shown) if isinstance(value, Markup) else shown
    return value


def templates() -> jinja2.Environment:
    """The page templates, every value autoescaped."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_visible,
    )
    env.filters["when"] = _when
    env.filters["short"] = _short
    env.filters["compact"] = diffs.compact
    env.globals["node_path"] = _node_path
    env.globals["quote"] = lambda text: quote(str(text), safe="")
    return env


class Viewer:
    """The pages of one store: a handle per tenant, opened when first asked for."""

    def __init__(self, repo: Repo, embedder: str | None, page_size: int) -> None:
        self.repo = repo
        self.embedder = embedder
        self.page_size = page_size
        self.env = templates()
        self.css = (HERE / "static" / "viewer.css").read_bytes()
        self._repos = {repo.tenant: repo}
        self._lock = threading.Lock()

    def tenant_repo(self, tenant: str) -> Repo:
        """The handle on ``tenant`` (a tenant the store lacks is NotFound)."""
        with self._lock:
            found = self._repos.get(tenant)
            if found is None:
                found = Repo.open(self.repo.store, tenant=tenant)
                if self.embedder:
                    found.use_embedder(self.embedder)
                self._repos[tenant] = found
            return found

    def where(self, request: Request) -> pages.Where:
        """The tenant, branch and link-maker a request asks for."""
        params = request.query_params
        tenant = params.get("tenant") or self.repo.tenant
        repo = self.tenant_repo(tenant)
        head = repo.head
        branch = params.get("branch") or head
        # A remote-tracking ref (origin/main) reads as a branch does: log, show and diff take it.
        if branch != head and branch not in repo.branches() and branch not in _tracking(repo):
            raise NotFound(f"no branch or remote-tracking ref {branch!r} in tenant {tenant!r}")
        keep = {}
        if tenant != self.repo.tenant:
            keep["tenant"] = tenant
        if branch != head:
            keep["branch"] = branch
        return pages.Where(repo, tenant, branch, head, keep)

    def render(self, name: str, where: pages.Where | None, status: int = 200, **context: Any) -> HTMLResponse:
        """A page from its template, with what every page shows."""
        tenants = self.repo.tenants()
        branches = [*where.repo.branches(), *_tracking(where.repo)] if where is not None else []

        def url(path: str, **query: Any) -> str:
            kept = dict(where.keep) if where is not None else {}
            kept.update({k: v for k, v in query.items() if v is not None})
            return path + ("?" + urlencode(kept) if kept else "")

        html = self.env.get_template(name).render(
            where=where,
            tenants=tenants,
            branches=branches,
            default_tenant=self.repo.tenant,
            url=url,
            **context,
        )
        return HTMLResponse(html, status_code=status)

    # -- the pages ------------------------------------------------------------------------

    def log(self, request: Request) -> Response:
        """The log: the commit graph, newest first, a page at a time."""
        where = self.where(request)
        params = request.query_params
        size = _number(params.get("n"), self.page_size, 1, 500)
        skip = _number(params.get("skip"), 0, 0, 10**9)
        page = pages.log_page(where, params.get("from"), skip, size)
        return self.render("log.html", where, page=page)

    def commit(self, request: Request) -> Response:
        """One commit: its fields, parents, diff against its first parent, contradictions it recorded."""
        where = self.where(request)
        return self.render("commit.html", where, page=pages.commit_page(where, request.path_params["rev"]))

    def node(self, request: Request) -> Response:
        """One memory: its current version with blame, and every version's status."""
        where = self.where(request)
        return self.render("node.html", where, page=pages.node_page(where, request.path_params["id"]))

    def facts(self, request: Request) -> Response:
        """One (subject, predicate) timeline: the bitemporal chart and the table."""
        where = self.where(request)
        subject, predicate = _timeline_of(request)
        if not subject or not predicate:
            raise NotFound("a timeline's address is /facts/<subject>/<predicate>")
        page = pages.facts_page(where, subject, predicate, request.query_params.get("as_of") or None)
        return self.render("facts.html", where, page=page)

    def search(self, request: Request) -> Response:
        """Search by words and meaning in the branch's snapshot."""
        where = self.where(request)
        query = (request.query_params.get("q") or "").strip()
        hits = where.repo.search(query, k=20, at=where.branch) if query else []
        return self.render("search.html", where, query=query, hits=hits)

    def stylesheet(self, request: Request) -> Response:
        """The one stylesheet."""
        return Response(self.css, media_type="text/css", headers={"cache-control": "max-age=300"})

    # -- errors ---------------------------------------------------------------------------

    def error(self, request: Request, status: int, message: str) -> Response:
        """An error page (the message escaped like everything else)."""
        try:
            where: pages.Where | None = self.where(request)
        except Exception:  # the tenant or branch asked for is itself what went wrong
            where = None
        return self.render("error.html", where, status=status, status_code=status, message=message)


def _number(text: str | None, default: int, low: int, high: int) -> int:
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise InvalidInput(f"{text!r} is not a whole number") from None
    return min(max(value, low), high)


Handler = Callable[[Request, Exception], Awaitable[Response]]


def build_app(
    repo: Repo,
    *,
    port: int,
    host: str = "127.0.0.1",
    embedder: str | None = None,
    page_size: int = 50,
) -> ASGIApp:
    """The viewer of ``repo``'s store as an ASGI app, answering only to ``host:port`` and ``localhost:port``.

    Args:
        repo: an open handle; its tenant and current branch are the defaults.
        port: the port served (the Host header must name it).
        host: the address served.
        embedder: the embedder name for the handles of other tenants, if set.
        page_size: commits per log page.
    """
    viewer = Viewer(repo, embedder, page_size)

    async def not_found(request: Request, exc: Exception) -> Response:
        return viewer.error(request, 404, str(exc) if isinstance(exc, NotFound) else "no such page")

    async def bad_input(request: Request, exc: Exception) -> Response:
        return viewer.error(request, 400, str(exc))

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        return viewer.error(request, status, "no such page" if status == 404 else str(exc))

    routes = [
        Route("/", viewer.log, methods=["GET"]),
        Route("/commit/{rev:path}", viewer.commit, methods=["GET"]),
        Route("/node/{id:path}", viewer.node, methods=["GET"]),
        Route("/facts/{rest:path}", viewer.facts, methods=["GET"]),
        Route("/search", viewer.search, methods=["GET"]),
        Route("/static/viewer.css", viewer.stylesheet, methods=["GET"]),
    ]
    handlers: dict[Any, Handler] = {NotFound: not_found, InvalidInput: bad_input, HTTPException: http_error}
    app = Starlette(routes=routes, exception_handlers=handlers)
    return Guard(app, [f"{host}:{port}", f"localhost:{port}"])


def _tracking(repo: Repo) -> list[str]:
    """The names of the tenant's remote-tracking refs (``origin/main``)."""
    return [name for name, _ in repo.remote_branches()]

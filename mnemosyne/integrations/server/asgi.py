"""The ASGI application of ``mnemo serve``: routing, tokens, bodies, errors, streaming.

One process holds one :class:`Store` open and a warm :class:`Repo` per tenant;
every request is checked against the store's tokens (revocation is seen by the
next request), then its blocking work (the token check, the library call and
the rendering of its JSON) runs in one worker thread, so the event loop only
moves bytes. Ids in paths are percent-encoded (``/`` as ``%2F``): routing reads
the raw path, segment by segment. Every error is one JSON shape
``{"error": {"kind", "message", "exit_code"}}`` with the status of its kind,
never a traceback.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar
from urllib.parse import parse_qsl, unquote_to_bytes

from mnemosyne import AccessDenied, InvalidInput, MnemoError, NotFound, Repo, Store, to_json
from mnemosyne.errors import one_line
from mnemosyne.integrations.server.bodies import read_body
from mnemosyne.integrations.server.calls import SLASHED, Call, Reply, Route
from mnemosyne.integrations.server.openapi import document
from mnemosyne.integrations.server.responses import (
    JSON,
    JSON_LINES,
    MSGPACK,
    HttpError,
    Receive,
    Response,
    Scope,
    Send,
    chunk,
    error_kind,
    error_response,
    json_response,
    send_response,
    status_of,
)
from mnemosyne.integrations.server.routes import ROUTES
from mnemosyne.model.access import Token, allows
from mnemosyne.model.version import VERSION

DEFAULT_MAX_BODY = 8 * 1024 * 1024
"""Bytes a request body may hold by default (``mnemo serve --max-body``)."""

READY_TIMEOUT = 2.0
"""Seconds the store has to answer a readiness probe (``/v1/ready``)."""

SEEN = "mnemo.seen"
"""The ASGI scope key of a dict the API fills with what it learns of a request: its
``route`` (template), ``recall`` (a search or context) and ``tenant`` (once its token
checked out). Read by the metrics and the access log."""

WORKERS = 32
"""Worker threads running requests' blocking work (searches and contexts: two per core at most)."""

T = TypeVar("T")


def bearer(headers: list[tuple[bytes, bytes]]) -> str:
    """The token of an ``Authorization: Bearer …`` header.

    Raises:
        HttpError: 401, no such header, or another scheme.
    """
    given = [value for key, value in headers if key == b"authorization"]
    if not given:
        raise HttpError(
            401,
            AccessDenied,
            "this server needs a token: send 'Authorization: Bearer TOKEN' "
            "(make one with 'mnemo token create --tenant T --role read|write|admin')",
            **{"www-authenticate": 'Bearer realm="mnemo"'},
        )
    scheme, _, token = given[0].decode("latin-1").strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise HttpError(
            401,
            AccessDenied,
            "the Authorization header must be 'Bearer TOKEN'",
            **{"www-authenticate": 'Bearer realm="mnemo", error="invalid_request"'},
        )
    return token.strip()


class Tenants:
    """The served store and a warm ``Repo`` per tenant, opened on first use, closed at the end.

    Args:
        store: the store, open; closed by :meth:`close`.
        embedder: the embedder every tenant's searches use (a name), or None for
            the store's setting.
    """

    def __init__(self, store: Store, *, embedder: str | None = None) -> None:
        self.store = store
        self.embedder = embedder
        self._repos: dict[str, Repo] = {}
        self._lock = threading.Lock()

    def repo(self, tenant: str) -> Repo:
        """The tenant's ``Repo`` (the same one for every request).

        Raises:
            NotFound: no such tenant.
        """
        found = self._repos.get(tenant)  # no lock once open: the event loop asks too (see `local`)
        if found is not None:
            return found
        with self._lock:
            found = self._repos.get(tenant)
            if found is None:
                found = Repo.open(self.store, tenant=tenant, embedder=self.embedder)
                self._repos[tenant] = found
            return found

    def local(self, tenant: str) -> bool:
        """Whether a read of ``tenant`` is a lookup in this process's map, its handle open already.

        Then a request that reads one thing is answered on the event loop: handing
        it to a worker thread and back cost more than the read (about 80 µs against
        30 on a warm LMDB store), while a read that waits on a server (PostgreSQL)
        or a handle still to open would hold every connection up.
        """
        return not self.store.kv.remote and tenant in self._repos

    def forget(self, tenant: str, repo: Repo) -> None:
        """Drop a cached handle whose tenant was dropped (it is opened again when asked for)."""
        with self._lock:
            if self._repos.get(tenant) is repo:
                del self._repos[tenant]
        repo.close()

    def authenticate(self, headers: list[tuple[bytes, bytes]]) -> Token:
        """The token a request carries, if the store honours it.

        Raises:
            HttpError: 401, no token, or one that is unknown, revoked or expired.
        """
        token = self.store.check_token(bearer(headers))
        if token is None:
            raise HttpError(
                401,
                AccessDenied,
                "the token is unknown, revoked or expired",
                **{"www-authenticate": 'Bearer realm="mnemo", error="invalid_token"'},
            )
        return token

    def reachable(self) -> str | None:
        """None when the store answers a read now, else why not (the error's kind, no detail).

        The detail (a PostgreSQL URL, a path) is for the operator's log, not for whoever asks.
        """
        try:
            self.store.tenants()
        except Exception as error:  # whatever the backend raises: not ready, never a 500
            return f"the store cannot be read ({type(error).__name__})"
        return None

    def open_repos(self) -> dict[str, Repo]:
        """The tenants whose handles are open, by name."""
        with self._lock:
            return dict(self._repos)

    def close(self) -> None:
        """Close every tenant's handle, then the store."""
        with self._lock:
            repos, self._repos = list(self._repos.values()), {}
        for repo in repos:
            repo.close()
        self.store.close()


def segments_of(raw: bytes) -> list[str]:
    """The decoded segments of a raw path (``%2F`` stays inside its segment).

    Raises:
        HttpError: 400, a segment that is not UTF-8 once decoded.
    """
    try:
        return [unquote_to_bytes(part).decode("utf-8") for part in raw.split(b"/")[1:]]
    except UnicodeDecodeError:
        raise HttpError(400, InvalidInput, "the path is not UTF-8 text once percent-decoded") from None


_COMPILED = [(route, route.path.split("/")[1:]) for route in ROUTES]
_BY_WORD: dict[str, list[tuple[Route, list[str]]]] = {}
for _route, _pattern in _COMPILED:  # every route is under /v1/tenants/{tenant}/<word>
    _BY_WORD.setdefault(_pattern[3], []).append((_route, _pattern))


def _rest_taken(pattern: list[str]) -> bool:
    """Whether the route's last segment is a parameter that may span several path segments."""
    return pattern[-1][1:-1] in SLASHED


def match(method: str, segments: list[str]) -> tuple[Route, dict[str, str]]:
    """The route a request names, and its path parameters.

    An id (a branch name, a revision) at the end of a path may be sent as segments,
    ``nodes/mem/0`` as well as ``nodes/mem%2F0``: users type ids as they read them.

    Raises:
        HttpError: 404 (no such path) or 405 (the path takes other methods).
    """
    allowed: list[str] = []
    # Only the routes of the word after the tenant can match: a scan of every route cost
    # more than the rest of a served get's routing.
    word = segments[3] if len(segments) > 3 and segments[1] == "tenants" else None
    for route, pattern in _BY_WORD.get(word, _COMPILED) if word is not None else _COMPILED:
        given = segments
        if len(pattern) < len(segments) and _rest_taken(pattern):
            last = len(pattern) - 1  # the last parameter takes the rest, joined by the '/' it held
            given = [*segments[:last], "/".join(segments[last:])]
        if len(pattern) != len(given):
            continue
        params: dict[str, str] = {}
        for want, got in zip(pattern, given, strict=True):
            if want.startswith("{"):
                if not got:
                    break
                params[want[1:-1]] = got
            elif want != got:
                break
        else:
            if route.method == method:
                return route, params
            allowed.append(route.method)
    if allowed:
        raise HttpError(
            405,
            InvalidInput,
            f"{method} is not allowed here (allowed: {', '.join(allowed)})",
            allow=", ".join(allowed),
        )
    raise HttpError(404, NotFound, "no such route (see /v1/openapi.json)")


def query_of(route: Route, raw: bytes) -> dict[str, str]:
    """The query parameters of a request, each at most once, each one the route takes.

    Raises:
        HttpError: 400, naming what is wrong and the parameters the route takes.
    """
    try:
        pairs = parse_qsl(raw.decode("latin-1"), keep_blank_values=True, encoding="utf-8", errors="strict")
    except (UnicodeDecodeError, ValueError):
        raise HttpError(
            400, InvalidInput, "the query string is not UTF-8 text once percent-decoded"
        ) from None
    taken = {param.name for param in route.query}
    found: dict[str, str] = {}
    for name, value in pairs:
        if name not in taken:
            offered = ", ".join(f"?{param.name}=" for param in route.query) or "none"
            raise HttpError(400, InvalidInput, f"this route takes no ?{name}= (it takes {offered})")
        if name in found:
            raise HttpError(400, InvalidInput, f"give ?{name}= once")
        found[name] = value
    for param in route.query:
        if param.required and param.name not in found:
            raise HttpError(400, InvalidInput, f"?{param.name}= is required: {param.description}")
    return found


class Api:
    """The HTTP/JSON API under ``/v1`` (the MCP endpoint is mounted beside it).

    Args:
        tenants: the served store and its tenants.
        max_body: the most bytes a request body may hold.
        log: where one-line reports of unexpected failures go.
    """

    def __init__(
        self, tenants: Tenants, *, max_body: int = DEFAULT_MAX_BODY, log: Callable[[str], None] | None = None
    ) -> None:
        self.tenants = tenants
        self.max_body = max_body
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.openapi: bytes | None = None
        self.recall_limiter: asyncio.Semaphore | None = None
        self.probe: asyncio.Future[str | None] | None = None
        # A pool of its own rather than anyio's: run_in_executor hands work over in about
        # three quarters of the time (bench/serve_load.py measures the hop against the floor).
        self.pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="mnemo-serve")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one HTTP request (ASGI)."""
        method = scope["method"]
        headers: list[tuple[bytes, bytes]] = list(scope.get("headers") or [])
        label = "?"
        seen: dict[str, Any] = scope.get(SEEN, {})  # what the metrics and access log learn of it
        try:
            segments = segments_of(scope.get("raw_path") or scope["path"].encode())
            if segments[:1] != ["v1"]:
                raise HttpError(404, NotFound, "no such route (the API is under /v1; see /v1/openapi.json)")
            if segments == ["v1", "health"]:
                seen["route"] = "GET /v1/health"
                response = json_response(200, {"status": "ok", "version": VERSION})
            elif segments == ["v1", "ready"]:
                seen["route"] = "GET /v1/ready"
                response = await self._readiness()
            elif segments == ["v1", "openapi.json"]:
                seen["route"] = "GET /v1/openapi.json"
                response = Response(
                    200, [(b"content-type", JSON), (b"cache-control", b"no-store")], self._openapi()
                )
            elif segments == ["v1", "whoami"]:
                seen["route"] = "GET /v1/whoami"
                whom = await self.in_thread(self.tenants.authenticate, headers)
                response = json_response(200, whom)
                response.headers.append((b"x-mnemo-max-body", str(self.max_body).encode()))
            else:
                route, params = match(method, segments)
                label = f"{route.method} {route.path}"
                seen["route"], seen["recall"] = label, route.recall
                query = query_of(route, scope.get("query_string") or b"")
                token: Token | None = None
                raw = b""
                if route.body is not None or route.wire:
                    if _large(headers):
                        # The token first: a stranger never has the server hold a large body.
                        # (A small one is read at once; checking first would cost every search
                        # and commit another trip to a worker thread, about a millisecond.)
                        token = await self.in_thread(self.tenants.authenticate, headers)
                    raw = await self._body(receive, headers)
                work = functools.partial(self._run, route, params, query, raw, headers, token, seen)
                tenant = params["tenant"]
                if route.recall:
                    async with self._recall_limiter():
                        response = await self.in_thread(self._timed, work)
                elif route.quick and not query.keys() & {"at", "as_of"} and self.tenants.local(tenant):
                    # One lookup at a branch's tip (a revision such as HEAD~N walks, so it
                    # goes to a worker): cheaper here than the trip to a worker and back.
                    response = self._timed(work)
                else:
                    response = await self.in_thread(self._timed, work)
        except HttpError as error:
            response = error_response(error.status, error.kind, str(error), error.headers)
        except MnemoError as error:
            response = error_response(status_of(error), error_kind(error), one_line(error))
        except Exception as error:  # a bug: one line here, one line there, never a traceback
            self.log(f"error: {label}: {type(error).__name__}: {one_line(error)}")
            response = error_response(500, MnemoError, f"internal error ({type(error).__name__})")
        await send_response(response, send)

    async def in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a worker thread: the event loop never waits on the store."""
        return await asyncio.get_running_loop().run_in_executor(self.pool, functools.partial(fn, *args))

    def close(self) -> None:
        """Stop the worker threads (once the server has stopped)."""
        self.pool.shutdown(wait=True)

    def _recall_limiter(self) -> asyncio.Semaphore:
        """How many searches and contexts run at once: two per core.

        Each builds arrays over every memory that matches; with one per client (32
        clients, 32 worker threads) the server's memory doubled under load, for no
        speed: they share the cores. The others wait their turn on the event loop.
        """
        if self.recall_limiter is None:
            self.recall_limiter = asyncio.Semaphore(2 * (os.cpu_count() or 1))
        return self.recall_limiter

    async def _readiness(self) -> Response:
        """``/v1/ready``: 200 when the store answers a read, 503 when it does not (in time).

        Liveness (``/v1/health``) says the process answers; readiness says it can
        serve, so a load balancer sends agents elsewhere while the store is out of
        reach (a PostgreSQL server restarting). One probe at a time: a store that
        hangs holds one worker thread, however often the balancer asks.
        """
        if self.probe is None or self.probe.done():
            self.probe = asyncio.get_running_loop().run_in_executor(self.pool, self.tenants.reachable)
        try:
            reason = await asyncio.wait_for(asyncio.shield(self.probe), READY_TIMEOUT)
        except TimeoutError:
            reason = f"the store did not answer within {READY_TIMEOUT:g} s"
        if reason is None:
            return json_response(200, {"ready": True})
        return json_response(503, {"ready": False, "reason": reason})

    def _openapi(self) -> bytes:
        if self.openapi is None:
            self.openapi = to_json(document()).encode()
        return self.openapi

    async def _body(self, receive: Receive, headers: list[tuple[bytes, bytes]]) -> bytes:
        """The request body, read up to the limit.

        Raises:
            HttpError: 413, a body larger than the limit (declared or sent).
        """
        too_large = HttpError(
            413, InvalidInput, f"the request body is larger than this server takes ({self.max_body:,} bytes)"
        )
        declared = next((value for key, value in headers if key == b"content-length"), None)
        if declared is not None and declared.isdigit() and int(declared) > self.max_body:
            raise too_large
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise HttpError(400, InvalidInput, "the client went away before sending its body")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise too_large
            chunks.append(chunk)
            if not message.get("more_body"):
                return b"".join(chunks)

    def _timed(self, work: Callable[[], Response]) -> Response:
        """Run a request's blocking work (:meth:`_run`) and say how long it took.

        The answer carries ``Server-Timing`` (``app;dur=`` milliseconds; of a stream,
        its first lines), so a client can tell the server's work from the network and
        HTTP around it. An error answer says so too, unless the token was refused: a
        stranger learns nothing of how long checking it took.
        """
        started = time.perf_counter()
        try:
            response = work()
        except HttpError as error:
            if error.status == 401:
                raise
            response = error_response(error.status, error.kind, str(error), error.headers)
        except MnemoError as error:
            response = error_response(status_of(error), error_kind(error), one_line(error))
        spent = (time.perf_counter() - started) * 1e3
        response.headers.append((b"server-timing", f"app;dur={spent:.2f}".encode()))
        return response

    def _run(
        self,
        route: Route,
        params: dict[str, str],
        query: dict[str, str],
        raw: bytes,
        headers: list[tuple[bytes, bytes]],
        token: Token | None = None,
        seen: dict[str, Any] | None = None,
    ) -> Response:
        """Check the token (unless checked already), call the handler and render its reply.

        All of a request's blocking work.
        """
        if token is None:
            token = self.tenants.authenticate(headers)
        tenant = params["tenant"]
        if tenant != token.tenant:
            # The same answer as for a tenant that does not exist: a token learns of no other.
            raise HttpError(404, NotFound, f"no tenant {tenant!r}")
        if seen is not None:
            seen["tenant"] = tenant  # its token checked out: a tenant of the store, never a stranger's guess
        if not allows(token.role, route.role):
            raise HttpError(
                403,
                AccessDenied,
                f"a {token.role} token cannot do this: it needs {_article(route.role)} {route.role} token",
            )
        body = read_body(raw, route.body) if route.body is not None else raw if route.wire else None
        if_match = next((value.decode("latin-1") for key, value in headers if key == b"if-match"), None)
        for attempt in (1, 2):
            repo = self.tenants.repo(tenant)
            call = Call(repo, token, tenant, params, query, body, _etag_value(if_match))
            try:
                return self._rendered(route, route.handler(call))
            except NotFound:
                # A handle whose tenant was dropped (and made again) since it opened: once more, afresh.
                if attempt == 2 or not _dropped(repo):
                    raise
                self.tenants.forget(tenant, repo)
        raise AssertionError("unreachable")

    def _rendered(self, route: Route, reply: Reply) -> Response:
        headers = [(b"cache-control", b"no-store")]
        if reply.etag is not None:
            headers.append((b"etag", f'"{reply.etag}"'.encode()))
        if reply.location is not None:
            headers.append((b"location", reply.location.encode()))
        if reply.raw is not None:
            limit = (
                b"x-mnemo-max-body",
                str(self.max_body).encode(),
            )  # how a pushing client sizes its requests
            return Response(reply.status, [(b"content-type", MSGPACK), limit, *headers], reply.raw)
        if reply.lines is not None:
            rest = iter(reply.lines)
            first, done = chunk(rest)
            return Response(200, [(b"content-type", JSON_LINES), *headers], first, None if done else rest)
        return Response(reply.status, [(b"content-type", JSON), *headers], to_json(reply.value).encode())


CHECKED_FIRST = 64 << 10
"""Bodies past this size (or of no declared size) are read only once the token checks out."""


def _large(headers: list[tuple[bytes, bytes]]) -> bool:
    declared = next((value for key, value in headers if key == b"content-length"), None)
    return declared is None or not declared.isdigit() or int(declared) > CHECKED_FIRST


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _dropped(repo: Repo) -> bool:
    return repo.dropped


def _etag_value(header: str | None) -> str | None:
    """The commit id an ``If-Match`` header names (``"ID"``, ``W/"ID"`` or ``*``).

    Raises:
        HttpError: 400, several tags (one tip is expected).
    """
    if header is None:
        return None
    value = header.strip()
    if "," in value:
        raise HttpError(400, InvalidInput, "If-Match: give one tag, the tip read (or *)")
    return value.removeprefix("W/").strip('"')

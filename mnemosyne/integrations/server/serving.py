"""The whole served application: the API under ``/v1``, MCP at ``/mcp``, and their lifespan."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib.util import find_spec
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.to_thread

from mnemosyne import InvalidInput, MnemoError, NotFound, Store
from mnemosyne.errors import one_line
from mnemosyne.integrations.server.asgi import DEFAULT_MAX_BODY, SEEN, Api, Tenants
from mnemosyne.integrations.server.limits import Limits
from mnemosyne.integrations.server.metrics import CONTENT_TYPE, Metrics, tenant_label
from mnemosyne.integrations.server.responses import (
    Message,
    Receive,
    Response,
    Scope,
    Send,
    error_response,
    send_response,
)

if TYPE_CHECKING:
    from mnemosyne.integrations.server.mcp_http import McpEndpoint
    from mnemosyne.integrations.server.tracing import Tracing


class ServedApp:
    """The ASGI application ``mnemo serve`` runs under uvicorn.

    Attributes:
        tenants: the served store and its tenants' warm handles (closed by the caller
            once the server has stopped: :meth:`close`).
        api: the HTTP/JSON API.
        limits: the bounds it keeps (header fields, requests under way per token).
        access_log: where a line per request goes (never its token), or None.
        json_log: whether those lines are JSON objects (else text).
        metrics: what is counted for ``/metrics``, or None: not served, nothing counted.
        tracing: the OpenTelemetry spans of requests, or None: none (nothing of it loaded).
    """

    def __init__(
        self,
        tenants: Tenants,
        api: Api,
        mcp: McpOnDemand | None,
        limits: Limits | None = None,
        access_log: Callable[[str], None] | None = None,
        *,
        json_log: bool = False,
        metrics: Metrics | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self.tenants = tenants
        self.api = api
        self.mcp = mcp
        self.limits = limits or Limits()
        self.access_log = access_log
        self.json_log = json_log
        self.metrics = metrics
        self.tracing = tracing
        self.in_flight: dict[bytes, int] = {}  # by the Authorization header: requests under way

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one ASGI event: the lifespan, or a request to the API or to MCP."""
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
        elif kind == "http":
            if self.access_log is None and self.metrics is None and self.tracing is None:
                await self._bounded(scope, receive, send)  # nothing watches: not a step more
            else:
                await self._watched(scope, receive, send)
        elif kind == "websocket":
            await send({"type": "websocket.close", "code": 1003})

    async def _watched(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a request, then count it, log a line of it and end its span: what, the status, how long."""
        started = time.perf_counter()
        status = 0
        seen: dict[str, Any] = {}
        scope[SEEN] = seen
        span = self.tracing.start(scope) if self.tracing is not None else None

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self._bounded(scope, receive, sending)
        finally:
            spent = time.perf_counter() - started
            route = seen.get("route", "other")
            tenant: str | None = seen.get("tenant")
            if self.metrics is not None:
                self.metrics.answered(route, status, tenant, spent, seen.get("recall", False))
            if self.access_log is not None:
                self._log(scope, status, spent, route, tenant)
            if span is not None:
                assert self.tracing is not None
                self.tracing.end(span, route, status, tenant)

    def _log(self, scope: Scope, status: int, spent: float, route: str, tenant: str | None) -> None:
        """One line of the access log: text, or a JSON object (``--access-log-format json``)."""
        assert self.access_log is not None
        client = scope.get("client")
        who = f"{client[0]}:{client[1]}" if client else "-"
        target = scope.get("raw_path") or scope["path"].encode()
        if scope.get("query_string"):
            target += b"?" + scope["query_string"]
        if self.json_log:
            entry = {
                "time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                "client": who,
                "method": scope["method"],
                "target": target.decode("latin-1"),
                "route": route,
                "status": status or None,
                "ms": round(spent * 1e3, 2),
                "tenant": tenant_label(tenant) if tenant is not None else None,
            }
            self.access_log(json.dumps(entry, ensure_ascii=True, separators=(",", ":")))
            return
        shown = target.decode("latin-1").encode("unicode_escape").decode("ascii")  # one line, always
        self.access_log(f'{who} - "{scope["method"]} {shown}" {status or "-"} {spent * 1e3:.2f}ms')

    async def _bounded(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a request within the bounds: its header fields counted, its token's requests under way."""
        headers = scope.get("headers") or []
        if len(headers) > self.limits.header_count:
            message = (
                f"the request has {len(headers)} header fields: this server takes {self.limits.header_count}"
            )
            await send_response(error_response(431, InvalidInput, message), send)
            return
        key = next((value for name, value in headers if name == b"authorization"), None)
        if key is None:
            await self._route(scope, receive, send)
            return
        under_way = self.in_flight.get(key, 0)
        if under_way >= self.limits.max_in_flight:
            message = (
                f"this token has {under_way} requests under way, the most this server takes at once: "
                "wait for one to finish"
            )
            await send_response(error_response(429, MnemoError, message, {"retry-after": "1"}), send)
            return
        self.in_flight[key] = under_way + 1
        try:
            await self._route(scope, receive, send)
        finally:
            left = self.in_flight[key] - 1
            if left:
                self.in_flight[key] = left
            else:
                del self.in_flight[key]

    async def _route(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A request to the API, to MCP, or for the metrics."""
        if scope["path"] == "/metrics" and self.metrics is not None:
            await self._scrape(scope, send)
        elif scope["path"] not in ("/mcp", "/mcp/"):
            await self.api(scope, receive, send)
        elif self.mcp is None:
            response = error_response(404, NotFound, "MCP is not served here: it needs the 'mcp' extra")
            await send_response(response, send)
        else:
            scope.get(SEEN, {})["route"] = "POST /mcp"
            await self.mcp(scope, receive, send)

    async def _scrape(self, scope: Scope, send: Send) -> None:
        """``/metrics``: the counts, and the recall backlog of every open tenant, read now."""
        assert self.metrics is not None
        scope.get(SEEN, {})["route"] = "GET /metrics"
        if scope["method"] not in ("GET", "HEAD"):
            response = error_response(405, InvalidInput, "/metrics takes GET", {"allow": "GET"})
        else:
            pending = await self.api.in_thread(_pending, self.tenants)
            # Rendered here, on the event loop that counts: the counts never change under it.
            page = self.metrics.render(pending)
            response = Response(200, [(b"content-type", CONTENT_TYPE), (b"cache-control", b"no-store")], page)
        await send_response(response, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup
        async with anyio.create_task_group() as group:
            if self.mcp is not None:
                self.mcp.task_group = group
            await send({"type": "lifespan.startup.complete"})
            await receive()  # lifespan.shutdown
            group.cancel_scope.cancel()  # the MCP session managers, and their sessions
        await send({"type": "lifespan.shutdown.complete"})

    def close(self) -> None:
        """Stop the worker threads, close the handles and the store, export the last spans (once stopped)."""
        self.api.close()
        self.tenants.close()
        if self.tracing is not None:
            self.tracing.close()


class McpOnDemand:
    """The endpoint at ``/mcp``, the MCP SDK imported at its first request.

    Importing the SDK took most of a server's start-up (about 2 s of 2.7 on a busy
    machine, against half a second for the rest), paid by every server whether an
    MCP host ever connects or not. It is imported in a worker thread, so the API
    goes on answering meanwhile.

    Attributes:
        task_group: the application's task group, where MCP sessions run (set by the lifespan).
    """

    def __init__(self, tenants: Tenants, *, host: str) -> None:
        self.tenants = tenants
        self.host = host
        self.task_group: anyio.abc.TaskGroup | None = None
        self._endpoint: McpEndpoint | None = None
        self._missing: str | None = None
        self._lock = anyio.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request to ``/mcp`` (ASGI)."""
        endpoint = self._endpoint or await self._loaded()
        if endpoint is None:
            await send_response(
                error_response(404, NotFound, f"MCP is not served here: {self._missing}"), send
            )
            return
        await endpoint(scope, receive, send)

    async def _loaded(self) -> McpEndpoint | None:
        async with self._lock:
            if self._endpoint is None and self._missing is None:
                try:
                    self._endpoint = await anyio.to_thread.run_sync(self._built)
                except ImportError as error:  # the SDK is there, but not what it needs
                    self._missing = f"the 'mcp' extra does not load ({one_line(error)})"
                    return None
                self._endpoint.task_group = self.task_group
            return self._endpoint

    def _built(self) -> McpEndpoint:
        from mnemosyne.integrations.server.mcp_http import McpEndpoint

        return McpEndpoint(self.tenants, host=self.host)


def _pending(tenants: Tenants) -> dict[str, int]:
    """Versions each open tenant's recall index has yet to take in (a tenant that fails is left out)."""
    found = {}
    for name, repo in tenants.open_repos().items():
        try:
            found[name] = repo.pending_recall().versions
        except MnemoError:
            continue  # dropped meanwhile, or the store out of reach: /v1/ready says so
    return found


def build_app(
    store: Store,
    *,
    host: str = "127.0.0.1",
    max_body: int = DEFAULT_MAX_BODY,
    embedder: str | None = None,
    log: Callable[[str], None] | None = None,
    limits: Limits | None = None,
    access_log: Callable[[str], None] | None = None,
    json_log: bool = False,
    metrics: bool = False,
    tracing: Tracing | None = None,
) -> ServedApp:
    """The application serving ``store``: every tenant, each reached by its tokens.

    Args:
        store: the store, open; the application owns it from now on (:meth:`ServedApp.close`).
        host: the address it is served on (MCP's ``Host`` checks follow it).
        max_body: the most bytes a request body may hold (413 beyond).
        embedder: the embedder searches use (a name), or None for the store's setting.
        log: where one-line reports of unexpected failures go (default: stderr).
        limits: the bounds on header fields and each token's requests under way
            (the connection bounds are kept by :mod:`.connections`).
        access_log: where a line per request goes (never its token), or None: none.
        json_log: whether access-log lines are JSON objects (else text).
        metrics: whether requests are counted and ``/metrics`` served (no token asked: see docs/serving.md).
        tracing: where requests' spans go (:class:`~.tracing.Tracing`), or None: no traces.
    """
    tenants = Tenants(store, embedder=embedder)
    api = Api(tenants, max_body=max_body, log=log)
    watched = Metrics() if metrics else None
    mcp = McpOnDemand(tenants, host=host) if find_spec("mcp") is not None else None
    return ServedApp(
        tenants, api, mcp, limits, access_log, json_log=json_log, metrics=watched, tracing=tracing
    )

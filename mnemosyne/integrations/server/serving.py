"""The whole served application: the API under ``/v1``, MCP at ``/mcp``, and their lifespan."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from mnemosyne import InvalidInput, MnemoError, NotFound, Store
from mnemosyne.integrations.server.asgi import DEFAULT_MAX_BODY, Api, Tenants
from mnemosyne.integrations.server.limits import Limits
from mnemosyne.integrations.server.responses import (
    Message,
    Receive,
    Scope,
    Send,
    error_response,
    send_response,
)

if TYPE_CHECKING:
    from mnemosyne.integrations.server.mcp_http import McpEndpoint


class ServedApp:
    """The ASGI application ``mnemo serve`` runs under uvicorn.

    Attributes:
        tenants: the served store and its tenants' warm handles (closed by the caller
            once the server has stopped: :meth:`close`).
        api: the HTTP/JSON API.
        limits: the bounds it keeps (header fields, requests under way per token).
        access_log: where a line per request goes (never its token), or None.
    """

    def __init__(
        self,
        tenants: Tenants,
        api: Api,
        mcp: McpEndpoint | None,
        limits: Limits | None = None,
        access_log: Callable[[str], None] | None = None,
    ) -> None:
        self.tenants = tenants
        self.api = api
        self.mcp = mcp
        self.limits = limits or Limits()
        self.access_log = access_log
        self.in_flight: dict[bytes, int] = {}  # by the Authorization header: requests under way

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one ASGI event: the lifespan, or a request to the API or to MCP."""
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
        elif kind == "http":
            if self.access_log is None:
                await self._bounded(scope, receive, send)
            else:
                await self._logged(scope, receive, send)
        elif kind == "websocket":
            await send({"type": "websocket.close", "code": 1003})

    async def _logged(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a request, then log one line of it: who, what, the status, how long (no header)."""
        assert self.access_log is not None
        started = time.perf_counter()
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self._bounded(scope, receive, sending)
        finally:
            client = scope.get("client")
            who = f"{client[0]}:{client[1]}" if client else "-"
            target = scope.get("raw_path") or scope["path"].encode()
            if scope.get("query_string"):
                target += b"?" + scope["query_string"]
            shown = target.decode("latin-1").encode("unicode_escape").decode("ascii")  # one line, always
            spent = (time.perf_counter() - started) * 1e3
            self.access_log(f'{who} - "{scope["method"]} {shown}" {status or "-"} {spent:.2f}ms')

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
        """A request to the API or to MCP."""
        if scope["path"] not in ("/mcp", "/mcp/"):
            await self.api(scope, receive, send)
        elif self.mcp is None:
            response = error_response(404, NotFound, "MCP is not served here: it needs the 'mcp' extra")
            await send_response(response, send)
        else:
            await self.mcp(scope, receive, send)

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
        """Stop the worker threads, close the handles and the store (once the server has stopped)."""
        self.api.close()
        self.tenants.close()


def build_app(
    store: Store,
    *,
    host: str = "127.0.0.1",
    max_body: int = DEFAULT_MAX_BODY,
    embedder: str | None = None,
    log: Callable[[str], None] | None = None,
    limits: Limits | None = None,
    access_log: Callable[[str], None] | None = None,
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
    """
    tenants = Tenants(store, embedder=embedder)
    api = Api(tenants, max_body=max_body, log=log)
    try:
        from mnemosyne.integrations.server.mcp_http import McpEndpoint
    except ImportError:
        return ServedApp(tenants, api, None, limits, access_log)
    return ServedApp(tenants, api, McpEndpoint(tenants, host=host), limits, access_log)

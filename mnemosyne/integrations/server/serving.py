"""The whole served application: the API under ``/v1``, MCP at ``/mcp``, and their lifespan."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from mnemosyne import NotFound, Store
from mnemosyne.integrations.server.asgi import DEFAULT_MAX_BODY, Api, Tenants
from mnemosyne.integrations.server.responses import Receive, Scope, Send, error_response, send_response

if TYPE_CHECKING:
    from mnemosyne.integrations.server.mcp_http import McpEndpoint


class ServedApp:
    """The ASGI application ``mnemo serve`` runs under uvicorn.

    Attributes:
        tenants: the served store and its tenants' warm handles (closed by the caller
            once the server has stopped: :meth:`close`).
        api: the HTTP/JSON API.
    """

    def __init__(self, tenants: Tenants, api: Api, mcp: McpEndpoint | None) -> None:
        self.tenants = tenants
        self.api = api
        self.mcp = mcp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one ASGI event: the lifespan, or a request to the API or to MCP."""
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
        elif kind == "http":
            path = scope["path"]
            if path in ("/mcp", "/mcp/"):
                if self.mcp is None:
                    response = error_response(
                        404, NotFound, "MCP is not served here: it needs the 'mcp' extra"
                    )
                    await send_response(response, send)
                else:
                    await self.mcp(scope, receive, send)
            else:
                await self.api(scope, receive, send)
        elif kind == "websocket":
            await send({"type": "websocket.close", "code": 1003})

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
) -> ServedApp:
    """The application serving ``store``: every tenant, each reached by its tokens.

    Args:
        store: the store, open; the application owns it from now on (:meth:`ServedApp.close`).
        host: the address it is served on (MCP's ``Host`` checks follow it).
        max_body: the most bytes a request body may hold (413 beyond).
        embedder: the embedder searches use (a name), or None for the store's setting.
        log: where one-line reports of unexpected failures go (default: stderr).
    """
    tenants = Tenants(store, embedder=embedder)
    api = Api(tenants, max_body=max_body, log=log)
    try:
        from mnemosyne.integrations.server.mcp_http import McpEndpoint
    except ImportError:
        return ServedApp(tenants, api, None)
    return ServedApp(tenants, api, McpEndpoint(tenants, host=host))

"""MCP over streamable HTTP at ``/mcp``: the tools of ``mnemo mcp``, behind the same tokens.

A token reaches one tenant with one role, so each (tenant, role) that connects
gets its own MCP server (:func:`~mnemosyne.integrations.mcp_server.build_server`
over the tenant's warm ``Repo``): read tokens the reading tools, write tokens the
writing ones too, admin tokens also ``forget``. Its session manager (the SDK's
streamable HTTP transport) runs in the application's task group from its first
request until shutdown. Every HTTP request is checked against the store's
tokens first, so a revoked token is refused on its next request, and a session
answers only the token that opened it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from mnemosyne import MnemoError, Repo
from mnemosyne.errors import one_line
from mnemosyne.integrations.mcp_server import build_server
from mnemosyne.integrations.server.asgi import Tenants
from mnemosyne.integrations.server.responses import (
    HttpError,
    Receive,
    Scope,
    Send,
    error_kind,
    error_response,
    send_response,
    status_of,
)
from mnemosyne.model.access import Role, Token

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class McpEndpoint:
    """The ASGI app at ``/mcp``.

    Args:
        tenants: the served store and its tenants' handles.
        host: the address served (on loopback the SDK also checks ``Host`` and ``Origin``).
    """

    def __init__(self, tenants: Tenants, *, host: str) -> None:
        self.tenants = tenants
        self.host = host
        self.task_group: anyio.abc.TaskGroup | None = None
        self._served: dict[tuple[str, Role], _Served] = {}
        self._lock = anyio.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one HTTP request of the MCP transport (ASGI), once its token is checked."""
        headers: list[tuple[bytes, bytes]] = list(scope.get("headers") or [])
        try:
            token, stale = await anyio.to_thread.run_sync(self._checked, headers)
            manager = await self._manager(token.tenant, token.role, stale)
        except HttpError as error:
            await send_response(error_response(error.status, error.kind, str(error), error.headers), send)
            return
        except MnemoError as error:
            await send_response(error_response(status_of(error), error_kind(error), one_line(error)), send)
            return
        # The SDK binds each session to the credential that opened it: here, the token's id.
        access = AccessToken(token=token.id, client_id=token.id, scopes=[token.role])
        await manager.handle_request({**scope, "user": AuthenticatedUser(access)}, receive, send)

    def _checked(self, headers: list[tuple[bytes, bytes]]) -> tuple[Token, bool]:
        """The request's token, and whether its (tenant, role) server holds a handle since dropped."""
        token = self.tenants.authenticate(headers)
        served = self._served.get((token.tenant, token.role))
        return token, served is not None and served.repo.dropped

    async def _manager(self, tenant: str, role: Role, stale: bool) -> StreamableHTTPSessionManager:
        async with self._lock:
            found = self._served.get((tenant, role))
            if found is not None and not stale:
                return found.manager
            if found is not None:  # the tenant was dropped and made again: a server afresh
                found.scope.cancel()
                del self._served[(tenant, role)]
                self.tenants.forget(tenant, found.repo)
            if self.task_group is None:
                raise MnemoError("the MCP endpoint serves only inside the application's lifespan")

            def built() -> tuple[Repo, Any]:
                repo = self.tenants.repo(tenant)
                return repo, build_server(repo, writable=role != "read", allow_erase=role == "admin")

            repo, server = await anyio.to_thread.run_sync(built)
            security = None
            if self.host not in LOOPBACK_HOSTS:
                # Bearer tokens guard every request; Host is whatever name a proxy in front uses.
                security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
            server.streamable_http_app(
                streamable_http_path="/mcp", transport_security=security, host=self.host
            )
            manager: StreamableHTTPSessionManager = server.session_manager
            scope: anyio.CancelScope = await self.task_group.start(_run, manager)
            self._served[(tenant, role)] = _Served(repo, manager, scope)
            return manager


@dataclass
class _Served:
    """The MCP server of one (tenant, role): its handle, its session manager, and how to stop it."""

    repo: Repo
    manager: StreamableHTTPSessionManager
    scope: anyio.CancelScope


async def _run(
    manager: StreamableHTTPSessionManager, *, task_status: Any = anyio.TASK_STATUS_IGNORED
) -> None:
    with anyio.CancelScope() as scope:
        async with manager.run():
            task_status.started(scope)
            await anyio.sleep_forever()

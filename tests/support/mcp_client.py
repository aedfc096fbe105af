"""Drive an MCP server as a host does: the SDK's own ``Client``, in-process or over stdio.

Imports the ``mcp`` extra: a test module imports this inside its guard
(``try: ... except ImportError: unavailable(...)``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import anyio
import anyio.from_thread
from mcp import Client
from mcp_types import CallToolResult, Implementation, ServerCapabilities, TextContent

from mnemosyne import to_json

TIMEOUT = 30.0
"""Seconds any one session may take: a hung server fails the test instead of the run."""


class Session:
    """A connected MCP client, called synchronously through a blocking portal."""

    def __init__(self, portal: anyio.from_thread.BlockingPortal, client: Client) -> None:
        self.portal = portal
        self.client = client

    def call(self, tool: str, **arguments: Any) -> CallToolResult:
        async def call() -> CallToolResult:
            with anyio.fail_after(TIMEOUT):
                return await self.client.call_tool(tool, arguments)

        return self.portal.call(call)

    def ok(self, tool: str, **arguments: Any) -> Any:
        """The structured result of a call that must succeed (checked against its output schema)."""
        result = self.call(tool, **arguments)
        assert not result.is_error, result.content
        assert result.structured_content is not None
        (block,) = result.content  # the same document as text, for hosts that read text only
        assert isinstance(block, TextContent) and json.loads(block.text) == result.structured_content
        return result.structured_content

    def error(self, tool: str, **arguments: Any) -> str:
        """The one text block of a call that must fail as a tool error."""
        result = self.call(tool, **arguments)
        assert result.is_error, result.structured_content
        (block,) = result.content
        assert isinstance(block, TextContent)
        return block.text

    def tools(self) -> dict[str, Any]:
        async def listed() -> Any:
            return await self.client.list_tools()

        return {tool.name: tool for tool in self.portal.call(listed).tools}

    def request(self, method: str, *args: Any) -> Any:
        """Any other request of the client (``list_resource_templates``, ``read_resource``, ...)."""

        async def sent() -> Any:
            with anyio.fail_after(TIMEOUT):
                return await getattr(self.client, method)(*args)

        return self.portal.call(sent)

    def capabilities(self) -> ServerCapabilities:
        """What the server advertised when the session started."""
        return self.client.server_capabilities


@contextmanager
def connected(*servers: Any, names: tuple[str, ...] = (), mode: str = "auto") -> Iterator[list[Session]]:
    """One session per server (an ``MCPServer`` in-process, or ``StdioServerParameters``).

    The sessions start and stop side by side: a stdio server spends a second or two
    importing the SDK before it answers, and two of them fit on two cores.
    """
    with anyio.from_thread.start_blocking_portal() as portal, ThreadPoolExecutor(len(servers)) as pool:
        infos = [Implementation(name=name, version="1.0") for name in names]
        managers = [
            portal.wrap_async_context_manager(
                Client(server, client_info=infos[i] if i < len(infos) else None, mode=mode)  # type: ignore[arg-type]
            )
            for i, server in enumerate(servers)
        ]
        started = [pool.submit(manager.__enter__) for manager in managers]
        entered = [
            manager for manager, future in zip(managers, started, strict=True) if future.exception() is None
        ]
        try:
            yield [Session(portal, future.result()) for future in started]  # raises the first failure
        finally:
            # Stopped without the body's exception: a failed assertion is reported as itself.
            list(pool.map(lambda manager: manager.__exit__(None, None, None), entered))


def lib_form(value: Any) -> Any:
    """A library result in its one JSON form, as plain values."""
    return json.loads(to_json(value))


def failed(tool: str, error: BaseException) -> str:
    """The text of the tool error that carries a library error's one-line message."""
    return f"Error executing tool {tool}: {error}"

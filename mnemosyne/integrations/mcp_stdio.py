"""MCP over stdio with every line checked before the SDK reads it: bounded, UTF-8, JSON, shallow.

The SDK's stdio transport reads stdin a line at a time without a bound (a line
that never ends is read until memory runs out), decodes it leniently (invalid
UTF-8 becomes U+FFFD), and drops a line it cannot parse without answering: the
host waits for an answer that never comes. Here each line is read with a bound
(:data:`MAX_MESSAGE_BYTES`), and one that is not UTF-8, not JSON, nested deeper
than :data:`MAX_MESSAGE_DEPTH`, or that gives a key twice in one object (which
the HTTP server refuses too), is answered with a JSON-RPC error, then skipped:

- ``-32700`` (parse error) with ``"id": null`` when the line cannot be read at
  all (too long, not UTF-8, not JSON);
- ``-32600`` (invalid request) when it is JSON the server refuses, to the
  request's id when the line has one, so the host's call ends.

Lines that pass go to the SDK's own transport, which writes the answers (and
keeps stray output of a tool off the wire).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
import anyio.to_thread
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError

from mnemosyne import InvalidInput
from mnemosyne.model.jsonform import json_values
from mnemosyne.model.validation import MAX_INPUT_BYTES

MAX_MESSAGE_BYTES = MAX_INPUT_BYTES
"""The longest line (one JSON-RPC message) read; a longer one is answered with a parse error."""

MAX_MESSAGE_DEPTH = 100
"""The deepest nesting of lists and objects a message may have (a tool's arguments hold less)."""

_CHUNK = 1 << 16


class CheckedLines:
    """The lines of a binary stream, each checked; those that fail are answered, not passed on.

    Iterated by the SDK's transport in place of stdin (``async for line in stdin``).

    Args:
        fd: the descriptor to read (0: standard input).
        limit: the longest line read, in bytes.
    """

    def __init__(self, fd: int = 0, *, limit: int = MAX_MESSAGE_BYTES) -> None:
        self.fd = fd
        self.limit = limit
        self._buffer = bytearray()
        self._eof = False
        self._answers: Any = None
        self._ready = anyio.Event()

    def answer_with(self, write_stream: Any) -> None:
        """Where the errors go: the transport's write stream (known once it is open)."""
        self._answers = write_stream
        self._ready.set()

    def __aiter__(self) -> CheckedLines:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self._line()
            if line is None:
                raise StopAsyncIteration
            if isinstance(line, ErrorData):
                await self._answer(None, line)
                continue
            if not line.strip():
                continue  # a blank line is no message: nothing to answer
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as error:
                await self._answer(None, _parse_error(f"not UTF-8 (bad byte at offset {error.start})"))
                continue
            refused = _refusal(text)
            if refused is None:
                return text
            await self._answer(*refused)

    async def _line(self) -> bytes | ErrorData | None:
        """The next line (without its newline); an error for one too long (skipped whole); None at the end."""
        skipping = False
        scanned = 0  # the buffer's bytes known to hold no newline: each byte is searched once
        while True:
            end = self._buffer.find(b"\n", scanned)
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                return _too_long(self.limit) if skipping or len(line) > self.limit else line
            if len(self._buffer) > self.limit:
                skipping = True  # read on to the line's end, holding none of it
                self._buffer.clear()
            scanned = len(self._buffer)
            if self._eof:
                if skipping:
                    return _too_long(self.limit)
                line = bytes(self._buffer)
                self._buffer.clear()
                return line or None
            chunk = await anyio.to_thread.run_sync(os.read, self.fd, _CHUNK, abandon_on_cancel=True)
            if not chunk:
                self._eof = True
            self._buffer += chunk

    async def _answer(self, request_id: str | int | None, error: ErrorData) -> None:
        await self._ready.wait()
        message = JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
        try:
            await self._answers.send(SessionMessage(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the server is ending: nobody is left to answer


def _parse_error(why: str) -> ErrorData:
    return ErrorData(code=PARSE_ERROR, message=f"Parse error: {why}")


def _too_long(limit: int) -> ErrorData:
    return _parse_error(f"a message longer than {limit:,} bytes (the most one line may hold)")


def _refusal(text: str) -> tuple[str | int | None, ErrorData] | None:
    """Why the message ``text`` is refused, and the id to answer to; None when it is not."""
    try:
        values = json_values(text, "the message")
    except InvalidInput as error:
        reason = str(error).removeprefix("the message: ")
        try:
            json.loads(text)
        except (ValueError, RecursionError):
            return None, _parse_error(reason)  # not JSON at all
        return _request_id(text), ErrorData(code=INVALID_REQUEST, message=f"Invalid request: {reason}")
    if len(values) != 1:
        return None, _parse_error("a line holds one message, and this one holds several values")
    ((_, value),) = values
    depth = _depth(value)
    if depth <= MAX_MESSAGE_DEPTH:
        return None
    reason = f"the message is nested {depth} levels deep; at most {MAX_MESSAGE_DEPTH} are allowed"
    return _request_id(text), ErrorData(code=INVALID_REQUEST, message=f"Invalid request: {reason}")


def _depth(value: Any) -> int:
    """How deeply lists and objects nest in ``value`` (a scalar: 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            depth += 1
            deepest = max(deepest, depth)
            stack.extend((child, depth) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _request_id(text: str) -> str | int | None:
    """The id of the request ``text`` holds, read leniently (a refused message may still have one)."""
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        return None
    found = message.get("id") if isinstance(message, dict) else None
    return found if isinstance(found, str | int) and not isinstance(found, bool) else None


@asynccontextmanager
async def checked_stdio() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's stdio transport, reading standard input through :class:`CheckedLines`."""
    lines = CheckedLines(0)
    # The SDK iterates what it is given as stdin: an async iterable of text lines.
    async with stdio_server(stdin=cast(Any, lines)) as (read_stream, write_stream):
        lines.answer_with(write_stream)
        yield read_stream, write_stream

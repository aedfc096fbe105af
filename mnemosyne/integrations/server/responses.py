"""Responses of the served API: the one error shape, statuses by kind, JSON and JSON Lines.

Every error is ``{"error": {"kind", "message", "exit_code"}}``: the library's
error class (a private subclass named by its public one), its one-line
message, and the exit code ``mnemo`` gives it; the HTTP status follows the
kind. Never a traceback. A JSON Lines stream is rendered a chunk per
worker-thread hop; an error part-way ends it with a last line in the error shape.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass
from itertools import islice
from typing import Any

import anyio.to_thread

from mnemosyne import (
    AccessDenied,
    ClaimConflict,
    CorruptObject,
    InvalidInput,
    MergeConflict,
    MnemoError,
    NotFound,
    Redacted,
    RefConflict,
    StorageFull,
    to_json,
)
from mnemosyne.errors import KINDS, exit_code, one_line
from mnemosyne.integrations.server.calls import is_precondition

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

LINES_PER_CHUNK = 256
"""Results rendered per worker-thread hop of a JSON Lines stream."""


_STATUS: dict[type[MnemoError], int] = {
    AccessDenied: 403,
    Redacted: 410,
    NotFound: 404,
    InvalidInput: 400,
    ClaimConflict: 409,
    MergeConflict: 409,
    RefConflict: 409,
    CorruptObject: 500,
    StorageFull: 507,
    MnemoError: 500,
}

JSON = b"application/json"
JSON_LINES = b"application/jsonl"
MSGPACK = b"application/vnd.msgpack"
"""The content type of a transfer step's body and answer (remotes over HTTP)."""


class HttpError(Exception):
    """A refusal before the library is reached: a status, a kind and a one-line message."""

    def __init__(self, status: int, kind: type[MnemoError], message: str, **headers: str) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.headers = headers


def error_kind(error: MnemoError) -> type[MnemoError]:
    """The public error class that names ``error`` in a response."""
    return next(kind for kind in KINDS if isinstance(error, kind))


def error_body(kind: type[MnemoError], message: str) -> bytes:
    """The one JSON shape of every error."""
    code = exit_code(kind(message))
    return to_json({"error": {"kind": kind.__name__, "message": message, "exit_code": code}}).encode()


def status_of(error: MnemoError) -> int:
    """The HTTP status of a library error."""
    if is_precondition(error):
        return 412
    return _STATUS[error_kind(error)]


@dataclass
class Response:
    """A response ready to send: status, headers, the body (and the rest of a stream)."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes
    rest: Iterator[Any] | None = None


async def send_response(response: Response, send: Send) -> None:
    """Send a response; a stream's rest is rendered a chunk per worker-thread hop."""
    more = response.rest is not None
    headers = response.headers
    if not more:
        headers = [*headers, (b"content-length", str(len(response.body)).encode())]
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": response.body, "more_body": more})
    rest = response.rest
    if rest is None:
        return
    try:
        while True:
            lines, done = await anyio.to_thread.run_sync(chunk, rest)
            await send({"type": "http.response.body", "body": lines, "more_body": not done})
            if done:
                return
    finally:
        close = getattr(rest, "close", None)
        if close is not None:
            close()


def chunk(items: Iterator[Any]) -> tuple[bytes, bool]:
    """The next lines of a stream, rendered, and whether it ended (an error ends it as its last line)."""
    lines: list[bytes] = []
    try:
        for item in islice(items, LINES_PER_CHUNK):
            lines.append(to_json(item).encode() + b"\n")
    except MnemoError as error:
        return b"".join(lines) + error_body(error_kind(error), one_line(error)) + b"\n", True
    return b"".join(lines), len(lines) < LINES_PER_CHUNK


def json_response(status: int, value: Any) -> Response:
    """A response carrying ``value`` in its JSON form."""
    return Response(
        status, [(b"content-type", JSON), (b"cache-control", b"no-store")], to_json(value).encode()
    )


def error_response(
    status: int, kind: type[MnemoError], message: str, headers: dict[str, str] | None = None
) -> Response:
    """A response carrying one error in the one JSON shape."""
    extra = [(key.encode(), value.encode()) for key, value in (headers or {}).items()]
    return Response(
        status, [(b"content-type", JSON), (b"cache-control", b"no-store"), *extra], error_body(kind, message)
    )

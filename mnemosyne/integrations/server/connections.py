"""The connections of ``mnemo serve``: uvicorn's HTTP protocol, held within bounds.

uvicorn (with httptools) bounds neither a request's header size nor the time a
client takes to send its headers or body, and a connection that never sends a
byte stays open for ever; its ``limit_concurrency`` answers 503 but keeps every
connection open. So each connection is a :class:`Guard` around uvicorn's own
protocol: it feeds the parser no more header bytes than
:attr:`Limits.header_bytes` (431 beyond), answers 408 to headers or a body not
done in time, and :class:`Connections` keeps the number open under the cap,
a new connection taking the place of the oldest one that is not being answered
(idle, or still sending its headers), else answered 503. Every refusal is the one
JSON error form, then the connection closes. Imported by ``mnemo serve`` only:
it needs uvicorn and httptools (the ``serve`` extra).
"""

from __future__ import annotations

import asyncio
import http
from collections.abc import Callable
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from mnemosyne import InvalidInput, MnemoError
from mnemosyne.integrations.server.limits import Limits
from mnemosyne.integrations.server.responses import error_body


def refusal(status: int, kind: type[MnemoError], message: str, *extra: tuple[str, str]) -> bytes:
    """A whole HTTP/1.1 answer in the one JSON error form, closing the connection."""
    body = error_body(kind, message)
    head = [f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}"]
    head += ["content-type: application/json", f"content-length: {len(body)}", "connection: close"]
    head += [f"{name}: {value}" for name, value in extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


class Connections:
    """The open connections of one server, oldest first, and what they may hold.

    Args:
        limits: the bounds.
        log: where a line per refused connection or request goes (the access log), or None.
    """

    def __init__(self, limits: Limits, log: Callable[[str], None] | None = None) -> None:
        self.limits = limits
        self.cap = limits.connection_cap()
        self.log = log
        self.open: dict[Guard, None] = {}  # insertion order: oldest first

    def protocol(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> Guard:
        """A new connection's protocol (what uvicorn calls ``http_protocol_class``)."""
        inner = HttpToolsProtocol(config=config, server_state=server_state, app_state=app_state, _loop=_loop)
        return Guard(self, inner)

    def admit(self, guard: Guard) -> bool:
        """Whether ``guard`` may stay open: under the cap, or in the place of an idle connection."""
        if len(self.open) >= self.cap:
            victim = next((other for other in self.open if not other.busy()), None)
            if victim is None:
                return False
            del self.open[victim]  # now, not when its connection is lost: the next one counts it gone
            victim.close()
        self.open[guard] = None
        return True

    def left(self, guard: Guard) -> None:
        """``guard``'s connection is closed."""
        self.open.pop(guard, None)


class Guard(asyncio.Protocol):
    """One connection: uvicorn's protocol, fed within the bounds (see the module).

    Args:
        connections: the server's connections.
        inner: uvicorn's protocol for this connection, which parses and runs the requests.
    """

    def __init__(self, connections: Connections, inner: HttpToolsProtocol) -> None:
        self.connections = connections
        self.limits = connections.limits
        self.inner = inner
        # A request that is not HTTP/1.1 gets the one JSON error form, not uvicorn's text.
        setattr(inner, "send_400_response", self._malformed)  # noqa: B010
        self.transport: asyncio.Transport | None = None
        self.loop = inner.loop
        self.admitted = False
        self.header_seen = 0
        self.header_timer: asyncio.TimerHandle | None = None
        self.body_timer: asyncio.TimerHandle | None = None
        self.peer = "-"

    # -- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # noqa: D102
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else "-"
        if not self.connections.admit(self):
            self._refuse(
                503,
                MnemoError,
                f"the server has {self.connections.cap:,} connections open, each being answered: try again",
                ("retry-after", "1"),
            )
            return
        self.admitted = True
        self.inner.connection_made(transport)
        self.header_timer = self.loop.call_later(self.limits.header_timeout, self._headers_late)

    def connection_lost(self, exc: Exception | None) -> None:  # noqa: D102
        self._cancel_timers()
        self.connections.left(self)
        if self.admitted:
            self.inner.connection_lost(exc)

    def eof_received(self) -> bool | None:  # noqa: D102
        if self.admitted:
            self.inner.eof_received()
        return None  # the transport closes itself: a half-closed client gets no more answers

    def pause_writing(self) -> None:  # noqa: D102
        if self.admitted:
            self.inner.pause_writing()

    def resume_writing(self) -> None:  # noqa: D102
        if self.admitted:
            self.inner.resume_writing()

    def data_received(self, data: bytes) -> None:  # noqa: D102
        if not self.admitted or self.transport is None or self.transport.is_closing():
            return
        if self._in_body():
            self._feed(data)
            return
        if self.header_timer is None and not self.busy():
            self.header_timer = self.loop.call_later(self.limits.header_timeout, self._headers_late)
        room = self.limits.header_bytes - self.header_seen
        if len(data) <= room:
            self.header_seen += len(data)
            self._feed(data)
            return
        # Only as many bytes as the headers may still take: uvicorn keeps what it parses.
        began = self.inner.cycle
        self.header_seen += room
        self._feed(data[:room])
        if self.inner.cycle is not began and self.transport is not None and not self.transport.is_closing():
            self.data_received(data[room:])  # the headers ended within: the rest is body or the next request
            return
        self._refuse(
            431,
            InvalidInput,
            f"the request's line and headers are larger than this server takes "
            f"({self.limits.header_bytes:,} bytes)",
        )

    # -- state -----------------------------------------------------------------------------

    def busy(self) -> bool:
        """Whether a request of this connection is being answered (its headers are in)."""
        cycle = self.inner.cycle if self.admitted else None
        return cycle is not None and not cycle.response_complete

    def close(self) -> None:
        """Close the connection (at the cap, to make room for a new one)."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def _in_body(self) -> bool:
        cycle = self.inner.cycle
        return cycle is not None and cycle.more_body

    def _feed(self, data: bytes) -> None:
        began = self.inner.cycle
        self.inner.data_received(data)
        cycle = self.inner.cycle
        if cycle is not began:  # a request's headers are in: its body (if any) has a deadline now
            self.header_seen = 0
            if self.header_timer is not None:
                self.header_timer.cancel()
                self.header_timer = None
            if cycle.more_body and self.body_timer is None:
                self.body_timer = self.loop.call_later(self.limits.body_timeout, self._body_late)
        if self.body_timer is not None and (cycle is None or not cycle.more_body):
            self.body_timer.cancel()
            self.body_timer = None

    def _cancel_timers(self) -> None:
        for timer in (self.header_timer, self.body_timer):
            if timer is not None:
                timer.cancel()
        self.header_timer = self.body_timer = None

    # -- refusals --------------------------------------------------------------------------

    def _headers_late(self) -> None:
        self.header_timer = None
        if self.busy() or self._in_body():
            return
        if self.header_seen == 0:
            self.close()  # opened and silent: nothing to answer
            return
        self._refuse(
            408, InvalidInput, f"the request's headers took longer than {self.limits.header_timeout:g} s"
        )

    def _body_late(self) -> None:
        self.body_timer = None
        if not self._in_body():
            return
        cycle = self.inner.cycle
        if cycle.response_started:
            self.close()  # answered already (a refused token): the rest of the body is not waited for
            return
        cycle.disconnected = True  # the application reads the end of the request; its answer is not sent
        cycle.message_event.set()
        self._refuse(408, InvalidInput, f"the request body took longer than {self.limits.body_timeout:g} s")

    def _malformed(self, message: str) -> None:
        self._refuse(400, InvalidInput, "the request is not valid HTTP/1.1")

    def _refuse(self, status: int, kind: type[MnemoError], message: str, *extra: tuple[str, str]) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        self.transport.write(refusal(status, kind, message, *extra))
        self.transport.close()
        if self.connections.log is not None:
            self.connections.log(f"{self.peer} - {status} {message}")

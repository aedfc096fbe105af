"""What a client may hold of ``mnemo serve``: connections, header bytes and count, time, requests.

The numbers live here, beside nothing that needs uvicorn: the application
(:mod:`.serving`) counts headers and each token's requests under way, the
connection guard (:mod:`.connections`) the rest. ADR 50 says why each bound is
what it is.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

FD_RESERVE = 64
"""File descriptors kept back from connections: the store's files, a PostgreSQL pool, the index files."""

BACKLOG = 128
"""The listening socket's queue, and so the most connections asyncio accepts at one wake-up,
before any of them is counted (and refused): the open-files limit must leave room for them."""


@dataclass(frozen=True)
class Limits:
    """The bounds of one served store.

    Attributes:
        max_connections: connections open at once; at the cap a new one takes the
            place of the oldest connection that is not being answered, else it is
            answered 503 (never more than the process's open-files limit allows).
        max_in_flight: requests under way at once per token (429 beyond).
        header_bytes: the most bytes a request line and its headers may take (431 beyond).
        header_count: the most header fields a request may have (431 beyond).
        header_timeout: seconds from a connection's first byte (or from its opening)
            to the end of a request's headers (408 beyond).
        body_timeout: seconds from the end of the headers to the end of the body
            (408 beyond).
        idle_timeout: seconds a kept-alive connection may wait for its next request.
    """

    max_connections: int = 1000
    max_in_flight: int = 32
    header_bytes: int = 64 * 1024
    header_count: int = 100
    header_timeout: float = 10.0
    body_timeout: float = 60.0
    idle_timeout: int = 5

    def connection_cap(self) -> int:
        """``max_connections``, lowered to what the process's open-files limit leaves room for.

        Past that limit ``accept`` fails and asyncio logs a traceback per attempt while
        every client, authenticated or not, waits: better to answer 503 in time.
        """
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY:
            return self.max_connections
        return max(1, min(self.max_connections, soft - FD_RESERVE - BACKLOG))

"""A loopback HTTP/1.1 proxy in front of one ``mnemo serve`` that breaks a connection when told to.

A transfer over HTTP interrupted at a chosen step, the same way every run: the
request reaches the server (which does its work), and the client never hears the
answer, as when a network or the client's machine fails at that moment. Only
what the remotes speak is understood: requests and answers with a
``Content-Length`` (no chunked bodies), kept alive.
"""

from __future__ import annotations

import socket
import threading
from collections import Counter
from collections.abc import Callable
from urllib.parse import urlsplit


class CuttingProxy:
    """Forwards to ``upstream``; ``cut(path, n)`` True drops the answer to the n-th request to ``path``."""

    def __init__(self, upstream: str, cut: Callable[[str, int], bool]) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.cut = cut
        self.seen: Counter[str] = Counter()
        self.cuts = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._listener.close()

    def __enter__(self) -> CuttingProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = socket.create_connection(self.upstream)
        try:
            while True:
                request = _message(client)
                if request is None:
                    return
                path = request.split(b" ", 2)[1].decode()
                upstream.sendall(request)
                answer = _message(upstream)
                if answer is None:
                    return
                with self._lock:
                    self.seen[path] += 1
                    dropped = self.cut(path, self.seen[path])
                    self.cuts += dropped
                if dropped:
                    client.shutdown(socket.SHUT_RDWR)  # the server did the work; the client never hears
                    return
                client.sendall(answer)
        except OSError:
            return
        finally:
            client.close()
            upstream.close()


def _message(sock: socket.socket) -> bytes | None:
    """One whole HTTP message (head and ``Content-Length`` body), or None at the end of the stream."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        body += chunk
    return head + b"\r\n\r\n" + body

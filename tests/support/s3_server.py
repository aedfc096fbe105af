"""A real S3-compatible server on loopback for the tests: moto's, behind a proxy that can cut it off.

moto's server answers the S3 API (conditional writes included: ``If-Match`` and
``If-None-Match: *`` on PutObject). It runs in a thread of the test process, so
what it holds outlives a cut: :class:`Severable` forwards bytes to it and, when
told, drops every connection and refuses new ones, as a network that goes away
part-way through a push; :meth:`Severable.restore` brings the bucket back.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from moto.server import ThreadedMotoServer

AWS_ENV = {
    # Credentials of the test server; no configuration file, no instance metadata (no traffic
    # beyond loopback), no proxy.
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "NO_PROXY": "127.0.0.1,localhost",
}


class Severable:
    """A loopback TCP proxy in front of ``upstream`` that can be cut off and restored."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.up = True
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def sever(self) -> None:
        """Drop every connection; refuse new ones until :meth:`restore`."""
        with self._lock:
            self.up = False
            for sock in self._open:
                _close(sock)
            self._open.clear()

    def restore(self) -> None:
        """Forward again."""
        with self._lock:
            self.up = True

    def close(self) -> None:
        self.sever()
        _close(self._listener)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if not self.up:
                    _close(client)
                    continue
                try:
                    server = socket.create_connection(self.upstream)
                except OSError:
                    _close(client)
                    continue
                self._open += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        _close(source)
        _close(sink)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


@contextmanager
def s3_server() -> Iterator[tuple[str, ThreadedMotoServer]]:
    """moto's server on a free loopback port: ``(endpoint URL, server)``."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}", server
    finally:
        server.stop()

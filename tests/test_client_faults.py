"""``mnemosyne.connect`` against servers that misbehave: only ``MnemoError`` reaches the caller.

A proxy's HTML page, a redirect, or a stream cut part-way are what a client meets
when the URL is wrong or the network fails; each must be one library error, never
an ``httpx`` or ``msgspec`` exception.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from support.components import need_module

import mnemosyne
from mnemosyne import MnemoError

need_module("httpx")

WHOAMI = {
    "id": "0123456789ab",
    "name": None,
    "tenant": "default",
    "role": "read",
    "created_at": "2026-01-01T00:00:00Z",
    "expires_at": None,
}


class Misbehaving(BaseHTTPRequestHandler):
    mode = "html"

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        if self.mode == "html":
            self._send(200, b"<html><body>Sign in to the proxy</body></html>", "text/html")
        elif self.mode == "redirect":
            self.send_response(301)
            self.send_header("Location", "https://elsewhere.example/v1/whoami")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path.startswith("/v1/whoami"):
            self._send(200, json.dumps(WHOAMI).encode(), "application/json")
        else:  # a log cut short: a promised body that ends part-way through a line
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.send_header("Content-Length", "4000")
            self.end_headers()
            self.wfile.write(b'{"id": "ab')
            self.wfile.flush()
            self.close_connection = True

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Misbehaving)
    # Polled every 10 ms, not 0.5 s: shutdown() waits for the next poll, after every test.
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def url(httpd: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{httpd.server_address[1]}"


@pytest.mark.parametrize("mode", ["html", "redirect"])
def test_an_answer_that_is_no_api_is_one_library_error(server: ThreadingHTTPServer, mode: str) -> None:
    Misbehaving.mode = mode
    with pytest.raises(MnemoError) as raised:
        mnemosyne.connect(url(server), token="mnemo_0123456789ab_x")
    assert type(raised.value).__module__.startswith("mnemosyne")
    assert "\n" not in str(raised.value)


def test_a_stream_cut_part_way_is_one_library_error(server: ThreadingHTTPServer) -> None:
    Misbehaving.mode = "cut"
    with mnemosyne.connect(url(server), token="mnemo_0123456789ab_x") as repo:
        with pytest.raises(MnemoError) as raised:
            list(repo.log())
    assert type(raised.value).__module__.startswith("mnemosyne")

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
from typing import ClassVar

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


class Busy(BaseHTTPRequestHandler):
    """Answers 429 (or 503) with Retry-After to the first ``busy`` requests, cuts GETs while ``cuts`` last."""

    busy = 0
    cuts = 0
    status = 429
    seen: ClassVar[list[str]] = []

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self.seen.append(f"GET {self.path.split('?')[0]}")
        if type(self).cuts > 0:  # the connection drops before any answer
            type(self).cuts -= 1
            self.close_connection = True
            return
        if type(self).busy > 0:
            type(self).busy -= 1
            self.send_response(self.status)
            self.send_header("Retry-After", "0")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps(WHOAMI).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # a write whose connection drops: it may have been made
        self.seen.append(f"POST {self.path.split('?')[0]}")
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.close_connection = True


@pytest.fixture
def busy() -> Iterator[ThreadingHTTPServer]:
    Busy.busy, Busy.cuts, Busy.status, Busy.seen = 0, 0, 429, []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Busy)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("status", [429, 503])
def test_a_busy_answer_with_retry_after_is_sent_again(busy: ThreadingHTTPServer, status: int) -> None:
    Busy.busy, Busy.status = 2, status
    with mnemosyne.connect(url(busy), token="mnemo_0123456789ab_x") as repo:
        assert repo.tenant == "default"
    assert Busy.seen == ["GET /v1/whoami"] * 3  # twice refused, then answered


def test_a_server_busy_past_the_retries_is_one_library_error(busy: ThreadingHTTPServer) -> None:
    Busy.busy = 100
    with pytest.raises(MnemoError):
        mnemosyne.connect(url(busy), token="mnemo_0123456789ab_x")
    assert len(Busy.seen) == 4  # the request and three retries, no more


def test_a_read_cut_before_its_answer_is_sent_again_and_a_write_never(busy: ThreadingHTTPServer) -> None:
    Busy.cuts = 1
    with mnemosyne.connect(url(busy), token="mnemo_0123456789ab_x") as repo:
        assert Busy.seen == ["GET /v1/whoami"] * 2
        with pytest.raises(MnemoError) as raised:
            repo.commit([mnemosyne.Node(id="a", content="x")])
    assert type(raised.value).__module__.startswith("mnemosyne")
    assert [line for line in Busy.seen if line.startswith("POST")] == ["POST /v1/tenants/default/commits"]

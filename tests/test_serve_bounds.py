"""``mnemo serve`` against hostile clients: every bound, against a real server process, over raw sockets.

Header size and count (431), the time to send headers or a body (408), an idle
kept-alive connection, connections at the cap (the oldest idle one makes room;
503 when every one is being answered), requests under way per token (429), a
request that is not HTTP (400), each answered in the one JSON error form; the
access log (a line per request, never a token); a server under a low open-files
limit that idle connections cannot starve.
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from support.components import need_module
from support.served import Served, tokens

from mnemosyne import Store

need_module("uvicorn")
need_module("httpx")

pytestmark = pytest.mark.slow  # server processes, and timeouts waited out

CAP = 8
TIMEOUT = 0.5  # the header and body timeouts of the server here
IDLE = 1  # its keep-alive timeout


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    path = tmp_path_factory.mktemp("bounded") / "store"
    Store.init(path).close()
    made = tokens(path, ("one", "default", "read"), ("two", "default", "read"))
    server = Served(
        path,
        "--access-log",
        "--max-connections",
        str(CAP),
        "--max-in-flight",
        "2",
        "--header-timeout",
        str(TIMEOUT),
        "--body-timeout",
        str(TIMEOUT),
        "--idle-timeout",
        str(IDLE),
    )
    server.tokens = made  # type: ignore[attr-defined]
    yield server
    assert server.stop() == 0, server.stderr
    assert "Traceback" not in server.stderr
    for text in made.values():
        assert text not in server.stderr  # the access log names no token


def connect(served: Served) -> socket.socket:
    parts = urlsplit(served.url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
    return sock


def request(path: str, token: str | None = None, *extra: bytes, method: bytes = b"GET") -> bytes:
    lines = [method + b" " + path.encode() + b" HTTP/1.1", b"Host: test"]
    if token is not None:
        lines.append(b"Authorization: Bearer " + token.encode())
    return b"\r\n".join([*lines, *extra]) + b"\r\n\r\n"


def answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One whole answer: its status, headers and body (read to its Content-Length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        got = sock.recv(65536)
        if not got:
            raise AssertionError(f"the connection closed before an answer: {data!r}")
        data += got
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *fields = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (f.partition(":") for f in fields)}
    while len(body) < int(headers.get("content-length", "0")):
        body += sock.recv(65536)
    return int(status_line.split()[1]), headers, body


def refused(sock: socket.socket, status: int, kind: str, code: int) -> str:
    """The message of an answer in the one JSON error form, after which the server closes."""
    got, headers, body = answer(sock)
    assert got == status, body
    assert headers["content-type"] == "application/json"
    error = json.loads(body)["error"]
    assert (error["kind"], error["exit_code"]) == (kind, code), error
    return str(error["message"])


def closed(sock: socket.socket, within: float) -> bool:
    """Whether the server closes ``sock`` within ``within`` seconds (nothing else sent)."""
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_headers_past_64_kib_are_refused_and_not_kept(served) -> None:
    before = rss_kib(served.process.pid)
    for _ in range(4):  # each would be 16 MB of one header, never finished
        with connect(served) as sock:
            sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: test\r\nX-Junk: ")
            try:
                for _ in range(256):
                    sock.sendall(b"j" * 65536)
            except (BrokenPipeError, ConnectionResetError):
                pass  # refused and closed part-way, as it should
            message = refused(sock, 431, "InvalidInput", 2)
            assert "65,536 bytes" in message
    assert rss_kib(served.process.pid) - before < 32 * 1024  # the 64 MB sent were not kept
    with connect(served) as sock:  # just under the bound: answered
        sock.sendall(request("/v1/health", None, b"X-Fill: " + b"f" * 60_000))
        assert answer(sock)[0] == 200


def test_more_than_100_header_fields_are_refused(served) -> None:
    fields = [b"X-F%d: v" % i for i in range(100)]
    with connect(served) as sock:
        sock.sendall(request("/v1/health", None, *fields[:99]))  # 99 and Host: 100
        assert answer(sock)[0] == 200
        sock.sendall(request("/v1/health", None, *fields[:100]))  # and Host: 101
        assert "101 header fields" in refused(sock, 431, "InvalidInput", 2)


def test_headers_and_bodies_sent_too_slowly_are_refused_in_time(served) -> None:
    with connect(served) as sock:
        sock.sendall(b"GET /v1/health HTTP/1.1\r\nHo")
        started = time.monotonic()
        assert "headers took longer" in refused(sock, 408, "InvalidInput", 2)
        assert time.monotonic() - started < TIMEOUT + 3
        assert closed(sock, 3)
    with connect(served) as sock:  # a small body (read before the token is checked), never finished
        sock.sendall(
            request("/v1/tenants/default/search", None, b"Content-Length: 50", method=b"POST") + b"{"
        )
        started = time.monotonic()
        assert "body took longer" in refused(sock, 408, "InvalidInput", 2)
        assert time.monotonic() - started < TIMEOUT + 3
    with connect(served) as sock:  # opened, silent: closed, nothing to answer
        assert closed(sock, TIMEOUT + 3)


def test_a_kept_alive_connection_closes_once_idle(served) -> None:
    with connect(served) as sock:
        sock.sendall(request("/v1/health"))
        assert answer(sock)[0] == 200
        sock.sendall(request("/v1/health"))  # kept alive
        assert answer(sock)[0] == 200
        started = time.monotonic()
        assert closed(sock, IDLE + 3)
        assert time.monotonic() - started >= IDLE - 0.2


def test_at_the_cap_idle_connections_make_room_and_busy_ones_get_503(served) -> None:
    token = served.tokens["one"]
    idle = [connect(served) for _ in range(3 * CAP)]  # three times the cap, each silent
    try:
        with connect(served) as sock:  # an agent still gets in
            sock.sendall(request("/v1/tenants/default/log", token))
            assert answer(sock)[0] == 200
        assert sum(closed(sock, 0.2) for sock in idle[: 2 * CAP]) == 2 * CAP  # the oldest made room
    finally:
        for sock in idle:
            sock.close()
    busy = [connect(served) for _ in range(CAP)]
    try:
        for sock in busy:  # every connection is being answered: a body under way, without a token
            sock.sendall(request("/v1/tenants/default/search", None, b"Content-Length: 50", method=b"POST"))
        time.sleep(0.1)
        with connect(served) as sock:
            message = refused(sock, 503, "MnemoError", 1)
            assert f"{CAP} connections" in message
    finally:
        for sock in busy:
            sock.close()


def test_a_token_has_two_requests_under_way_at_most_here(served) -> None:
    one, two = served.tokens["one"], served.tokens["two"]
    slow = request("/v1/tenants/default/search", one, b"Content-Length: 50", method=b"POST")
    under_way = [connect(served) for _ in range(2)]
    try:
        for sock in under_way:
            sock.sendall(slow + b'{"query": ')
        time.sleep(0.1)
        with connect(served) as sock:
            sock.sendall(slow)
            status, headers, body = answer(sock)
            assert (status, headers["retry-after"]) == (429, "1"), body
            assert json.loads(body)["error"]["kind"] == "MnemoError"
        with connect(served) as sock:  # another token is not held back
            sock.sendall(request("/v1/tenants/default/log", two))
            assert answer(sock)[0] == 200
    finally:
        for sock in under_way:
            sock.close()
    time.sleep(0.1)
    with connect(served) as sock:  # its requests done, the token is served again
        sock.sendall(request("/v1/tenants/default/log", one))
        assert answer(sock)[0] == 200


def test_what_is_not_http_gets_the_json_error_form(served) -> None:
    for junk in (b"GARBAGE\r\n\r\n", b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n"):
        with connect(served) as sock:
            sock.sendall(junk)
            assert "not valid HTTP" in refused(sock, 400, "InvalidInput", 2)


def test_the_access_log_has_a_line_per_request_and_no_token(served) -> None:
    token = served.tokens["two"]
    marker = f"/v1/tenants/default/nodes/log-{time.monotonic_ns()}"
    with served.client(token) as http:
        assert http.get(marker).status_code == 404
        assert http.get(marker + "/b", params={"at": "main"}).status_code == 404
        assert http.get("/v1/health").status_code == 200
    deadline = time.monotonic() + 5
    pattern = re.compile(r'^127\.0\.0\.1:\d+ - "GET (\S+)" (\d{3}) \d+\.\d\dms$')
    while time.monotonic() < deadline:
        lines = [found.groups() for line in served.lines if (found := pattern.match(line.rstrip("\n")))]
        if (marker, "404") in lines and (marker + "/b?at=main", "404") in lines:
            break
        time.sleep(0.05)
    assert lines.count((marker, "404")) == 1 and lines.count((marker + "/b?at=main", "404")) == 1, lines
    # A token is mnemo_<id>_<secret>, and the secret may itself hold "_": split twice only.
    assert token not in served.stderr and token.split("_", 2)[2] not in served.stderr


def test_idle_connections_past_the_open_files_limit_do_not_starve_agents(tmp_path) -> None:
    path = tmp_path / "store"
    Store.init(path).close()
    token = tokens(path, ("agent", "default", "read"))["agent"]
    server = Served(path, open_files=256)  # room for 64 connections (and what one accept burst takes)
    idle: list[socket.socket] = []
    try:
        for _ in range(200):  # three times the cap
            idle.append(connect(server))
        with connect(server) as sock:
            sock.sendall(request("/v1/tenants/default/log", token))
            assert answer(sock)[0] == 200
    finally:
        for sock in idle:
            sock.close()
        assert server.stop() == 0, server.stderr
    assert "Too many open files" not in server.stderr and "Traceback" not in server.stderr, server.stderr

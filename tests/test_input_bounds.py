"""Input without bounds, and ids that deceive.

Every input path reads to a bound and says so when it is passed (``mnemo commit``
from a file or stdin, an MCP message over stdio; the served API's bodies have
``--max-body``); ids holding invisible characters (format characters such as
U+200B, U+202E, U+FEFF; line separators) are refused wherever a version is
written, and what the command line shows escapes them; ``mnemo mcp`` answers a
line that is not a message instead of leaving the host waiting.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemosyne import InvalidInput, Node, Repo
from mnemosyne.model.validation import INVISIBLE, MAX_INPUT_BYTES, check_new_id, has_invisible

ENV = {**os.environ, "MNEMO_EMBEDDER": "none"}
SHOWN = ("\u200b", "\u202e", "\ufeff", "\u2028", "\u2066", "\U000e0041")
"""Invisible characters of each sort: zero-width space, right-to-left override, byte order
mark, line separator, isolate, a tag."""


def mnemo(*args: str, input: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "mnemo_cli", *args], input=input, capture_output=True, timeout=timeout, env=ENV
    )


def one_error(done: subprocess.CompletedProcess[bytes], code: int, fragment: str) -> str:
    """The one ``error:`` line of a command that failed with ``code``, as ASCII (escaped)."""
    stderr = done.stderr.decode()
    assert done.returncode == code, (done.returncode, stderr)
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], stderr
    assert "Traceback" not in stderr
    return lines[0]


# -- the invisible characters ------------------------------------------------------------


def test_the_invisible_set_is_unicodes_format_characters_and_separators() -> None:
    import re

    pattern = re.compile(f"[{INVISIBLE}]")
    for code in range(0x110000):
        char = chr(code)
        category = unicodedata.category(char)
        if category in ("Cf", "Zl", "Zp"):
            assert pattern.match(char), f"U+{code:04X} ({category}) is not in INVISIBLE"
        elif pattern.match(char):
            # Newer Unicode than this Python's: only characters unassigned here.
            assert category == "Cn", f"U+{code:04X} ({category}) is in INVISIBLE"


@given(
    before=st.text(st.characters(codec="utf-8", categories=["L", "N"]), min_size=1, max_size=8),
    after=st.text(st.characters(codec="utf-8", categories=["L", "N"]), min_size=1, max_size=8),
    hidden=st.characters(categories=["Cf", "Zl", "Zp"], exclude_characters="\ud800"),
)
def test_an_id_holding_an_invisible_character_is_refused_and_nothing_is_written(
    before: str, after: str, hidden: str
) -> None:
    node_id = f"users/{before}{hidden}{after}/lang"
    assert has_invisible(node_id)
    with Repo.in_memory() as repo:
        with pytest.raises(InvalidInput, match=f"U\\+{ord(hidden):04X}"):
            repo.commit([Node(id="ok/one", content="a"), Node(id=node_id, content="b")])
        assert list(repo.log()) == []  # the valid node beside it was not written either
        repo.commit([Node(id=f"users/{before}{after}/lang", content="b")])  # the visible id is fine
    check_new_id(f"users/{before}{after}/lang")


def test_an_id_a_store_already_holds_stays_readable_and_removable() -> None:
    # Only new versions are refused: the reading and removing paths check ids as before.
    from mnemosyne.model.validation import check_id

    assert check_id("users/mira\u200b/lang") == "users/mira\u200b/lang"
    with Repo.in_memory() as repo:
        repo.commit([Node(id="users/mira/lang", content="de")])
        assert repo.get("users/mira\u200b/lang") is None
        with pytest.raises(InvalidInput):
            repo.commit([Node(id="users/mira\u202e/lang", content="de")])


@pytest.mark.slow  # command-line processes
def test_the_command_line_refuses_such_ids_and_escapes_what_it_shows(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    assert mnemo("init", store).returncode == 0
    for hidden in SHOWN[:3]:  # the rest are checked in-process above
        node = json.dumps({"id": f"users/mira{hidden}/lang", "content": "x"}, ensure_ascii=False)
        line = one_error(mnemo("--repo", store, "commit", "-m", "m", input=node.encode()), 2, "invisible")
        assert line.isascii(), line  # the id is shown escaped, never as itself
    written = json.dumps({"id": "users/mira/lang", "content": "de \u202e nuel"}, ensure_ascii=False)
    assert mnemo("--repo", store, "commit", "-m", "m", input=written.encode()).returncode == 0
    shown = mnemo("--repo", store, "show", "users/mira/lang")
    assert shown.returncode == 0 and "de \\u202e nuel" in shown.stdout.decode()
    assert "\u202e" not in shown.stdout.decode()
    missing = mnemo("--repo", store, "show", "users/\u202egnal/arim")
    assert "\u202e" not in missing.stderr.decode() and "\\u202e" in missing.stderr.decode()


# -- bounded input on the command line ------------------------------------------------------


@pytest.mark.slow  # command-line processes
def test_commit_from_a_file_or_stdin_that_never_ends_is_refused_with_exit_2(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    assert mnemo("init", store).returncode == 0
    one_error(mnemo("--repo", store, "commit", "-m", "x", "/dev/zero"), 2, "split it into several commits")
    with open("/dev/zero", "rb") as zeros:
        endless = subprocess.run(
            [sys.executable, "-m", "mnemo_cli", "--repo", store, "commit", "-m", "x"],
            stdin=zeros,
            capture_output=True,
            timeout=60,
            env=ENV,
        )
    one_error(endless, 2, f"more than {MAX_INPUT_BYTES >> 20} MiB")
    with Repo.open(store) as repo:
        assert list(repo.log()) == []


# -- MCP over stdio: every line bounded, and answered --------------------------------------


def _lines_through(payload: bytes, limit: int) -> tuple[list[str], list[Any]]:
    """What :class:`CheckedLines` passes on from ``payload``, and the errors it answers."""
    from mnemosyne.integrations.mcp_stdio import CheckedLines  # the mcp extra: make test installs it

    class Answers:
        def __init__(self) -> None:
            self.sent: list[Any] = []

        async def send(self, message: Any) -> None:
            self.sent.append(message.message)

    read_end, write_end = os.pipe()
    passed: list[str] = []
    answers = Answers()

    async def main() -> None:
        lines = CheckedLines(read_end, limit=limit)
        lines.answer_with(answers)
        async with anyio.create_task_group() as group:

            async def feed() -> None:
                await anyio.to_thread.run_sync(_write_all, write_end, payload)

            group.start_soon(feed)
            async for line in lines:
                passed.append(line)

    try:
        anyio.run(main)
    finally:
        os.close(read_end)
    return passed, answers.sent


def _write_all(fd: int, payload: bytes) -> None:
    with os.fdopen(fd, "wb") as out:
        out.write(payload)


def test_mcp_lines_are_bounded_and_what_cannot_be_a_message_is_answered() -> None:
    ping = b'{"jsonrpc":"2.0","id":7,"method":"ping"}'
    deep = {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "get", "arguments": {}}}
    nested: Any = 1
    for _ in range(200):
        nested = [nested]
    deep["params"]["arguments"]["id"] = nested  # type: ignore[index]
    duplicate = (
        b'{"jsonrpc":"2.0","id":"d","method":"tools/call",'
        b'"params":{"name":"get","arguments":{"id":"a","id":"b"}}}'
    )
    payload = b"\n".join(
        [
            ping,
            b"x" * 5000,  # longer than the limit: skipped whole, answered
            b"not json",
            b'{"text": "\xff"}',
            json.dumps(deep).encode(),
            duplicate,
            b"",
            ping,
        ]
    )
    passed, answered = _lines_through(payload + b"\n" + b"y" * 10_000, limit=4096)  # ends inside a long line
    assert passed == [ping.decode(), ping.decode()]
    codes = [(error.id, error.error.code) for error in answered]
    assert codes == [
        (None, -32700),
        (None, -32700),
        (None, -32700),
        (8, -32600),
        ("d", -32600),
        (None, -32700),
    ]
    messages = [error.error.message for error in answered]
    assert "longer than 4,096 bytes" in messages[0] and "UTF-8" in messages[2]
    assert "nested 203 levels deep; at most 100" in messages[3] and "duplicate key 'id'" in messages[4]


@pytest.mark.slow  # a real mnemo mcp process
def test_mnemo_mcp_over_stdio_answers_every_line_and_keeps_serving(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    assert mnemo("init", store).returncode == 0
    server = subprocess.Popen(
        [sys.executable, "-m", "mnemo_cli", "--repo", store, "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    assert server.stdin is not None and server.stdout is not None

    def ask(line: bytes) -> dict[str, Any]:
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(line + b"\n")
        server.stdin.flush()
        ready, _, _ = select.select([server.stdout], [], [], 30)
        assert ready, f"no answer to {line[:60]!r}"  # the host would wait for ever
        answer: dict[str, Any] = json.loads(server.stdout.readline())
        return answer

    try:
        assert ask(b"not json")["error"]["code"] == -32700
        assert ask(b'{"a": "\xc3\x28"}')["error"]["code"] == -32700
        assert ask(b"[" * 250 + b"]" * 250)["error"]["code"] == -32600
        hello = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        assert "result" in ask(json.dumps(hello).encode())
        server.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        twice = (
            b'{"jsonrpc":"2.0","id":2,"method":"tools/call",'
            b'"params":{"name":"get","arguments":{"id":"a","id":"b"}}}'
        )
        refused = ask(twice)
        assert (
            refused["id"] == 2
            and refused["error"]["code"] == -32600
            and "duplicate key" in refused["error"]["message"]
        )
        remember = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {
                "name": "remember",
                "arguments": {"message": "m", "nodes": [{"id": "users/mira\u200b/lang", "content": "de"}]},
            },
        }
        result = ask(json.dumps(remember).encode())["result"]
        assert result["isError"] and "U+200B" in result["content"][0]["text"]
        assert ask(b'{"jsonrpc":"2.0","id":4,"method":"ping"}') == {"jsonrpc": "2.0", "id": 4, "result": {}}
    finally:
        server.stdin.close()
        assert server.wait(timeout=30) == 0
        assert b"Traceback" not in (server.stderr.read() if server.stderr else b"")


# -- the served API ------------------------------------------------------------------------


@pytest.mark.slow  # a real mnemo serve process
def test_the_served_api_refuses_such_ids(tmp_path: Path) -> None:
    from support.served import Served, tokens

    path = tmp_path / "served"
    with Repo.init(path):
        pass
    made = tokens(path, ("writer", "default", "write"))
    server = Served(path)
    try:
        with server.client(made["writer"]) as http:
            answer = http.post(
                "/v1/tenants/default/commits", json={"put": [{"id": "users/\u202egnal/arim", "content": "x"}]}
            )
            assert answer.status_code == 400, answer.text
            error = answer.json()["error"]
            assert error["kind"] == "InvalidInput" and "U+202E" in error["message"]
            fine = http.post(
                "/v1/tenants/default/commits", json={"put": [{"id": "users/mira/lang", "content": "x"}]}
            )
            assert fine.status_code == 201, fine.text
    finally:
        assert server.stop() == 0, server.stderr

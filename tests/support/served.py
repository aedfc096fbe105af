"""``mnemo serve`` as a real process on a free loopback port, driven over HTTP from the test process."""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from mnemosyne import Store

STARTED = re.compile(r"^serving .* on (http://\S+)/v1 ")
TIMEOUT = 30.0
"""Seconds a server may take to start or to stop."""


class Served:
    """One ``mnemo serve`` process over the store at ``path``; its stderr is kept as it comes."""

    def __init__(
        self, path: Path, *args: str, env: dict[str, str] | None = None, open_files: int | None = None
    ) -> None:
        self.path = path

        def limited() -> None:  # in the child: its open-files limit, as `ulimit -n` would set it
            if open_files is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))

        self.process = subprocess.Popen(
            [sys.executable, "-m", "mnemo_cli", "--repo", str(path), "serve", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "MNEMO_EMBEDDER": "none", **(env or {})},
            preexec_fn=limited if open_files is not None else None,
        )
        assert self.process.stderr is not None
        self.lines: list[str] = []
        deadline = time.monotonic() + TIMEOUT
        url = None
        while url is None and time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line:
                break
            self.lines.append(line)
            found = STARTED.match(line)
            url = found.group(1) if found else None
        if url is None:
            self.process.kill()
            raise AssertionError(
                f"mnemo serve did not start: {''.join(self.lines)}{self.process.stderr.read()}"
            )
        self.url = url
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self.lines)

    def client(self, token: str | None = None, **kwargs: Any) -> httpx.Client:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=TIMEOUT, **kwargs)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Stop the server with ``sig``; its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        code = self.process.wait(timeout=TIMEOUT)
        self._reader.join(timeout=TIMEOUT)
        return code


def tokens(path: Path, *specs: tuple[str, str, str]) -> dict[str, str]:
    """Tokens made in the store at ``path``: ``{name: text}`` for each ``(name, tenant, role)``."""
    with Store.open(path) as store:
        return {name: store.create_token(tenant, role, name=name).token for name, tenant, role in specs}  # type: ignore[arg-type]

"""The MCP SDK is imported at the first request to /mcp, not when a server starts."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mnemosyne import Repo, Store
from mnemosyne.integrations.server.serving import McpOnDemand, build_app

BUILT = """
import sys
from mnemosyne import Store
from mnemosyne.integrations.server.serving import build_app
app = build_app(Store.open(sys.argv[1]))
assert app.mcp is not None
print(sorted(name for name in sys.modules if name == "mcp" or name.startswith("mcp.")))
"""


def test_a_server_starts_without_the_mcp_sdk(tmp_path: Path) -> None:
    Repo.init(tmp_path / "store").close()
    done = subprocess.run(
        [sys.executable, "-c", BUILT, str(tmp_path / "store")], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_an_sdk_that_does_not_load_is_a_404_that_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Repo.init(tmp_path / "store").close()
    app = build_app(Store.open(tmp_path / "store"))
    assert isinstance(app.mcp, McpOnDemand)

    tries: list[int] = []

    def broken(self: McpOnDemand) -> Any:
        tries.append(1)
        raise ImportError("No module named 'pydantic_settings'")

    monkeypatch.setattr(McpOnDemand, "_built", broken)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    for _ in range(2):  # the second is refused without trying again
        sent.clear()
        scope = {"type": "http", "method": "POST", "path": "/mcp", "raw_path": b"/mcp", "headers": []}
        asyncio.run(app(scope, receive, send))
        assert sent[0]["status"] == 404
        error = json.loads(sent[1]["body"])
        assert "pydantic_settings" in error["error"]["message"] and "'mcp' extra" in error["error"]["message"]
    assert len(tries) == 1
    app.close()

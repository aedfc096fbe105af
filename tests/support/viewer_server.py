"""``mnemo ui`` as a real process, and Debian's Chromium, for the viewer's browser tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from support.components import need_module, unavailable


def serve(path: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    """Start ``mnemo ui`` on the store at ``path``; the process and the address it printed."""
    env = {**os.environ, "MNEMO_EMBEDDER": "none"}
    process = subprocess.Popen(
        [sys.executable, "-m", "mnemo_cli", "--repo", str(path), "ui", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    return process, url


def chromium() -> Iterator[Any]:
    """One headless Chromium (a generator for a fixture); missing, the tests skip (fail under CI)."""
    playwright_api: Any = need_module("playwright.sync_api")
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    manager = playwright_api.sync_playwright().start()
    try:
        if found is None:
            raise RuntimeError("no chromium on PATH")
        launched = manager.chromium.launch(executable_path=found, args=["--no-sandbox", "--disable-gpu"])
    except Exception as error:
        manager.stop()
        unavailable(f"Chromium cannot start for the browser tests: {error}")
    try:
        yield launched
    finally:
        launched.close()
        manager.stop()

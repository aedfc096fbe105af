"""Screenshots of ``mnemo ui`` for the README and docs/viewer.md, taken in Chromium on the demo's store.

Run once, by hand, after changing how the viewer looks:

    .venv/bin/python examples/viewer_screenshots.py [--out docs/img]

It builds the demo's story (``examples/demo.py``) in a temporary directory, adds
the passport-deadline claims of docs/time-and-claims.md (tenant ``acme``), serves it with ``mnemo
ui`` and saves the log, a commit, a memory and the facts chart as PNG files.
Needs the ``ui`` and ``test`` extras and Debian's Chromium (``/usr/bin/chromium``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import demo
from playwright.sync_api import sync_playwright

from mnemosyne import Claim, Node, Provenance, Repo, Store


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def passport_claims(path: Path) -> None:
    """The valid-time story of docs/time-and-claims.md: e1, then e2 replacing it, then the late letter e0."""
    clock = demo.SimulatedClock()
    with Repo.open(path, tenant="acme", create=True, clock=clock) as repo:
        for when, event, value, valid_from, source, message in [
            ("2026-06-01T09:30", "e1", "2026-07-15", "2026-06-01T09:00", "chat", "e1: Mira says July 15"),
            ("2026-06-03T10:30", "e2", "2026-06-30", "2026-06-03T10:00", "consulate", "e2: moved to June 30"),
            ("2026-06-05T12:00", "e0", "2026-08-01", "2026-05-30T08:00", "letter", "e0: a late letter"),
        ]:
            clock.now = _at(when)
            claim = Claim("mira", "passport_deadline", value, valid_from=_at(valid_from))
            node = Node(
                id=f"acme/mira/passport_deadline/{event}",
                kind="claim",
                content=claim,
                provenance=Provenance(observation=event, source=source),
            )
            repo.commit(put=[node], message=message, author="agent-7")


def main() -> None:
    """Build the store, serve it, take the pictures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "docs" / "img")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "demo.mnemo"
        demo.STORE = store
        demo.remember(demo.SimulatedClock())
        passport_claims(store)
        with Store.open(store) as opened:
            opened.config("embedder", "none")
        server = subprocess.Popen(
            [sys.executable, "-m", "mnemo_cli", "--repo", str(store), "ui"],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "MNEMO_EMBEDDER": "none"},
        )
        assert server.stdout is not None
        base = server.stdout.readline().strip().rstrip("/")
        shots = {
            "ui-log.png": "/?branch=what-if",
            "ui-commit.png": "/commit/main~2",
            "ui-memory.png": "/node/users/mira/notes/trip",
            "ui-facts.png": "/facts/mira/passport_deadline?tenant=acme",
        }
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=shutil.which("chromium"), args=["--no-sandbox", "--disable-gpu"]
                )
                page = browser.new_page(viewport={"width": 1100, "height": 700})
                for name, path in shots.items():
                    page.goto(base + path)
                    page.screenshot(path=str(args.out / name), full_page=True)
                    print(args.out / name)
                browser.close()
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=30)


if __name__ == "__main__":
    main()

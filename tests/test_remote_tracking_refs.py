"""Remote-tracking refs are shown: ``mnemo branch -r`` and ``-a`` list them, the viewer reads them.

A fetch brings ``origin/BRANCH`` refs that ``mnemo log origin/main`` reads; they
were nowhere listed, and the viewer answered ``?branch=origin/main`` with 404.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.components import unavailable

from mnemosyne import Node, Repo

try:
    from starlette.testclient import TestClient

    from mnemosyne.integrations.viewer import build_app
except ImportError as missing:
    unavailable(f"the 'ui' extra is not installed ({missing})", module_level=True)

PORT = 8765
BASE = f"http://127.0.0.1:{PORT}"


@pytest.fixture
def cloned(tmp_path: Path) -> Path:
    """A clone of a store with branches main and side, then a local commit on main."""
    with Repo.init(tmp_path / "hub") as hub:
        hub.commit([Node(id="notes/hub", content="from the hub")], message="hub writes")
        hub.branch("side")
        hub.commit([Node(id="notes/side", content="only on side")], message="side writes", branch="side")
    with Repo.clone(tmp_path / "hub", tmp_path / "mine") as mine:
        mine.commit([Node(id="notes/mine", content="only here")], message="local writes")
    return tmp_path / "mine"


@pytest.mark.slow  # command-line processes
def test_branch_lists_remote_tracking_refs_with_r_and_everything_with_a(cloned: Path) -> None:
    def mnemo(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mnemo_cli", "--repo", str(cloned), *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "MNEMO_EMBEDDER": "none"},
        )

    remote = mnemo("branch", "-r")
    assert remote.returncode == 0, remote.stderr
    assert [line.split()[0] for line in remote.stdout.splitlines()] == ["origin/main", "origin/side"]
    both = mnemo("branch", "-a")
    assert [line[2:].split()[0] for line in both.stdout.splitlines()] == [
        "main",
        "remotes/origin/main",
        "remotes/origin/side",
    ]
    assert both.stdout.startswith("* main ") and "side writes" in both.stdout
    rows = [json.loads(line) for line in mnemo("--json", "branch", "--all").stdout.splitlines()]
    assert [(row["name"], row["current"], row["remote"]) for row in rows] == [
        ("main", True, False),
        ("origin/main", False, True),
        ("origin/side", False, True),
    ]
    plain = mnemo("branch")
    assert [line[2:].split()[0] for line in plain.stdout.splitlines()] == ["main"]  # as before
    refused = mnemo("branch", "-r", "new")
    assert refused.returncode == 2 and refused.stderr.startswith("error: ") and refused.stdout == ""


def test_the_viewer_reads_a_remote_tracking_ref_as_a_branch(cloned: Path) -> None:
    with Repo.open(cloned) as repo:
        web = TestClient(build_app(repo, port=PORT), base_url=BASE)
        side = web.get("/?branch=origin/side")
        assert side.status_code == 200, side.text
        assert "side writes" in side.text and "local writes" not in side.text
        main = web.get("/", params={"branch": "origin/main"}).text
        assert "hub writes" in main and "local writes" not in main and "side writes" not in main
        assert "origin/side" in web.get("/").text  # the switcher offers them
        assert web.get("/?branch=origin/nope").status_code == 404

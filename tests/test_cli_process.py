"""``mnemo`` as a real process: ``python -m mnemo_cli`` and the installed script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.components import unavailable

pytestmark = pytest.mark.slow  # each test starts mnemo as a process of its own

SCRIPT = Path(sys.executable).with_name("mnemo")


def mnemo(
    *args: str, cwd: Path, input: str | None = None, script: bool = False
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MNEMO_DIR", "MNEMO_AUTHOR")}
    command = [str(SCRIPT)] if script else [sys.executable, "-m", "mnemo_cli"]
    return subprocess.run(
        [*command, *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_a_session_in_a_real_process(tmp_path: Path) -> None:
    assert mnemo("init", cwd=tmp_path).returncode == 0
    assert (tmp_path / ".mnemo" / "data.mdb").is_file()
    empty = mnemo("log", cwd=tmp_path)
    assert (empty.returncode, empty.stdout, empty.stderr) == (0, "", "")
    nodes = '{"id": "users/mira/lang", "content": "de"}\n{"content": "generated"}\n'
    done = mnemo("--json", "commit", "-m", "learned", "--author", "agent-7", "-", cwd=tmp_path, input=nodes)
    assert done.returncode == 0, done.stderr
    written = json.loads(done.stdout)
    assert written["put_ids"][0] == "users/mira/lang" and len(written["put_ids"]) == 2
    assert (written["deleted_ids"], written["created"]) == ([], True)
    log = mnemo("--json", "log", cwd=tmp_path)
    (entry,) = [json.loads(line) for line in log.stdout.splitlines()]
    assert (entry["id"], entry["author"], entry["message"]) == (written["id"], "agent-7", "learned")
    assert {key: written[key] for key in entry} == entry  # the commit result is the commit, and more
    same = mnemo("commit", "-m", "again", cwd=tmp_path, input=nodes.splitlines()[0])
    assert (same.returncode, same.stderr) == (0, "")
    assert same.stdout == f"nothing to commit: branch main is unchanged at {written['id'][:7]}\n"


def test_errors_in_a_real_process_are_one_line(tmp_path: Path) -> None:
    assert mnemo("init", cwd=tmp_path).returncode == 0
    missing = mnemo("show", "nobody/here", cwd=tmp_path)
    assert missing.returncode == 3
    assert missing.stderr == "error: nobody/here is not in HEAD\n"
    bad = mnemo("commit", "-m", "x", cwd=tmp_path, input='{"id": "a", "content": [1,}')
    assert bad.returncode == 2
    assert bad.stderr == "error: stdin: invalid JSON at line 1, column 27: Expecting value\n"


def test_the_installed_script(tmp_path: Path) -> None:
    if not SCRIPT.exists():
        unavailable("the mnemo script is not installed next to this Python")
    result = mnemo("--repo", str(tmp_path / "nowhere"), "log", cwd=tmp_path, script=True)
    assert result.returncode == 3
    assert result.stderr.startswith("error: no store at ")
    assert "Traceback" not in result.stderr

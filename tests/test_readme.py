"""The README's examples run as written, and `make demo`'s script runs on a fresh store.

Every ```python block is executed, with ``default_embedder()`` returning the small
deterministic ``HashEmbedder(384)`` instead of the MiniLM model (as the README says),
so recall examples need no model and give the same hits on every machine. Every
```console block is a shell session:
``$ `` lines are run one after another with bash in a fresh directory (``MNEMO_DIR``
unset, this interpreter's ``bin`` first on ``PATH``) and must exit 0, or the code
written after them as ``# exit N``. The other lines of the block are expected
output of the command above them, matched in order against the lines it printed
(stdout, then stderr, as a terminal would show them):

- a line that is JSON matches a JSON line of output with the same keys and equal
  values (in any order), where the string ``"..."`` matches any value; an object
  that holds the key ``"..."`` marks a cut: the output may have more keys, so a
  sample never drops fields without saying so;
- any other line must equal an output line, with ``...`` matching any text.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mnemosyne.recall import embedders

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DEMO = ROOT / "examples" / "demo.py"

_FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_EXIT = re.compile(r"\s+#\s*exit\s+(\d+)\s*$")
_WILDCARD = "..."
README_EMBEDDER_DIM = 384
"""Dimensions of the ``HashEmbedder`` that stands in for the default embedder."""


def _blocks(language: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    return [m.group(2) for m in _FENCE.finditer(text) if m.group(1) == language]


@dataclass
class Step:
    command: str
    exit_code: int = 0
    expected: list[str] = field(default_factory=list)


def parse_session(block: str) -> list[Step]:
    """Split a console block into commands, their expected exit codes and output."""
    steps: list[Step] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            command = line[2:]
            code = 0
            found = _EXIT.search(command)
            if found:
                code = int(found.group(1))
                command = command[: found.start()]
            steps.append(Step(command.strip(), code))
        elif line.strip():
            assert steps, f"output line before any command: {line!r}"
            steps[-1].expected.append(line.rstrip())
    return steps


def json_matches(expected: Any, actual: Any) -> bool:
    """Whether ``actual`` has everything ``expected`` has; ``"..."`` matches anything."""
    if expected == _WILDCARD:
        return True
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return False
        shown = {key: value for key, value in expected.items() if key != _WILDCARD}
        if _WILDCARD not in expected and shown.keys() != actual.keys():
            return False  # every field is shown, or the cut is marked
        return all(key in actual and json_matches(value, actual[key]) for key, value in shown.items())
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(json_matches(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return type(expected) is type(actual) and expected == actual


def line_matches(expected: str, actual: str) -> bool:
    """Whether one output line matches one expected line (see the module docstring)."""
    if expected.lstrip().startswith(("{", "[")):
        try:
            want = json.loads(expected)
        except json.JSONDecodeError:
            pass
        else:
            try:
                got = json.loads(actual)
            except json.JSONDecodeError:
                return False
            return json_matches(want, got)
    pattern = ".*".join(re.escape(part) for part in expected.strip().split(_WILDCARD))
    return re.fullmatch(pattern, actual.strip()) is not None


def unmatched(expected: list[str], output: str) -> list[str]:
    """The expected lines not found, in order, among the output's lines."""
    lines = output.splitlines()
    missing = []
    position = 0
    for want in expected:
        for index in range(position, len(lines)):
            if line_matches(want, lines[index]):
                position = index + 1
                break
        else:
            missing.append(want)
    return missing


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("MNEMO_DIR", None)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NO_COLOR"] = "1"
    env["COLUMNS"] = "200"
    return env


# -- the checker checks what it should ---------------------------------------------


def test_session_parsing_reads_commands_exit_codes_and_output():
    steps = parse_session("$ mnemo init\n\n$ mnemo show x   # exit 3\nline one\n")
    assert [(s.command, s.exit_code, s.expected) for s in steps] == [
        ("mnemo init", 0, []),
        ("mnemo show x", 3, ["line one"]),
    ]


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        ('{"commit": "...", "ids": ["a"]}', '{"ids":["a"],"commit":"abc"}', True),
        ('{"commit": "...", "ids": ["a"]}', '{"ids":["a"],"commit":"abc","extra":1}', False),  # a cut unsaid
        ('{"commit": "...", "...": "..."}', '{"ids":["a"],"commit":"abc","extra":1}', True),  # a cut marked
        ('{"commit": "...", "ids": ["a"]}', '{"commit": "abc", "ids": ["a", "b"]}', False),
        ('{"current": false}', '{"current": 0}', False),
        ('{"a": {"b": null, "...": "..."}}', '{"a": {"b": null, "c": 2}}', True),
        ('{"a": {"b": null}}', '{"a": {"b": null, "c": 2}}', False),
        ('{"a": 1}', "not json", False),
        ("main  ...  e1", "main  4f2a9c1  e1", True),
        ("main  ...  e1", "main  4f2a9c1  e2", False),
    ],
)
def test_line_matching(expected, actual, ok):
    assert line_matches(expected, actual) is ok


def test_expected_lines_must_appear_in_order():
    assert unmatched(["a", "c"], "a\nb\nc\n") == []
    assert unmatched(["c", "a"], "a\nb\nc\n") == ["a"]


# -- the README --------------------------------------------------------------------


def test_readme_has_examples():
    assert _blocks("python"), "README.md has no ```python block"
    assert _blocks("console"), "README.md has no ```console block"


def test_console_session_shows_the_everyday_commands():
    commands = {
        next((word for word in step.command.split()[1:] if not word.startswith("-")), "")
        for block in _blocks("console")
        for step in parse_session(block)
        if step.command.startswith("mnemo ")
    }
    everyday = {"init", "commit", "show", "ls", "log", "history", "blame", "diff", "branch", "switch"}
    assert everyday <= commands, f"not shown in README: {sorted(everyday - commands)}"


def _small_embedder() -> embedders.Embedder:
    """What ``default_embedder()`` returns while README examples run."""
    return embedders.HashEmbedder(README_EMBEDDER_DIM)


def test_readme_says_its_recall_example_runs_with_the_hash_embedder():
    text = README.read_text(encoding="utf-8")
    assert any("default_embedder()" in block for block in _blocks("python"))
    assert "runs this example with the deterministic `HashEmbedder`" in text


@pytest.mark.parametrize("index", range(len(_blocks("python"))), ids=lambda i: f"python-{i + 1}")
def test_python_block_runs(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(embedders, "default_embedder", _small_embedder)
    source = _blocks("python")[index]
    # As a user runs it: not under this module's `from __future__ import annotations`.
    code = compile(source, f"README.md (python block {index + 1})", "exec", dont_inherit=True)
    exec(code, {"__name__": "__readme__"})


@pytest.mark.parametrize("index", range(len(_blocks("console"))), ids=lambda i: f"console-{i + 1}")
def test_console_block_runs(index, tmp_path):
    env = _environment()
    for step in parse_session(_blocks("console")[index]):
        done = subprocess.run(
            ["bash", "-c", step.command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        report = f"$ {step.command}\n--- stdout ---\n{done.stdout}--- stderr ---\n{done.stderr}"
        assert done.returncode == step.exit_code, (
            f"exit {done.returncode}, README says {step.exit_code}\n{report}"
        )
        missing = unmatched(step.expected, f"{done.stdout}\n{done.stderr}")
        assert not missing, f"expected output not found: {missing}\n{report}"


# -- make demo ---------------------------------------------------------------------


def test_demo_runs_on_a_fresh_directory(tmp_path):
    (tmp_path / "demo.mnemo").mkdir()  # a leftover from an earlier run is replaced
    (tmp_path / "demo.mnemo" / "stale").write_text("old")
    done = subprocess.run(
        [sys.executable, str(DEMO)],
        cwd=tmp_path,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"--- stdout ---\n{done.stdout}--- stderr ---\n{done.stderr}"
    assert (tmp_path / "demo.mnemo" / "data.mdb").is_file()
    assert not (tmp_path / "demo.mnemo" / "stale").exists()
    # The current deadline, and the one believed before the correction (the as-of read).
    assert "2026-06-30" in done.stdout
    assert "2026-07-15" in done.stdout

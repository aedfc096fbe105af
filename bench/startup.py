"""Start-up time: what an agent that shells out to ``mnemo`` pays per call.

Each row is the median wall time of fresh processes, the command and its floor
taking turns, so both see the same machine: ``mnemo show ID`` on a small store
against ``python -c "import typer, lmdb, msgspec, blake3"`` (the floor set by
the command line's own dependencies), and ``import mnemosyne`` against
``import lmdb, msgspec, blake3``. Also shown: ``from mnemosyne import Repo,
Node`` (the usual first line of a program), and ``mnemo --help``.
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness import row

PYTHON = sys.executable
MNEMO = [PYTHON, "-m", "mnemo_cli"]


def _wall(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - started


def _pair(command: list[str], floor: list[str], runs: int, env: dict[str, str]) -> tuple[float, float]:
    """Medians of ``command`` and ``floor``, run in turns (each warmed up once first)."""
    _wall(command, env)
    _wall(floor, env)
    mine: list[float] = []
    base: list[float] = []
    for _ in range(runs):
        mine.append(_wall(command, env))
        base.append(_wall(floor, env))
    return statistics.median(mine), statistics.median(base)


def _compile_packages(env: dict[str, str]) -> None:
    """Write the bytecode of ``mnemosyne`` and ``mnemo_cli``, as installing them does."""
    folders = []
    for package in ("mnemosyne", "mnemo_cli"):
        spec = importlib.util.find_spec(package)
        folders += list(spec.submodule_search_locations or []) if spec is not None else []
    # Not checked: a read-only tree keeps whatever bytecode it has, and the rows still run.
    subprocess.run(
        [PYTHON, "-m", "compileall", "-q", *folders], stdout=subprocess.DEVNULL, env=env, check=False
    )


def bench_startup(root: Path, runs: int) -> None:
    env = {**os.environ, "MNEMO_EMBEDDER": "none"}
    env.pop("MNEMO_DIR", None)
    _compile_packages(env)
    store = root / "startup"
    subprocess.run([*MNEMO, "init", str(store)], check=True, stdout=subprocess.DEVNULL, env=env)
    node = '{"id": "users/mira/prefs/language", "content": "Mira prefers French."}'
    subprocess.run(
        [*MNEMO, "--repo", str(store), "commit", "-m", "learned"],
        input=node.encode(),
        check=True,
        stdout=subprocess.DEVNULL,
        env=env,
    )
    show = [*MNEMO, "--repo", str(store), "show", "users/mira/prefs/language"]
    cli_floor = [PYTHON, "-c", "import typer, lmdb, msgspec, blake3"]
    mine, base = _pair(show, cli_floor, runs, env)
    row(
        "start-up: mnemo show ID / python -c 'import typer, lmdb, msgspec, blake3' (ms)",
        f"{runs} runs each",
        f"{mine * 1000:.0f} / {base * 1000:.0f} = {mine / base:.2f}",
        "<= 1.5",
        mine / base <= 1.5,
    )
    library = [PYTHON, "-c", "import mnemosyne"]
    lib_floor = [PYTHON, "-c", "import lmdb, msgspec, blake3"]
    mine, base = _pair(library, lib_floor, runs, env)
    row(
        "start-up: import mnemosyne / python -c 'import lmdb, msgspec, blake3' (ms)",
        f"{runs} runs each",
        f"{mine * 1000:.0f} / {base * 1000:.0f} = {mine / base:.2f}",
        "<= 1.5",
        mine / base <= 1.5,
    )
    usual = [PYTHON, "-c", "from mnemosyne import Repo, Node"]
    mine, base = _pair(usual, lib_floor, runs, env)
    row(
        "start-up: from mnemosyne import Repo, Node / the same floor (ms, informational)",
        f"{runs} runs each",
        f"{mine * 1000:.0f} / {base * 1000:.0f} = {mine / base:.2f}",
    )
    helped = [*MNEMO, "--help"]
    mine, base = _pair(helped, cli_floor, runs, env)
    row(
        "start-up: mnemo --help (every command built) / the CLI floor (ms, informational)",
        f"{runs} runs each",
        f"{mine * 1000:.0f} / {base * 1000:.0f} = {mine / base:.2f}",
    )

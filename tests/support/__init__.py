"""Helpers of the tests, not tests themselves: imported as ``support.<module>``.

- :mod:`support.cli_harness`: drive ``mnemo`` in-process and assert its errors.
- :mod:`support.clocks`: the settable clock most tests inject.
- :mod:`support.components`: fail under CI, else skip, when PostgreSQL, Chromium or an extra is missing.
- :mod:`support.mcp_client`: drive an MCP server with the SDK's own client (the ``mcp`` extra).
- :mod:`support.pg_server`: a throwaway PostgreSQL server for a session.
- :mod:`support.tiers`: the fast tier (``make unit-fast``) and the examples a property test runs.
- :mod:`support.internals`: the one module that reaches into a ``Repo``'s private parts.
- :mod:`support.viewer_server`: ``mnemo ui`` as a process, and Chromium, for the viewer's browser tests.
- :mod:`support.crash_writer`, :mod:`support.writer_proc`, :mod:`support.team_member`:
  programs the crash, concurrency and team tests run as processes of their own
  (``python -m support.<name>``, see :func:`script`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
"""The tests folder: on ``sys.path`` (pyproject's ``pythonpath``), so ``support`` imports from it."""


def script(name: str, *args: str) -> list[str]:
    """The command line that runs helper module ``name`` as a program: ``python -m support.<name> ARGS``."""
    return [sys.executable, "-m", f"support.{name}", *args]


def script_env() -> dict[str, str]:
    """The environment for :func:`script`: this one, with the tests folder first on ``PYTHONPATH``."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *([path] if path else [])])}

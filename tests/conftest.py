"""Fixtures shared by the test modules."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def clean_cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No store or author from the environment, and a fresh working directory."""
    monkeypatch.delenv("MNEMO_DIR", raising=False)
    monkeypatch.delenv("MNEMO_AUTHOR", raising=False)
    monkeypatch.chdir(tmp_path)

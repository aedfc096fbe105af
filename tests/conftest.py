"""Fixtures shared by the test modules."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemosyne.store import settings


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "default_embedder: keep the store's out-of-the-box embedder ('auto': MiniLM when installed)",
    )


@pytest.fixture(autouse=True)
def lexical_by_default(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stores in tests search lexically unless a test picks an embedder (or the real default).

    Out of the box a store embeds with MiniLM when the extra is installed; tests
    that do not ask for it would pay model time for nothing.
    """
    if request.node.get_closest_marker("default_embedder") is None:
        monkeypatch.setitem(settings.KEYS, "embedder", "none")


@pytest.fixture
def clean_cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No store or author from the environment, and a fresh working directory."""
    monkeypatch.delenv("MNEMO_DIR", raising=False)
    monkeypatch.delenv("MNEMO_AUTHOR", raising=False)
    monkeypatch.chdir(tmp_path)

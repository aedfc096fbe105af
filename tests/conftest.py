"""Fixtures shared by the test modules."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import hypothesis
import pytest
from support import schedule, scratch, tiers
from support.components import unavailable
from support.pg_server import PgServer, ServerUnavailable

from mnemosyne.store import settings

# Before any temporary file: pytest's tmp_path (and xdist's workers, which inherit
# the environment), the PostgreSQL server and every process a test starts use it.
scratch.use_ram()

if tiers.FAST:
    # Property tests without settings of their own run Hypothesis's 100 examples; here a fifth.
    hypothesis.settings.register_profile("fast-tier", max_examples=tiers.examples(100))
    hypothesis.settings.load_profile("fast-tier")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "default_embedder: keep the store's out-of-the-box embedder ('auto': MiniLM when installed)",
    )
    # xdist's --dist loadfile would reorder the files by number of tests; the
    # collection's order (longest first, below) is what keeps both workers busy to the end.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the test files longest first (see ``support.schedule``): the last to start is short."""
    items[:] = schedule.longest_first(items, schedule.recorded())


def pytest_report_header() -> list[str]:
    """Say so when this is the fast tier (fewer examples per property test)."""
    return ["fast tier (MNEMO_FAST_TESTS): property tests run fewer examples"] if tiers.FAST else []


@pytest.fixture(autouse=True)
def lexical_by_default(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stores in tests search lexically unless a test picks an embedder (or the real default).

    Out of the box a store embeds with MiniLM when the extra is installed; tests
    that do not ask for it would pay model time for nothing.
    """
    if request.node.get_closest_marker("default_embedder") is None:
        monkeypatch.setitem(settings.KEYS, "embedder", "none")


@pytest.fixture
def disk_tmp_path() -> Iterator[Path]:
    """A fresh directory on the disk even when ``tmp_path`` is in RAM (``support.scratch``).

    For a test whose check needs each commit to wait for a real medium.
    """
    folder = Path(tempfile.mkdtemp(prefix="mnemo-disk-", dir=scratch.disk_tmpdir()))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def clean_cli_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No store or author from the environment, and a fresh working directory."""
    monkeypatch.delenv("MNEMO_DIR", raising=False)
    monkeypatch.delenv("MNEMO_AUTHOR", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="session")
def pg_server():
    """A PostgreSQL server of its own for the session, stopped at the end even on failure.

    Tests that need it fail when it cannot start under CI (env CI set), else skip.
    """
    server = None
    try:
        server = PgServer().start()
    except (ServerUnavailable, OSError) as exc:
        if server is not None:
            server.stop()
        unavailable(f"no PostgreSQL server for the tests: {exc}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server):
    """The URL of a fresh store location: a schema of its own, dropped after the test."""
    url = pg_server.url()
    yield url
    pg_server.drop_schema(url)

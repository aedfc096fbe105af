"""What a short command loads: only what it uses.

numpy (and usearch, onnxruntime) cost a fresh ``mnemo show`` tens of
milliseconds; only searching, reindexing and the recall upkeep need them. In
the same way ``import mnemosyne`` loads the errors and the data model, not a
store's code, and reading a node loads neither the transfer code of the
remotes, nor the write path (commits, branches, merges, index rebuilding), nor
erasure, collection and fsck. ``make bench`` measures the time; these tests
keep the modules out.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import mnemosyne

NOT_FOR_READING = {
    "mnemosyne.admin.erase",
    "mnemosyne.admin.fsck",
    "mnemosyne.admin.gc",
    "mnemosyne.admin.receiving",
    "mnemosyne.admin.sending",
    "mnemosyne.admin.transfer",
    "mnemosyne.admin.wire",
    "mnemosyne.api._remote_side",
    "mnemosyne.api._remotes",
    "mnemosyne.history.branches",
    "mnemosyne.history.commits",
    "mnemosyne.history.merge",
    "mnemosyne.index.build",
    "mnemosyne.index.claims",
}
"""Modules that opening a store and reading a node (``mnemo show``) never use."""

NOT_FOR_READING_FROM_THE_STANDARD_LIBRARY = {"hashlib", "hmac", "secrets", "tempfile"}
"""Used to make tokens, cut tree chunks, name index files and compact: milliseconds to load
(hashlib loads OpenSSL), and nothing a read runs (``shutil`` comes with typer anyway)."""


def _modules_after(code: str, cwd: str) -> set[str]:
    script = code + "\nimport sys\nprint('\\n'.join(sorted(sys.modules)))\n"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=cwd, timeout=60
    )
    return set(done.stdout.split())


def test_importing_the_package_loads_the_model_and_no_store(tmp_path):
    loaded = _modules_after("import mnemosyne", str(tmp_path))
    assert "mnemosyne.model.objects" in loaded
    store_code = {name for name in loaded if name.startswith(("mnemosyne.api", "mnemosyne.store"))}
    assert not store_code
    assert not {"lmdb", "numpy", "httpx"} & loaded


def test_every_public_name_resolves_in_a_fresh_process(tmp_path):
    code = """
import mnemosyne
from mnemosyne.api.repo import Repo
from mnemosyne.api.store import Store
missing = [name for name in mnemosyne.__all__ if not hasattr(mnemosyne, name)]
assert not missing, missing
assert mnemosyne.Repo is Repo and mnemosyne.Store is Store
assert set(mnemosyne.__all__) <= set(dir(mnemosyne))
"""
    _modules_after(code, str(tmp_path))


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_name"):
        mnemosyne.no_such_name  # noqa: B018


def test_opening_a_store_and_reading_a_node_loads_no_numpy(tmp_path):
    code = f"""
from mnemosyne import Node, Repo
with Repo.init({str(tmp_path / "s")!r}) as repo:
    repo.commit([Node(id="a", content="hello")], message="one")
with Repo.open({str(tmp_path / "s")!r}) as repo:
    assert repo.get("a").content == "hello"
    list(repo.log())
"""
    loaded = _modules_after(code, str(tmp_path))
    assert "mnemosyne.api.repo" in loaded
    assert not {"numpy", "usearch", "onnxruntime"} & loaded


def test_reading_a_node_loads_neither_the_write_path_nor_the_remotes(tmp_path):
    from mnemosyne import Node, Repo

    with Repo.init(tmp_path / "s") as repo:
        repo.commit([Node(id="a", content="hello")], message="one")
    code = f"""
from mnemosyne import Repo
with Repo.open({str(tmp_path / "s")!r}) as repo:
    assert repo.get("a").content == "hello"
"""
    loaded = _modules_after(code, str(tmp_path))
    assert "mnemosyne.api.repo" in loaded
    assert not NOT_FOR_READING & loaded


def test_the_show_command_loads_no_numpy_nor_what_reading_never_uses(tmp_path):
    from mnemosyne import Node, Repo

    with Repo.init(tmp_path / "s") as repo:
        repo.commit([Node(id="a", content="hello")], message="one")
    code = f"""
from typer.testing import CliRunner
from mnemo_cli.app import app
result = CliRunner().invoke(app, ["--repo", {str(tmp_path / "s")!r}, "show", "a"])
assert result.exit_code == 0, result.output
assert "hello" in result.output
"""
    loaded = _modules_after(code, str(tmp_path))
    assert "mnemo_cli.app" in loaded
    assert "numpy" not in loaded
    assert not NOT_FOR_READING & loaded
    assert not NOT_FOR_READING_FROM_THE_STANDARD_LIBRARY & loaded

"""A store is its owner's alone: its directory 0700 and its files 0600 whatever the umask; a token
file other users can read is warned about."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli_harness import invoke

from mnemosyne import Repo, Store


@pytest.fixture
def usual_umask() -> Iterator[None]:
    before = os.umask(0o022)  # the usual one, under which LMDB makes its files 0644
    try:
        yield
    finally:
        os.umask(before)


def modes(path: Path) -> dict[str, int]:
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in [path, *path.iterdir()]}


@pytest.mark.parametrize("made_before", [False, True], ids=["new", "an empty directory"])
def test_a_new_store_is_its_owners_alone(tmp_path: Path, usual_umask: None, made_before: bool) -> None:
    path = tmp_path / "store"
    if made_before:
        path.mkdir(mode=0o755)
    Store.init(path).close()
    found = modes(path)
    assert found.pop("store") == 0o700
    assert found and set(found.values()) == {0o600}, found
    with Repo.open(path) as repo:  # still opened, written and read as before
        repo.commit(put=[], allow_empty=True, message="m")
        assert len(list(repo.log())) == 1


def test_a_token_file_others_can_read_is_warned_about(tmp_path: Path, usual_umask: None) -> None:
    store = tmp_path / "store"
    assert invoke("init", str(store)).exit_code == 0
    token = tmp_path / "hub.token"
    token.write_text("mnemo_000000000000_secret\n")
    token.chmod(0o644)
    added = invoke(
        "--repo", str(store), "remote", "add", "hub", "http://127.0.0.1:9", "--token-file", str(token)
    )
    assert added.exit_code == 0, added.output
    assert (
        added.stderr
        == f"warning: other users of this machine can read the token file {token}: chmod 600 it\n"
    )
    assert "secret" not in added.output
    token.chmod(0o600)
    again = invoke(
        "--repo", str(store), "remote", "add", "hub2", "http://127.0.0.1:9", "--token-file", str(token)
    )
    assert (again.exit_code, again.stderr) == (0, "")

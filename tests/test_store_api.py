"""What the library does so faces need not: one tenant of an open store, opening read-only when
it must, and an export file that exists only once it is whole."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from mnemosyne import InvalidInput, Node, NotFound, Repo, Store


def _store(path: Path) -> Path:
    with Repo.init(path) as repo:
        repo.commit([Node(id="users/mira/lang", content="de")], message="m", author="a")
    return path


def test_a_repo_on_an_open_store_shares_it_and_leaves_it_open(tmp_path: Path) -> None:
    with Store.open(_store(tmp_path / "s")) as store:
        store.create_tenant("acme")
        with Repo.open(store, tenant="acme") as acme, Repo.open(store) as default:
            acme.commit([Node(id="k", content="acme")], message="m", author="a")
            assert acme.store is store and default.store is store
            assert default.get("users/mira/lang").content == "de"
            assert default.get("k") is None  # tenants stay apart
        assert store.tenants() == ["acme", "default"]  # still open after both closed
        with Repo.open(store, tenant="new", create=True) as created:
            assert created.tenant == "new"
        with pytest.raises(NotFound, match="no tenant named 'ghost'"):
            Repo.open(store, tenant="ghost")


def test_a_repo_on_an_open_store_refuses_the_stores_own_options(tmp_path: Path) -> None:
    with Store.open(_store(tmp_path / "s")) as store:
        for option in ({"readonly": True}, {"map_size": 1 << 20}, {"max_map_size": 1 << 30}, {"sync": False}):
            with pytest.raises(InvalidInput, match=f"{next(iter(option))} belong to the store"):
                Repo.open(store, **option)  # type: ignore[arg-type]
    with Store.open(tmp_path / "s", readonly=True) as reading, Repo.open(reading, readonly=True) as repo:
        assert repo.readonly and repo.get("users/mira/lang").content == "de"


def test_store_repo_says_what_replaced_it() -> None:
    with (
        Store.in_memory() as store,
        pytest.raises(AttributeError, match=r"Repo\.open\(store, tenant=tenant\)"),
    ):
        store.repo("default")  # type: ignore[attr-defined]
    with Store.in_memory() as store, pytest.raises(AttributeError, match="no attribute 'nothing'"):
        store.nothing  # type: ignore[attr-defined]  # noqa: B018


def test_auto_opens_for_writing_where_this_process_may_write(tmp_path: Path) -> None:
    with Repo.open(_store(tmp_path / "s"), readonly="auto") as repo:
        assert not repo.readonly
        repo.commit([Node(id="k", content="v")], message="m", author="a")
    with pytest.raises(InvalidInput, match="readonly must be True, False or 'auto'"):
        Store.open(tmp_path / "s", readonly="yes")  # type: ignore[arg-type]


def _read_as_another(path: Path, uid: int | None) -> dict[str, object]:
    """Open ``path`` with ``readonly="auto"`` in a forked child (as ``uid`` when given); what it saw."""
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        status = 1
        try:
            os.close(reading)
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            found: dict[str, object] = {}
            with Repo.open(path, readonly="auto") as repo:
                found["readonly"] = repo.readonly
                node = repo.get("users/mira/lang")
                found["lang"] = node.content if node is not None else None
                found["hits"] = [hit.id for hit in repo.search("lang", mode="lexical")]
                try:
                    repo.commit([Node(id="k", content="v")], message="m", author="a")
                except InvalidInput as error:
                    found["refused"] = str(error)
            os.write(writing, json.dumps(found).encode())
            status = 0
        except BaseException as error:
            os.write(writing, json.dumps({"error": repr(error)}).encode())
        finally:
            os._exit(status)
    os.close(writing)
    with os.fdopen(reading, "rb") as pipe:
        answer = pipe.read()
    os.waitpid(child, 0)
    return json.loads(answer)


def test_auto_opens_read_only_where_this_process_may_not_write(tmp_path: Path) -> None:
    # Someone else's store: readable, not writable. Root may write any file, so as root the
    # reader becomes an unprivileged user; otherwise the files are made read-only.
    if os.geteuid() == 0:
        folder = Path(tempfile.mkdtemp(prefix="mnemo-ro-", dir="/tmp"))
        try:
            folder.chmod(0o755)
            path = _store(folder / "s")
            for item in (path, *path.iterdir()):
                item.chmod(item.stat().st_mode | stat.S_IROTH | (stat.S_IXOTH if item.is_dir() else 0))
            found = _read_as_another(path, uid=65534)  # nobody
        finally:
            shutil.rmtree(folder)
    else:
        path = _store(tmp_path / "s")
        (path / "data.mdb").chmod(0o444)
        path.chmod(0o555)
        try:
            found = _read_as_another(path, uid=None)
        finally:
            path.chmod(0o755)
    assert "error" not in found, found
    assert found["readonly"] is True and found["lang"] == "de" and found["hits"] == ["users/mira/lang"]
    assert "read-only" in str(found["refused"])


def test_an_export_file_appears_whole_and_only_for_its_owner(tmp_path: Path) -> None:
    with Store.open(_store(tmp_path / "s")) as store:
        stream = io.BytesIO()
        store.export(stream)
        report = store.export(tmp_path / "backup.mnemo")
    target = tmp_path / "backup.mnemo"
    assert target.read_bytes() == stream.getvalue() and report.size == len(stream.getvalue())
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["backup.mnemo", "s"]


def test_a_failed_export_leaves_no_file_behind(tmp_path: Path) -> None:
    with Store.open(_store(tmp_path / "s")) as store:
        with pytest.raises(NotFound, match="no tenant named 'ghost'"):
            store.export(tmp_path / "backup.mnemo", tenants=["ghost"])
        assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]  # neither the file nor a partial one
        (tmp_path / "backup.mnemo").write_bytes(b"an older backup")
        with pytest.raises(NotFound):
            store.export(tmp_path / "backup.mnemo", tenants=["ghost"])
        assert (tmp_path / "backup.mnemo").read_bytes() == b"an older backup"  # not replaced by a broken one
        with pytest.raises(InvalidInput, match="is a directory"):
            store.export(tmp_path)
        with pytest.raises(InvalidInput, match="cannot write"):
            store.export(tmp_path / "no" / "such" / "folder.mnemo")

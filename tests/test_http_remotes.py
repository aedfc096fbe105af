"""Remotes over HTTP: clone, fetch, pull and push against stores ``mnemo serve`` serves.

Real server processes on free loopback ports, each over a store of its own:
history between two servers through local clones, erasure travelling both ways
and gone from every file after gc, racing pushes (exactly one lands), transfers
interrupted at a chosen step (both sides consistent, a rerun completes), and the
token rules (never in a URL, the tenant and role it grants).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
from click.testing import Result
from mnemo_cli.app import app
from support.cli_harness import runner
from support.components import need_module
from support.cutting_proxy import CuttingProxy
from support.served import Served, tokens

from mnemosyne import (
    AccessDenied,
    InvalidInput,
    MnemoError,
    Node,
    NotFound,
    RefConflict,
    Repo,
    Store,
)

need_module("httpx")
need_module("uvicorn")

pytestmark = pytest.mark.slow  # server processes: a second or two each to start and stop


def mnemo(*args: str, token: str | None = None) -> Result:
    """``mnemo ARGS`` in this process, with ``MNEMO_TOKEN`` set to ``token`` (or unset)."""
    env: dict[str, str | None] = {"MNEMO_DIR": None, "MNEMO_TOKEN": token, "MNEMO_AUTHOR": "tester"}
    return runner.invoke(app, list(args), env=env)  # type: ignore[arg-type]


def mnemo_process(*args: str, token: str) -> subprocess.CompletedProcess[str]:
    """``mnemo ARGS`` as a process of its own, as a user runs it."""
    env = {key: value for key, value in os.environ.items() if key != "MNEMO_DIR"}
    env |= {"MNEMO_EMBEDDER": "none", "MNEMO_AUTHOR": "tester", "MNEMO_TOKEN": token}
    command = [sys.executable, "-m", "mnemo_cli", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)


def one_error(done: Result, code: int, fragment: str) -> str:
    assert done.exit_code == code, (done.exit_code, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert fragment in lines[0], lines[0]
    assert "Traceback" not in done.output
    return lines[0]


def token_file(path: Path, text: str) -> Path:
    path.write_text(text + "\n")
    path.chmod(0o600)
    return path


def holds(store: Path, text: str) -> list[str]:
    """The files of a store directory whose bytes hold ``text``."""
    return [str(file) for file in store.rglob("*") if file.is_file() and text.encode() in file.read_bytes()]


def stopped(server: Served, *secrets: str) -> None:
    assert server.stop() == 0, server.stderr
    assert "Traceback" not in server.stderr
    for secret in secrets:
        assert secret not in server.stderr  # tokens never reach the server's log


# -- two servers --------------------------------------------------------------------------


def test_two_served_stores_share_history_through_clones_and_erasure_travels(tmp_path: Path) -> None:
    canary = f"canary-{uuid.uuid4().hex}"
    a, b = tmp_path / "a.mnemo", tmp_path / "b.mnemo"
    with Repo.init(a) as hub:
        hub.commit([Node(id="diary", content=f"dear diary, {canary}"), Node(id="lang", content="de")])
    Repo.init(b).close()
    a_tokens = tokens(a, ("a-admin", "default", "admin"))
    b_tokens = tokens(b, ("b-admin", "default", "admin"), ("b-writer", "default", "write"))
    server_a, server_b = Served(a), Served(b)
    try:
        # Python: a clone of A over HTTP, which then pushes to B with a write token from a file.
        laptop = Repo.clone(server_a.url, tmp_path / "laptop.mnemo", token=a_tokens["a-admin"])
        assert laptop.tenant == "default" and laptop.get("lang").content == "de"  # type: ignore[union-attr]
        assert [remote.location for remote in laptop.store.remotes()] == [server_a.url]
        writer = token_file(tmp_path / "b-writer.token", b_tokens["b-writer"])
        laptop.store.add_remote("b", server_b.url, token_file=writer)
        pushed = laptop.push("b")
        assert [update.ref for update in pushed.tenants[0].refs] == ["main"]
        assert pushed.location == server_b.url

        # The command line: a clone of B (MNEMO_TOKEN), a commit there, pushed back to B.
        desk = tmp_path / "desk.mnemo"
        cloned = mnemo_process("clone", server_b.url, str(desk), token=b_tokens["b-writer"])
        assert cloned.returncode == 0, cloned.stderr
        assert f"Cloned {server_b.url} into" in cloned.stdout
        with Repo.open(desk) as repo:
            repo.commit([Node(id="city", content="Lisbon")], message="from the desk")
        sent = mnemo("--repo", str(desk), "push", token=b_tokens["b-writer"])
        assert sent.exit_code == 0, sent.output
        assert sent.stdout.startswith(f"To {server_b.url}\n")

        # The laptop pulls B's new commit: a fast-forward over HTTP.
        pulled = laptop.pull("b", "main")
        assert pulled.merge.fast_forward and laptop.get("city").content == "Lisbon"  # type: ignore[union-attr]

        # Forget the canary; the push carrying the erasure needs an admin token there.
        laptop.forget("diary", "asked to", author="dpo")
        with pytest.raises(AccessDenied, match="needs an admin token"):
            laptop.push("b")
        with Repo.open(b, readonly=True) as hub_b:
            diary = hub_b.get("diary")  # refused before anything was written there
            assert diary is not None and canary in str(diary.content)
        assert laptop.push("b", token=b_tokens["b-admin"]).tenants[0].redactions == 1
        assert laptop.push("origin", token=a_tokens["a-admin"]).tenants[0].redactions == 1

        # The desk pulls from B: the erasure comes to it too.
        fetched = mnemo("--repo", str(desk), "pull", token=b_tokens["b-writer"])
        assert fetched.exit_code == 0, fetched.output
        assert "1 redaction(s)" in fetched.stdout
    except BaseException:
        print(server_a.stderr, server_b.stderr)
        raise
    finally:
        stopped(server_a, *a_tokens.values())
        stopped(server_b, *b_tokens.values())
    laptop.close()
    for store in (a, b, tmp_path / "laptop.mnemo", desk):
        with Repo.open(store) as repo:
            assert repo.get("diary") is None and repo.get("city").content == "Lisbon"  # type: ignore[union-attr]
            assert repo.fsck().ok
            repo.gc(compact=True)
        assert holds(store, canary) == [], store


# -- compare-and-set --------------------------------------------------------------------


def test_of_two_racing_pushes_over_http_exactly_one_lands(tmp_path: Path) -> None:
    hub = tmp_path / "hub.mnemo"
    with Repo.init(hub) as repo:
        repo.commit([Node(id="base", content="read by both")])
    made = tokens(hub, ("one", "default", "write"), ("two", "default", "write"))
    server = Served(hub)
    try:
        clones = [
            Repo.clone(server.url, tmp_path / f"{name}.mnemo", token=made[name]) for name in ("one", "two")
        ]
        for round_ in range(2):
            for i, repo in enumerate(clones):
                repo.commit([Node(id=f"race/{round_}", content=f"clone {i}")], message=f"round {round_}")
            start = threading.Barrier(2)
            outcome: dict[int, str] = {}

            def push(
                i: int,
                repo: Repo,
                token: str,
                start: threading.Barrier = start,
                outcome: dict[int, str] = outcome,
            ) -> None:
                start.wait()
                try:
                    repo.push(token=token)
                    outcome[i] = "landed"
                except RefConflict as error:
                    assert "pull, then push again" in str(error)
                    outcome[i] = "refused"

            threads = [
                threading.Thread(target=push, args=(i, repo, made[name]))
                for i, (repo, name) in enumerate(zip(clones, ("one", "two"), strict=True))
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert sorted(outcome.values()) == ["landed", "refused"]
            winner = next(i for i, what in outcome.items() if what == "landed")
            loser = clones[1 - winner]
            with Repo.open(hub, readonly=True) as served_store:
                assert served_store.tip("main") == clones[winner].tip("main")
            # The loser settles it as a team does: pull (taking theirs), push again.
            loser.pull(token=made["two" if winner == 0 else "one"], strategy="theirs")
            loser.push(token=made["two" if winner == 0 else "one"])
            clones[winner].pull(token=made["one" if winner == 0 else "two"])
        for repo in clones:
            assert repo.fsck().ok
            repo.close()
    finally:
        stopped(server, *made.values())
    with Repo.open(hub) as repo:
        assert repo.fsck().ok
        assert [repo.get(f"race/{r}") is not None for r in range(2)] == [True, True]


# -- interrupted transfers --------------------------------------------------------------


def test_an_interrupted_push_or_fetch_leaves_both_sides_consistent_and_a_rerun_completes(
    tmp_path: Path,
) -> None:
    local = tmp_path / "local.mnemo"
    with Repo.init(local) as repo:
        repo.commit([Node(id=f"notes/{i:04d}", content=f"note {i} " * 20) for i in range(2000)])
        total = len(list(repo.nodes()))
    hub = tmp_path / "hub.mnemo"
    Repo.init(hub).close()
    made = tokens(hub, ("writer", "default", "write"))
    server = Served(hub, "--max-body", "64K")  # many small requests: several object batches
    try:

        def third_store(path: str, n: int) -> bool:
            return path.endswith("/transfer/store") and n == 3

        with CuttingProxy(server.url, third_store) as proxy, Repo.open(local) as repo:
            repo.store.add_remote("flaky", proxy.url)
            repo.store.add_remote("hub", server.url)
            with pytest.raises(MnemoError, match=r"remote 'flaky'.*store failed"):
                repo.push("flaky", token=made["writer"])
            assert proxy.cuts == 1
            assert repo.remote_branches() == [] and repo.fsck().ok
            with Repo.open(hub, readonly=True) as served_store:
                assert served_store.tip("main") is None  # its branch moves last, and did not
                assert served_store.fsck().ok
            again = repo.push("hub", token=made["writer"]).tenants[0]
            sent_before = again.objects
            assert 0 < sent_before and again.commits == 1
            with Repo.open(hub, readonly=True) as served_store:
                assert served_store.tip("main") == repo.tip("main")
                assert len(list(served_store.nodes())) == total and served_store.fsck().ok
            repo.store.add_remote("whole", tmp_path / "whole.mnemo")
            Repo.init(tmp_path / "whole.mnemo").close()
            everything = repo.push("whole").tenants[0].objects  # what a push sends from scratch
            assert sent_before < everything  # the batches stored before the cut were not sent again

        # A fetch broken at its second batch of objects: the same, the other way.
        def second_read(path: str, n: int) -> bool:
            return path.endswith("/transfer/read") and n == 2

        with CuttingProxy(server.url, second_read) as proxy, Repo.init(tmp_path / "fresh.mnemo") as fresh:
            fresh.store.add_remote("flaky", proxy.url)
            with pytest.raises(MnemoError, match="read failed"):
                fresh.fetch("flaky", token=made["writer"])
            assert proxy.cuts == 1
            assert fresh.remote_branches() == [] and fresh.fsck().ok
            proxy.cut = lambda path, n: False
            done = fresh.fetch("flaky", token=made["writer"]).tenants[0]
            assert done.commits == 1 and 0 < done.objects < everything
            assert fresh.resolve("flaky/main").id == repo_tip(local) and fresh.fsck().ok
    finally:
        stopped(server, *made.values())


def repo_tip(path: Path) -> str | None:
    with Repo.open(path, readonly=True) as repo:
        return repo.tip("main")


# -- tokens and refusals ----------------------------------------------------------------


def test_tokens_go_in_a_file_or_the_environment_and_grant_one_tenant_and_role(tmp_path: Path) -> None:
    hub = tmp_path / "hub.mnemo"
    with Store.init(hub) as store:
        store.create_tenant("acme")
    with Repo.open(hub) as repo:
        repo.commit([Node(id="k", content="v")])
    made = tokens(hub, ("reader", "default", "read"), ("acme", "acme", "write"))
    server = Served(hub)
    try:
        url = server.url
        host = url.removeprefix("http://")
        one_error(
            mnemo("clone", f"http://me:{made['reader']}@{host}", str(tmp_path / "x")), 2, "no user or token"
        )
        one_error(
            mnemo("clone", url, str(tmp_path / "x")), 7, "needs a token: give the command --token-file PATH"
        )
        assert not (tmp_path / "x").exists()  # a failed clone leaves nothing
        one_error(
            mnemo("clone", url, str(tmp_path / "x"), token="mnemo_0_nope"), 7, "unknown, revoked or expired"
        )
        one_error(
            mnemo("clone", "--all-tenants", url, str(tmp_path / "x"), token=made["reader"]), 2, "one tenant"
        )
        one_error(
            mnemo("--tenant", "acme", "clone", url, str(tmp_path / "x"), token=made["reader"]),
            3,
            "no tenant 'acme' that the token reaches",
        )
        # A read token clones, fetches and pulls, and cannot push.
        reader = token_file(tmp_path / "reader.token", made["reader"])
        clone = tmp_path / "clone.mnemo"
        done = mnemo("clone", url, str(clone), "--token-file", str(reader))
        assert done.exit_code == 0, done.output
        shown = mnemo("--repo", str(clone), "remote", "-v")
        assert shown.stdout == f"origin\t{url}\t(token file {reader})\n"
        assert made["reader"] not in shown.stdout
        with Repo.open(clone) as repo:
            repo.commit([Node(id="k", content="mine")])
        one_error(
            mnemo("--repo", str(clone), "push"), 7, "a read token cannot do this: it needs a write token"
        )
        assert mnemo("--repo", str(clone), "fetch").stdout == "Already up to date with origin.\n"
        # A remote's own token file wins over MNEMO_TOKEN, which is for remotes without one:
        # one server's token is never sent to another.
        done = mnemo("--repo", str(clone), "fetch", token=made["acme"])
        assert done.exit_code == 0 and done.stdout == "Already up to date with origin.\n", done.output
        assert mnemo("--repo", str(clone), "remote", "add", "plain", url).exit_code == 0
        one_error(
            mnemo("--repo", str(clone), "fetch", "plain", token="mnemo_x\u00e9y"), 2, "the token is malformed"
        )
        # The acme token reaches acme only, whichever tenant the local store is in.
        one_error(
            mnemo("--repo", str(clone), "fetch", "plain", token=made["acme"]),
            3,
            "no tenant 'default' that its token reaches",
        )
        acme = tmp_path / "acme.mnemo"
        done = mnemo("clone", url, str(acme), token=made["acme"])  # the token's tenant, by default
        assert done.exit_code == 0, done.output
        with Repo.open(acme, tenant="acme") as repo:
            assert repo.tip("main") is None and repo.remote_branches() == []
            repo.commit([Node(id="a", content="acme's")])
            assert repo.push(token=made["acme"]).tenants[0].commits == 1
        # A remote's URL never holds a token, and a token file is for HTTP remotes.
        with Repo.open(clone) as repo:
            with pytest.raises(InvalidInput, match="no user or token"):
                repo.store.add_remote("leaky", f"http://x:{made['reader']}@{host}")
            with pytest.raises(InvalidInput, match="for a remote served over HTTP"):
                repo.store.add_remote("dir", tmp_path / "acme.mnemo", token_file=reader)
            with pytest.raises(InvalidInput, match="no such file"):
                repo.store.add_remote("gone", url, token_file=tmp_path / "missing.token")
            reader.unlink()
            with pytest.raises(InvalidInput, match="cannot read its token file"):
                repo.fetch()
            with pytest.raises(InvalidInput, match="one tenant"):
                repo.fetch(all_tenants=True, token=made["reader"])
    finally:
        stopped(server, *made.values())
    one_error(
        mnemo("--repo", str(clone), "fetch", "plain", token=made["reader"]), 3, "cannot reach remote 'plain'"
    )
    with Repo.open(clone) as repo, pytest.raises(NotFound, match="cannot reach"):
        repo.pull(token=made["reader"])


def test_a_token_file_for_one_command_goes_before_the_remotes_and_a_refusal_names_it(tmp_path: Path) -> None:
    hub = tmp_path / "hub.mnemo"
    with Repo.init(hub) as repo:
        repo.commit([Node(id="k", content="v")])
    made = tokens(hub, ("reader", "default", "read"), ("writer", "default", "write"))
    reader = token_file(tmp_path / "reader.token", made["reader"])
    writer = token_file(tmp_path / "writer.token", made["writer"])
    server = Served(hub)
    mine = tmp_path / "mine.mnemo"
    try:
        assert mnemo("clone", "--token-file", str(reader), server.url, str(mine)).exit_code == 0
        with Repo.open(mine) as repo:
            repo.commit([Node(id="k2", content="v2")])
        # origin keeps the read token's file, which goes before MNEMO_TOKEN: the push is refused,
        # and the message says how to send the write token for this push alone.
        refused = mnemo_process("--repo", str(mine), "push", token=made["writer"])
        assert refused.returncode == 7, refused.stderr
        (line,) = refused.stderr.strip().splitlines()
        assert line.startswith("error: remote 'origin': ") and "--token-file PATH" in line, line
        pushed = mnemo("--repo", str(mine), "push", "--token-file", str(writer))
        assert pushed.exit_code == 0, pushed.output
        with Repo.open(hub, readonly=True) as repo:
            assert repo.get("k2") is not None
        with Repo.open(mine) as repo:  # the remote keeps its own token file
            assert [r.token_file for r in repo.store.remotes()] == [str(reader)]
        for command in ("fetch", "pull"):
            done = mnemo("--repo", str(mine), command, "--token-file", str(writer))
            assert done.exit_code == 0, (command, done.output)
        missing = str(tmp_path / "none")
        one_error(mnemo("--repo", str(mine), "fetch", "--token-file", missing), 2, "no such file")
        plain = tmp_path / "plain.mnemo"
        Repo.init(plain).close()
        assert mnemo("--repo", str(mine), "remote", "add", "plain", str(plain)).exit_code == 0
        one_error(mnemo("--repo", str(mine), "fetch", "plain", "--token-file", str(writer)), 2, "not served")
    finally:
        stopped(server, *made.values())

"""The first search after a bulk load says what it does first, and shows progress (issue 22, item 19).

A commit only queues what it writes; the next search on a writable handle
indexes and embeds it, which after 100,000 memories takes minutes with a real
model. ``Repo.pending_recall()`` says how much is waiting, ``progress=`` on
search and context reports the catch-up batch by batch, and ``mnemo search`` /
``mnemo context`` print one line on stderr before a large catch-up, with a
progress bar when stderr is a terminal (and only then). Tested with the hash
embedder and a lowered threshold.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

import pytest
from mnemo_cli import cmd_recall
from support.cli_harness import invoke
from support.clocks import Clock

from mnemosyne import Node, PendingRecall, Repo
from mnemosyne.store.kv.base import Space

pytestmark = pytest.mark.usefixtures("clean_cli_env")

COUNT = 600
"""Three batches of the catch-up and a bit (it goes 256 versions at a time)."""


def bulk(repo: Repo, count: int = COUNT, start: int = 0) -> None:
    repo.commit(
        [
            Node(id=f"notes/{i}", content=f"memory {i} about topic {i % 7}")
            for i in range(start, start + count)
        ],
        message="bulk",
    )


def make_store(path: Path) -> None:
    with Repo.init(path, sync=False, clock=Clock()) as repo:  # two stores alike, times and all
        repo.config("embedder", "hash")
        bulk(repo)


# -- the library ----------------------------------------------------------------------


def test_pending_recall_says_what_the_next_search_does_first() -> None:
    repo = Repo.in_memory(embedder="hash")
    assert repo.pending_recall() == PendingRecall(model="hash-64")
    bulk(repo)
    pending = repo.pending_recall()
    assert pending == PendingRecall(versions=COUNT, embeddings=COUNT, model="hash-64")
    assert pending.total == COUNT
    repo.search("topic")
    assert repo.pending_recall() == PendingRecall(model="hash-64")

    # A model new to the tenant embeds every version indexed before it came.
    repo.use_embedder("hash-32")
    bulk(repo, 10, start=COUNT)
    assert repo.pending_recall() == PendingRecall(versions=10, embeddings=COUNT + 10, model="hash-32")

    # No embedder: postings only.
    repo.use_embedder(None)
    assert repo.pending_recall() == PendingRecall(versions=10)


def test_an_index_of_an_older_layout_is_pending_whole(tmp_path: Path) -> None:
    with Repo.init(tmp_path / "s", sync=False) as repo:
        bulk(repo, 20)
        repo.search("topic")
        # Layout stamps came with layout 3: an index with totals and no stamp is older.
        repo.kv.transact(lambda txn: txn.delete(Space.RECALL, b"\x00\x00\x00\x00f"))
        assert repo.pending_recall() == PendingRecall(versions=20, rebuild=True)
        seen: list[tuple[int, int]] = []
        assert [hit.id for hit in repo.search("memory 3", k=1, progress=lambda *a: seen.append(a))] == [
            "notes/3"
        ]
        assert seen == [(20, 20)]
        assert repo.pending_recall() == PendingRecall()


def test_search_and_context_report_the_catch_up_batch_by_batch() -> None:
    repo = Repo.in_memory(embedder="hash")
    bulk(repo)
    seen: list[tuple[int, int]] = []
    hits = repo.search("topic 3", k=3, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(256, COUNT), (512, COUNT), (COUNT, COUNT)]
    assert len(hits) == 3

    # Nothing waiting: no call at all.
    seen.clear()
    repo.search("topic 3", progress=lambda done, total: seen.append((done, total)))
    assert seen == []

    # A new model: the versions indexed before are embedded first, then what is queued.
    repo.use_embedder("hash-32")
    bulk(repo, 10, start=COUNT)
    expected = repo.pending_recall().total
    repo.context("topic", progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (expected, expected) == (COUNT + 10, COUNT + 10)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)


def test_a_read_only_handle_does_no_catch_up(tmp_path: Path) -> None:
    make_store(tmp_path / "s")
    with Repo.open(tmp_path / "s", readonly=True) as reader:
        assert reader.pending_recall().versions == COUNT  # what a writable handle would do
        seen: list[tuple[int, int]] = []
        assert reader.search("memory 3", k=1, mode="lexical", progress=lambda *a: seen.append(a))
        assert seen == []


# -- the command line --------------------------------------------------------------------


def test_a_large_catch_up_is_announced_in_one_line_and_json_stays_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cmd_recall, "CATCH_UP_NOTICE", 100)
    for name in ("a", "b"):
        make_store(tmp_path / name)
    announced = invoke("--repo", "a", "--json", "search", "topic 3", "-k", "3")
    assert announced.exit_code == 0, announced.output
    # Not a terminal: that one line, no progress bar.
    assert (
        announced.stderr == "indexing 600 memories written since the last search (this may take a while) …\n"
    )

    # The same search without the notice (threshold above the work) prints the same stdout.
    monkeypatch.setattr(cmd_recall, "CATCH_UP_NOTICE", COUNT + 1)
    quiet = invoke("--repo", "b", "--json", "search", "topic 3", "-k", "3")
    assert (quiet.exit_code, quiet.stderr) == (0, "")
    assert announced.stdout == quiet.stdout and len(quiet.stdout.splitlines()) == 3

    # Caught up: nothing to say.
    monkeypatch.setattr(cmd_recall, "CATCH_UP_NOTICE", 1)
    again = invoke("--repo", "a", "context", "topic 3")
    assert again.exit_code == 0 and "indexing" not in again.stderr

    # A new model announces the embedding of what was indexed before.
    with Repo.open(tmp_path / "a") as repo:
        repo.config("embedder", "hash-32")
        bulk(repo, 5, start=COUNT)
    context = invoke("--repo", "a", "--json", "context", "topic 3")
    assert context.exit_code == 0, context.output
    assert context.stderr == (
        "indexing 5 memories written since the last search, and embedding 600 memories indexed before "
        "with hash-32, new to this store (this may take a while) …\n"
    )
    assert json.loads(context.stdout)["query"] == "topic 3"


@pytest.mark.slow  # a real process
def test_on_a_terminal_the_catch_up_shows_progress(tmp_path: Path) -> None:
    make_store(tmp_path / "s")
    # The real command, its notice threshold lowered for this small store.
    code = (
        "import sys; from mnemo_cli import cmd_recall; cmd_recall.CATCH_UP_NOTICE = 100; "
        "from mnemo_cli.app import main; sys.argv[0] = 'mnemo'; main()"
    )
    primary, secondary = os.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("MNEMO_DIR", "MNEMO_AUTHOR")}
    process = subprocess.Popen(
        [sys.executable, "-c", code, "--repo", str(tmp_path / "s"), "--json", "search", "topic 3", "-k", "2"],
        stdout=subprocess.PIPE,
        stderr=secondary,
        env={**env, "TERM": "xterm", "COLUMNS": "100"},
    )
    os.close(secondary)
    terminal = b""
    while True:
        ready, _, _ = select.select([primary], [], [], 60)
        assert ready, "mnemo hung"
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the process closed the terminal (EIO)
            break
        if not chunk:
            break
        terminal += chunk
    os.close(primary)
    assert process.stdout is not None
    stdout = process.stdout.read()
    assert process.wait(timeout=60) == 0, terminal
    shown = terminal.decode()
    assert shown.startswith(
        "indexing 600 memories written since the last search (this may take a while) …\r\n"
    )
    assert "600/600" in shown  # the bar, at its end
    assert [json.loads(line)["id"] for line in stdout.splitlines()] and len(stdout.splitlines()) == 2

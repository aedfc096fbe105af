"""``mnemo threads`` and ``mnemo log --thread``: naming a LangGraph thread by its id (issue 22, item 9)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from support.cli_harness import CliStore, assert_error

from mnemosyne import Node, Repo
from mnemosyne.integrations.langgraph import MnemosyneSaver
from mnemosyne.model.thread_names import legacy_thread_branch


def _checkpoints(path: Path, thread_id: str, count: int) -> list[str]:
    """Save ``count`` checkpoints of a thread, each the child of the one before; their ids."""
    ids: list[str] = []
    with MnemosyneSaver.from_path(path) as saver:
        config: dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        for step in range(count):
            saved = saver.put(config, empty_checkpoint(), {"step": step, "source": "loop"}, {})  # type: ignore[arg-type]
            ids.append(saved["configurable"]["checkpoint_id"])
            config = saved
    return ids


@pytest.fixture
def store(tmp_path: Path) -> CliStore:
    return CliStore(tmp_path / "store.mnemo")


def test_threads_lists_each_thread_with_its_id_and_branch(store: CliStore) -> None:
    assert store.ok("threads") == ""  # no threads is not an error
    _checkpoints(store.path, "user@example.com", 2)
    _checkpoints(store.path, "chat-7", 1)
    lines = store.ok("threads").splitlines()
    assert [line.split("  ")[0] for line in lines] == ["threads/_user_40example.com", "threads/chat-7"]
    assert lines[0].endswith("  user@example.com") and lines[1].endswith("  chat-7")
    listed = store.lines("threads")
    assert [(t["thread_id"], t["branch"]) for t in listed] == [
        ("user@example.com", "threads/_user_40example.com"),
        ("chat-7", "threads/chat-7"),
    ]
    assert set(listed[0]) == {"thread_id", "branch", "commit"}
    assert listed[0]["commit"]["message"].startswith("checkpoint step 1 (loop)")
    (one,) = store.lines("threads", "user@example.com")
    assert one == listed[0]


def test_log_thread_names_a_thread_by_its_id(store: CliStore) -> None:
    _checkpoints(store.path, "chat 1", 3)
    oneline = store.ok("log", "--thread", "chat 1", "--oneline").splitlines()
    assert [line.split(" ", 1)[1] for line in oneline] == [
        "checkpoint step 2 (loop)",
        "checkpoint step 1 (loop)",
        "checkpoint step 0 (loop)",
    ]
    assert store.ok("log", "threads/_chat_201", "--oneline").splitlines() == oneline  # the branch it names
    assert len(store.lines("log", "--thread", "chat 1", "-n", "1")) == 1


def test_a_thread_from_before_readable_names_is_found_by_its_id(store: CliStore) -> None:
    # An old store: the thread's branch is a digest of its id, its checkpoints name it.
    legacy = legacy_thread_branch("user@example.com")
    assert legacy is not None
    with Repo.open(store.path) as repo:
        repo.branch(legacy, orphan=True)
        content = {"thread_id": "user@example.com", "checkpoint": ["json", ""], "checkpoint_id": "1"}
        repo.commit(
            [Node(id=f"{legacy}/_{'0' * 32}/1", content=content)], branch=legacy, message="checkpoint 1"
        )
    (listed,) = store.lines("threads")
    assert (listed["thread_id"], listed["branch"]) == ("user@example.com", legacy)
    assert store.ok("log", "--thread", "user@example.com", "--oneline").split(" ", 1)[1] == "checkpoint 1\n"


def test_an_unknown_thread_says_which_branch_it_would_have(store: CliStore) -> None:
    _checkpoints(store.path, "chat-7", 1)
    assert_error(
        store.run("threads", "a/b"), 3, "no thread 'a/b' in this tenant (its branch would be threads/_a_2Fb)"
    )
    assert_error(store.run("log", "--thread", "nobody"), 3, "its branch would be threads/nobody")


def test_log_takes_rev_or_thread_not_both(store: CliStore) -> None:
    _checkpoints(store.path, "chat-7", 1)
    assert_error(store.run("log", "main", "--thread", "chat-7"), 2, "give REV or --thread, not both")


def test_threads_help_explains_the_naming() -> None:
    from support.cli_harness import invoke

    shown = invoke("threads", "--help").stdout
    assert "threads/_user_40example.com" in shown and "mnemo log --thread" in shown
    assert "--thread THREAD_ID" in invoke("log", "--help").stdout

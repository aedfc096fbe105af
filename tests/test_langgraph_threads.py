"""Issue 22, items 9-11: threads you can find, commit messages that say what happened, a store that erases.

- A thread's branch is ``threads/`` and its id, escaped when not plain, readable and
  reversible (ADR 28); threads kept under the digest names of before are still
  found, written on, listed and deleted.
- Checkpoint commits name the step and source (and a fork what it forked from);
  store commits name the namespace and key.
- ``MnemosyneStore.delete(..., erase=True)`` (or ``MnemosyneStore(repo, erase=True)``)
  erases every version's bytes and leaves a redaction record.
"""

from __future__ import annotations

import asyncio
import hashlib
import operator
import re
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import PutOp
from support.tiers import examples

from mnemosyne import InvalidInput, Node, NotFound, Redacted, Repo, Thread
from mnemosyne.integrations.langgraph import MnemosyneSaver, MnemosyneStore
from mnemosyne.integrations.langgraph.namespaces import node_id
from mnemosyne.model.thread_names import (
    MAX_SEGMENT,
    legacy_thread_branch,
    thread_branch_name,
    thread_id_of,
    thread_segment,
)
from mnemosyne.model.validation import MAX_ID_BYTES, check_id
from mnemosyne.store.refs import check_branch_name

# -- 9. the branch of any thread id -----------------------------------------------------------


@pytest.mark.parametrize(
    ("thread_id", "branch"),
    [
        ("chat-7", "threads/chat-7"),  # plain ids keep the names they had
        ("1f0c2b8e-5d6a-6b1e-bffe-0242ac120002", "threads/1f0c2b8e-5d6a-6b1e-bffe-0242ac120002"),
        ("user@example.com", "threads/_user_40example.com"),
        ("chat 1", "threads/_chat_201"),
        ("a/b", "threads/_a_2Fb"),
        ("_private", "threads/__5Fprivate"),
        ("", "threads/_"),
        ("a..b", "threads/_a._2Eb"),
        ("end.", "threads/_end_2E"),
        ("x.lock", "threads/_x_2Elock"),
        ("café", "threads/_caf_C3_A9"),
    ],
)
def test_a_thread_id_has_a_readable_branch_that_reads_back(thread_id: str, branch: str) -> None:
    assert thread_branch_name(thread_id) == branch
    assert thread_id_of(branch) == thread_id
    check_branch_name(branch)


def test_a_long_thread_id_keeps_a_readable_prefix_and_a_digest() -> None:
    long_id = "user-" + "x" * 100 + "@example.com"
    segment = thread_segment(long_id)
    digest = hashlib.sha256(long_id.encode()).hexdigest()[:32]
    assert len(segment) == MAX_SEGMENT and segment.startswith("_user-xxx") and segment.endswith("_x" + digest)
    assert thread_id_of("threads/" + segment) is None  # the checkpoints name it (Repo.threads reads them)
    assert thread_segment("y" * 80) == "y" * 80 and thread_segment("y" * 81).endswith(
        "_x" + hashlib.sha256(b"y" * 81).hexdigest()[:32]
    )


@pytest.mark.parametrize(
    "branch",
    [
        "main",
        "threads/a/b",
        "threads/",
        "threads/_zz",
        "threads/_A",
        "threads/_ab_",
        "threads/_a_2f",
        "threads/_" + "a" * 32,
    ],
)
def test_names_the_encoding_never_makes_read_back_as_nothing(branch: str) -> None:
    assert thread_id_of(branch) is None


SEEN: dict[str, str] = {}


@given(st.text(max_size=120))
@settings(max_examples=examples(300), deadline=None)
def test_every_thread_id_gets_a_valid_distinct_branch(thread_id: str) -> None:
    branch = thread_branch_name(thread_id)
    check_branch_name(branch)
    segment = branch.removeprefix("threads/")
    assert "/" not in segment and len(segment) <= MAX_SEGMENT
    assert SEEN.setdefault(branch, thread_id) == thread_id  # never one branch for two ids
    decoded = thread_id_of(branch)
    assert decoded == thread_id or (decoded is None and "_x" in segment)
    # Never the digest name another id had before ADR 28, so old and new names never meet.
    assert not re.fullmatch(r"threads/_[0-9a-f]{32}", branch)
    legacy = legacy_thread_branch(thread_id)
    assert (legacy is None) == (segment == thread_id)
    # A thread's deepest node id (a pending write of a checkpoint in a namespace) stays a valid id.
    uuid_like = "1f0c2b8e-5d6a-6b1e-bffe-0242ac120002"
    deepest = f"{branch}/_{'0' * 32}/{uuid_like}/w/{uuid_like}/-1"
    check_id(deepest)
    assert len(deepest.encode()) <= MAX_ID_BYTES


def test_thread_ids_that_are_not_text_are_refused() -> None:
    with pytest.raises(InvalidInput, match="thread id must be text"):
        thread_branch_name(7)  # type: ignore[arg-type]
    with Repo.in_memory() as repo, pytest.raises(InvalidInput, match="thread id must be text"):
        repo.thread_branch(None)  # type: ignore[arg-type]


def _put(saver: MnemosyneSaver, thread: str, *, parent: Any = None, ns: str = "", **meta: Any) -> Any:
    configurable = {"thread_id": thread, "checkpoint_ns": ns}
    if parent is not None:
        configurable["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"n": len(meta)}
    checkpoint["channel_versions"] = {"n": 1}
    return saver.put({"configurable": configurable}, checkpoint, {"step": 0, **meta}, {"n": 1})


def test_the_saver_writes_a_thread_on_its_readable_branch_and_the_repo_finds_it() -> None:
    with Repo.in_memory() as repo:
        saver = MnemosyneSaver(repo)
        _put(saver, "user@example.com")
        _put(saver, "chat-7")
        assert {"threads/_user_40example.com", "threads/chat-7"} <= set(repo.branches())
        assert repo.thread_branch("user@example.com") == "threads/_user_40example.com"
        assert repo.thread_branch("nobody yet") == "threads/_nobody_20yet"  # the branch it would get
        listed = repo.threads()
        assert [(t.thread_id, t.branch) for t in listed] == [
            ("user@example.com", "threads/_user_40example.com"),
            ("chat-7", "threads/chat-7"),
        ]
        assert all(isinstance(t, Thread) and t.commit.id == repo.tip(t.branch) for t in listed)
        assert repo.thread("chat-7") == listed[1]
        with pytest.raises(NotFound, match=r"no thread 'nobody yet' .*threads/_nobody_20yet"):
            repo.thread("nobody yet")


def _as_before_adr_26(repo: Repo, thread_id: str) -> str:
    """Move a thread to the digest name the saver gave it before ADR 28, as an old store holds it.

    The layout under the branch is the same then and now (``threads/<segment>/<ns>/<checkpoint>``);
    only the thread's segment differs.
    """
    new = thread_branch_name(thread_id)
    legacy = legacy_thread_branch(thread_id)
    assert legacy is not None
    nodes = list(repo.nodes(at=new, prefix=new + "/"))
    repo.branch(legacy, orphan=True)
    repo.commit(
        put=[Node(id=legacy + n.id[len(new) :], content=n.content, provenance=n.provenance) for n in nodes],
        branch=legacy,
        message="as before ADR 28",
    )
    repo.delete_branch(new)
    return legacy


def test_a_thread_under_its_name_from_before_is_found_written_listed_and_deleted() -> None:
    with Repo.in_memory() as repo:
        saver = MnemosyneSaver(repo)
        first = _put(saver, "user@example.com", run_id="r1")
        second = _put(saver, "user@example.com", parent=first, run_id="r2")
        legacy = _as_before_adr_26(repo, "user@example.com")
        assert legacy == "threads/_" + hashlib.sha256(b"user@example.com").hexdigest()[:32]
        config = {"configurable": {"thread_id": "user@example.com"}}

        saver = MnemosyneSaver(repo)  # a new process: it knows nothing yet
        assert repo.thread_branch("user@example.com") == legacy
        latest = saver.get_tuple(config)
        assert latest is not None and latest.config == second
        assert [t.config for t in saver.list(config)] == [second, first]
        third = _put(saver, "user@example.com", parent=second)
        saver.put_writes(third, [("n", 9)], "task-1")
        assert "threads/_user_40example.com" not in repo.branches()  # written on where it is
        found = saver.get_tuple(config)
        assert found is not None and found.config == third and found.pending_writes == [("task-1", "n", 9)]
        (listed,) = repo.threads()
        assert (listed.thread_id, listed.branch) == ("user@example.com", legacy)  # read from a checkpoint

        saver.copy_thread("user@example.com", "copy of it")
        assert repo.thread_branch("copy of it") == "threads/_copy_20of_20it"
        assert len(list(saver.list({"configurable": {"thread_id": "copy of it"}}))) == 3
        saver.delete_thread("user@example.com")
        assert saver.get_tuple(config) is None and legacy not in repo.branches()
        assert [t.thread_id for t in repo.threads()] == ["copy of it"]


def test_deleting_a_thread_deletes_it_under_both_names() -> None:
    # Two writers, one from before ADR 28, each started the thread under its own name.
    with Repo.in_memory() as repo:
        saver = MnemosyneSaver(repo)
        _put(saver, "a b")
        legacy = _as_before_adr_26(repo, "a b")
        _put(MnemosyneSaver(repo), "c d")
        _put(saver, "c d")
        _as_before_adr_26(repo, "c d")
        saver.delete_thread("a b")
        assert legacy not in repo.branches()
        _put(saver, "e f")  # a new thread: the readable name
        assert repo.thread_branch("e f") == "threads/_e_20f"
        repo.branch(legacy, orphan=True)
        repo.commit([Node(id=legacy + "/x", content={"a": 1})], branch=legacy, message="old")
        _put(saver, "a b")  # the new name exists now too: both hold the thread
        saver.delete_thread("a b")
        assert not {legacy, "threads/_a_20b"} & set(repo.branches())


def test_a_legacy_branch_no_checkpoint_names_is_listed_without_an_id() -> None:
    with Repo.in_memory() as repo:
        legacy = legacy_thread_branch("lost thread")
        assert legacy is not None
        repo.branch(legacy, orphan=True)
        repo.commit(
            [Node(id=legacy + "/_" + "0" * 32 + "/cp/w/t/0", content={"task_id": "t"})],
            branch=legacy,
            message="w",
        )
        (listed,) = repo.threads()
        assert (listed.thread_id, listed.branch) == (None, legacy)


# -- 10. commit messages that say what happened -----------------------------------------------


def _first_lines(repo: Repo, branch: str) -> list[str]:
    return [c.message.splitlines()[0] for c in repo.log(at=branch)][::-1]


def test_checkpoint_commits_name_step_and_source_and_a_fork_what_it_forked_from() -> None:
    with Repo.in_memory() as repo:
        saver = MnemosyneSaver(repo)
        first = _put(saver, "t", step=-1, source="input", run_id="run-1")
        second = _put(saver, "t", parent=first, step=0, source="loop", run_id="run-1")
        _put(saver, "t", parent=second, step=1, source="loop", ns="child:1")
        fork = _put(saver, "t", parent=first, step=0, source="update")  # back to an older checkpoint
        old = first["configurable"]["checkpoint_id"]
        assert _first_lines(repo, "threads/t") == [
            "checkpoint step -1 (input)",
            "checkpoint step 0 (loop)",
            "checkpoint step 1 (loop) in child:1",
            f"fork of {old}: checkpoint step 0 (update)",
        ]
        (last, *_) = repo.log(at="threads/t")
        assert last.message.splitlines()[2:] == [
            f"checkpoint {fork['configurable']['checkpoint_id']}",
            f"parent {old}",
        ]
        *_, start = repo.log(at="threads/t")
        assert start.message.splitlines()[2:] == [f"checkpoint {old}", "run run-1"]


class Notes(TypedDict):
    notes: Annotated[list[str], operator.add]


def test_a_graph_s_time_travel_is_a_fork_in_the_log() -> None:
    builder = StateGraph(Notes)
    builder.add_node("write", lambda state: {"notes": ["wrote"]})
    builder.add_edge(START, "write")
    builder.add_edge("write", END)
    with Repo.in_memory() as repo:
        graph = builder.compile(checkpointer=MnemosyneSaver(repo))
        config = {"configurable": {"thread_id": "doc 1"}}
        graph.invoke({"notes": ["start"]}, config)
        history = list(graph.get_state_history(config))
        before = history[-2]  # the checkpoint after the input, before "write" ran
        graph.update_state(before.config, {"notes": ["edited"]})
        lines = [
            line for line in _first_lines(repo, repo.thread_branch("doc 1")) if not line.startswith("writes")
        ]
        assert lines[:3] == [
            "checkpoint step -1 (input)",
            "checkpoint step 0 (loop)",
            "checkpoint step 1 (loop)",
        ]
        assert (
            lines[3]
            == f"fork of {before.config['configurable']['checkpoint_id']}: checkpoint step 1 (update)"
        )


def test_a_task_s_writes_name_their_node_and_the_step_they_follow() -> None:
    builder = StateGraph(Notes)
    builder.add_node("draft", lambda state: {"notes": ["drafted"]})
    builder.add_node("review", lambda state: {"notes": ["reviewed"]})
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "review")
    builder.add_edge("review", END)
    with Repo.in_memory() as repo:
        saver = MnemosyneSaver(repo)
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "doc 2"}}
        graph.invoke({"notes": ["start"]}, config, durability="sync")  # each checkpoint before its writes
        graph.update_state(config, {"notes": ["edited"]})
        lines = _first_lines(repo, repo.thread_branch("doc 2"))  # oldest first
        writes = [(i, line) for i, line in enumerate(lines) if line.startswith("writes")]
        assert [line for _, line in writes] == [
            "writes of __start__ after step -1: notes, branch:to:draft",
            "writes of draft after step 0: notes, branch:to:review",
            "writes of review after step 1: notes",
            "writes of an update after step 2: notes",
        ]
        for i, line in writes:  # each comes after the checkpoint whose step it names
            # Not always right after it: LangGraph saves writes from a worker thread, and on a
            # busy machine they can reach the saver after the next checkpoint's put.
            step = line.split(" after step ")[1].split(":")[0]
            assert any(earlier.startswith(f"checkpoint step {step} ") for earlier in lines[:i]), lines
        # A saver that knows nothing of the thread reads the step.
        tip = saver.get_tuple(config)
        assert tip is not None
        MnemosyneSaver(repo).put_writes(tip.config, [("notes", ["by hand"])], "t-1", "~__pregel_pull, review")
        (last, *_) = repo.log(at=repo.thread_branch("doc 2"))
        assert last.message.splitlines()[0] == f"writes of review after step {tip.metadata['step']}: notes"
        assert last.message.splitlines()[2:] == [
            "task t-1",
            'path "~__pregel_pull, review"',
            f"checkpoint {tip.config['configurable']['checkpoint_id']}",
        ]
        # Writes saved before their checkpoint (LangGraph's default durability allows it) say so.
        ahead = {"configurable": {**tip.config["configurable"], "checkpoint_id": "next-checkpoint"}}
        saver.put_writes(ahead, [("notes", ["early"]), ("a", 1), ("b", 2), ("c", 3), ("d", 4)], "t-2")
        (last, *_) = repo.log(at=repo.thread_branch("doc 2"))
        assert last.message.splitlines()[0] == (
            "writes of task t-2 ahead of checkpoint next-checkpoint: notes, a, b, c and 1 more"
        )


def test_store_commits_name_the_namespace_and_key() -> None:
    with Repo.in_memory() as repo:
        store = MnemosyneStore(repo)
        store.put(("users", "mira"), "prefs", {"lang": "de"})
        store.put(("users", "mira"), "a/b c", {"v": 1})
        store.delete(("users", "mira"), "prefs")
        store.batch([PutOp(("users", "mira"), "x", {"v": 1}), PutOp(("users", "mira"), "a/b c", None)])
        store.batch(
            [PutOp(("docs",), f"d{i}", {"v": i}) for i in range(25)] + [PutOp(("users",), "y", {"v": 1})]
        )
        messages = [c.message for c in repo.log()][::-1]
        assert [m.splitlines()[0] for m in messages] == [
            'langgraph store: put ("users", "mira") / prefs',
            'langgraph store: put ("users", "mira") / "a/b c"',
            'langgraph store: delete ("users", "mira") / prefs',
            'langgraph store: put 1, delete 1 in ("users", "mira")',
            "langgraph store: put 26",
        ]
        assert messages[3].splitlines()[2:] == [
            'put ("users", "mira") / x',
            'delete ("users", "mira") / "a/b c"',
        ]
        listed = messages[4].splitlines()[2:]
        assert listed[0] == 'put ("docs") / d0' and len(listed) == 21 and listed[-1] == "and 6 more"


def test_store_messages_stay_on_one_line_whatever_the_names() -> None:
    with Repo.in_memory() as repo:
        store = MnemosyneStore(repo)
        store.put(("line\nbreak", "\u2028", 'q"uote'), "k\x85" + "z" * 300, {"v": 1})
        (commit, *_) = repo.log()
        assert len(commit.message.splitlines()) == 1 and len(commit.message) < 200
        assert commit.message.startswith(
            'langgraph store: put ("line\\nbreak", "\\u2028", "q\\"uote") / "k\\u0085zzz'
        )


def test_a_ttl_refresh_names_what_it_refreshed() -> None:
    with Repo.in_memory() as repo:
        store = MnemosyneStore(repo, ttl={"default_ttl": 5, "refresh_on_read": True})
        store.put(("users",), "session", {"v": 1})
        store.get(("users",), "session")
        (refresh, *_) = repo.log()
        assert refresh.message == 'langgraph store: refresh ttl of ("users") / session'


# -- 11. a store that erases ------------------------------------------------------------------


def _holding(path: Path, needle: bytes) -> list[str]:
    return [f.name for f in sorted(path.rglob("*")) if f.is_file() and needle in f.read_bytes()]


def test_delete_with_erase_leaves_no_byte_of_any_version(tmp_path: Path) -> None:
    canary = f"canary-{uuid.uuid4().hex}"
    path = tmp_path / "store.mnemo"
    with MnemosyneStore.from_path(path) as store:
        repo = store.repo
        store.put(("users", "mira"), "diary", {"text": f"dear diary, {canary} one"})
        store.put(("users", "mira"), "diary", {"text": f"{canary} two"})
        store.put(("users", "mira"), "kept", {"text": "nothing to hide"})
        assert store.search(("users",), query=canary)  # indexed for recall too
        assert _holding(path, canary.encode()) == ["data.mdb"]  # the check sees it

        store.delete(("users", "mira"), "diary", erase=True, reason="mira asked to be forgotten")

        assert (
            store.get(("users", "mira"), "diary") is None and store.history(("users", "mira"), "diary") == []
        )
        versions = repo.history(node_id(("users", "mira"), "diary"))
        assert [v.status for v in versions] == ["redacted", "redacted"]
        assert {(v.redaction.reason, v.redaction.author) for v in versions if v.redaction} == {
            ("mira asked to be forgotten", "langgraph")
        }
        (commit, *_) = repo.log()
        assert commit.message == 'langgraph store: erase ("users", "mira") / diary'
        assert all(item.key != "diary" for item in store.search(("users",), query=canary))
        repo.gc(grace=timedelta(0), compact=True)
    assert _holding(path, canary.encode()) == []
    with MnemosyneStore.from_path(path) as store:
        assert store.get(("users", "mira"), "kept") is not None and store.repo.fsck().ok


def test_a_store_that_erases_every_delete_and_its_async_and_batch_forms() -> None:
    with Repo.in_memory() as repo:
        store = MnemosyneStore(repo, erase=True)
        for key in ("a", "b", "c"):
            store.put(("u",), key, {"v": key})
        store.batch([PutOp(("u",), "a", None)])  # a graph's own delete (langmem's tools delete so)
        asyncio.run(store.adelete(("u",), "b"))
        store.delete(("u",), "c", erase=False)  # one call may keep history
        for key, status in (("a", "redacted"), ("b", "redacted"), ("c", "deleted")):
            assert repo.history(node_id(("u",), key))[0].status == status
        written = repo.history(node_id(("u",), "a"))[0].commit
        with pytest.raises(Redacted):
            repo.get(node_id(("u",), "a"), at=written)
        (record,) = repo.redactions([repo.history(node_id(("u",), "b"))[0].hash]).values()
        assert record.reason == "erased on delete from the LangGraph store"
        store.delete(("u",), "never written", erase=True)  # nothing to erase: quietly nothing


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"reason": "why"}, "only when erasing"),
        ({"erase": True, "reason": "  "}, "give a reason"),
        ({"erase": "yes"}, "erase must be True or False"),
    ],
)
def test_a_bad_erasing_delete_is_refused_before_anything_changes(
    kwargs: dict[str, Any], fragment: str
) -> None:
    with Repo.in_memory() as repo:
        store = MnemosyneStore(repo)
        store.put(("u",), "k", {"v": 1})
        before = repo.tip("main")
        with pytest.raises(InvalidInput, match=fragment):
            store.delete(("u",), "k", **kwargs)
        assert repo.tip("main") == before and store.get(("u",), "k") is not None
    with pytest.raises(InvalidInput, match="erase must be True or False"), Repo.in_memory() as repo:
        MnemosyneStore(repo, erase=1)  # type: ignore[arg-type]

"""``MnemosyneSaver``: LangGraph's conformance suite, the sync methods against LangGraph's
own ``InMemorySaver``, what a thread looks like in the store, and when deleted bytes leave it."""

from __future__ import annotations

import asyncio
import base64
import operator
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from langgraph.checkpoint.base import CheckpointTuple, empty_checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.types import ERROR
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command, interrupt
from support.tiers import examples

from mnemosyne import InvalidInput, Redacted, Repo
from mnemosyne.integrations.langgraph import MnemosyneStore
from mnemosyne.integrations.langgraph.saver import MnemosyneSaver
from mnemosyne.integrations.langgraph.threads import segment, thread_branch

BACKENDS = ["lmdb", "memory"]


def open_repo(backend: str, where: Path) -> Repo:
    return Repo.init(where / "store.mnemo") if backend == "lmdb" else Repo.in_memory()


@pytest.fixture(params=BACKENDS)
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MnemosyneSaver]:
    repo = open_repo(request.param, tmp_path)
    yield MnemosyneSaver(repo)
    repo.close()


# -- LangGraph's own conformance suite ---------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_langgraph_conformance_suite_passes_every_capability(
    backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stores: list[Repo] = []

    @checkpointer_test(name=f"MnemosyneSaver[{backend}]")
    async def fresh() -> AsyncIterator[MnemosyneSaver]:
        # A fresh store for each capability, as the suite asks.
        repo = open_repo(backend, tmp_path / str(len(stores)))
        stores.append(repo)
        yield MnemosyneSaver(repo)
        repo.close()

    report = asyncio.run(validate(fresh))
    with capsys.disabled():
        report.print_report()
        for name, result in sorted(report.results.items()):  # the per-capability counts
            print(f"  {name}: {result.tests_passed} passed, {result.tests_failed} failed")
    counts = {name: (r.tests_passed, r.tests_failed, r.failures) for name, r in report.results.items()}
    assert report.passed_all(), counts
    assert report.conformance_level() == "FULL" and len(counts) == 8 and len(stores) == 8
    assert all(passed > 0 and failed == 0 for passed, failed, _ in counts.values())


# -- the sync methods, held to LangGraph's InMemorySaver -------------------------------


def _normal(found: CheckpointTuple | None) -> Any:
    """What a tuple says, in a form two savers can be compared by."""
    if found is None:
        return None
    checkpoint = dict(found.checkpoint)
    return (
        found.config,
        checkpoint,
        dict(found.metadata),
        found.parent_config,
        [tuple(write) for write in found.pending_writes or []],
    )


THREADS = ["t1", "t/2 ünïcode", ""]
NAMESPACES = ["", "child:1"]
CHANNELS = ["messages", "count", "a/b"]


class AgainstInMemorySaver(RuleBasedStateMachine):
    """Random puts, writes, reads and deletes by two savers on one store: each answers as LangGraph's does."""

    @initialize()
    def start(self) -> None:
        repo = Repo.in_memory()
        # Two savers on one store, as two processes would be: each remembers what it wrote last.
        self.savers = [MnemosyneSaver(repo), MnemosyneSaver(repo)]
        self.ours = self.savers[0]
        self.theirs = InMemorySaver()
        self.stored: list[dict[str, Any]] = []  # configs of stored checkpoints
        self.version = 0

    @rule(
        thread=st.sampled_from(THREADS),
        ns=st.sampled_from(NAMESPACES),
        parent_pick=st.integers(min_value=-1, max_value=20),
        values=st.dictionaries(
            st.sampled_from(CHANNELS),
            st.one_of(st.integers(-(2**31), 2**31), st.text(max_size=5)),
            max_size=3,
        ),
        step=st.integers(min_value=-1, max_value=5),
        run=st.sampled_from([None, "run-a", "run-b"]),
        who=st.integers(0, 1),
    )
    def put(
        self,
        thread: str,
        ns: str,
        parent_pick: int,
        values: dict[str, Any],
        step: int,
        run: str | None,
        who: int,
    ) -> None:
        mine = [c for c in self.stored if c["configurable"]["thread_id"] == thread]
        mine = [c for c in mine if c["configurable"]["checkpoint_ns"] == ns]
        configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
        if mine and parent_pick >= 0:
            configurable["checkpoint_id"] = mine[parent_pick % len(mine)]["configurable"]["checkpoint_id"]
        checkpoint = empty_checkpoint()
        self.version += 1
        versions = {channel: f"{self.version:032}.0" for channel in values}
        checkpoint["channel_values"] = dict(values)
        checkpoint["channel_versions"] = dict(versions)
        metadata: dict[str, Any] = {"source": "loop", "step": step, "parents": {}}
        if run is not None:
            metadata["run_id"] = run
        config = {"configurable": configurable}
        got = self.savers[who].put(config, checkpoint, metadata, versions)  # type: ignore[arg-type]
        expected = self.theirs.put(config, checkpoint, metadata, versions)  # type: ignore[arg-type]
        assert got == expected
        self.stored.append(got)

    @rule(
        pick=st.integers(min_value=0, max_value=50),
        task=st.sampled_from(["task-1", "task/2"]),
        writes=st.lists(
            st.tuples(st.sampled_from([*CHANNELS, ERROR]), st.integers(min_value=0, max_value=9)), max_size=3
        ),
        path=st.sampled_from(["", "~start"]),
        who=st.integers(0, 1),
    )
    def put_writes(self, pick: int, task: str, writes: list[tuple[str, int]], path: str, who: int) -> None:
        if not self.stored:
            return
        config = self.stored[pick % len(self.stored)]
        self.savers[who].put_writes(config, writes, task, path)  # type: ignore[arg-type]
        self.theirs.put_writes(config, writes, task, path)  # type: ignore[arg-type]

    @rule(thread=st.sampled_from(THREADS), who=st.integers(0, 1))
    def delete_thread(self, thread: str, who: int) -> None:
        self.savers[who].delete_thread(thread)
        self.theirs.delete_thread(thread)
        self.stored = [c for c in self.stored if c["configurable"]["thread_id"] != thread]

    @rule(pick=st.integers(min_value=0, max_value=50))
    def get_one(self, pick: int) -> None:
        if self.stored:
            config = self.stored[pick % len(self.stored)]
            for saver in self.savers:
                assert _normal(saver.get_tuple(config)) == _normal(self.theirs.get_tuple(config))

    @invariant()
    def the_same_latest_and_lists(self) -> None:
        if not hasattr(self, "ours"):
            return
        for thread in THREADS:
            for ns in NAMESPACES:
                config = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
                expected = _normal(self.theirs.get_tuple(config))  # type: ignore[arg-type]
                for saver in self.savers:  # what each one knows is still true, or it reads again
                    assert _normal(saver.get_tuple(config)) == expected  # type: ignore[arg-type]
                listed = [_normal(t) for t in self.ours.list(config, limit=3)]  # type: ignore[arg-type]
                assert listed == [_normal(t) for t in self.theirs.list(config, limit=3)]  # type: ignore[arg-type]
        for meta in ({"step": 1}, {"run_id": "run-a", "source": "loop"}):
            ours_all = [t.config for t in self.ours.list(None, filter=meta)]
            theirs_all = [t.config for t in self.theirs.list(None, filter=meta)]
            assert sorted(map(repr, ours_all)) == sorted(map(repr, theirs_all))


TestAgainstInMemorySaver = AgainstInMemorySaver.TestCase
TestAgainstInMemorySaver.settings = settings(
    max_examples=examples(50),
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


# -- the sync extended methods -------------------------------------------------------------


def _put(
    saver: MnemosyneSaver, thread: str, values: dict[str, Any], *, parent: Any = None, **meta: Any
) -> Any:
    configurable = {"thread_id": thread, "checkpoint_ns": ""}
    if parent is not None:
        configurable["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = dict.fromkeys(values, 1)
    return saver.put(
        {"configurable": configurable}, checkpoint, {"step": 0, **meta}, dict.fromkeys(values, 1)
    )


def _ids(saver: MnemosyneSaver, thread: str) -> list[str]:
    return [
        t.config["configurable"]["checkpoint_id"] for t in saver.list({"configurable": {"thread_id": thread}})
    ]


def test_sync_copy_prune_and_delete_for_runs(saver: MnemosyneSaver) -> None:
    first = _put(saver, "src", {"n": 1}, run_id="r1")
    second = _put(saver, "src", {"n": 2}, parent=first, run_id="r2")
    saver.put_writes(second, [("n", 3)], "task")
    saver.copy_thread("src", "dst")
    assert (
        _ids(saver, "dst")
        == _ids(saver, "src")
        == [
            second["configurable"]["checkpoint_id"],
            first["configurable"]["checkpoint_id"],
        ]
    )
    copied = saver.get_tuple({"configurable": {"thread_id": "dst"}})
    assert copied is not None and copied.checkpoint["channel_values"] == {"n": 2}
    assert copied.pending_writes == [("task", "n", 3)]
    assert copied.config["configurable"]["thread_id"] == "dst"
    with pytest.raises(InvalidInput, match="already has checkpoints"):
        saver.copy_thread("src", "dst")

    saver.delete_for_runs(["r2"])
    assert _ids(saver, "src") == _ids(saver, "dst") == [first["configurable"]["checkpoint_id"]]
    latest = saver.get_tuple({"configurable": {"thread_id": "src"}})
    assert latest is not None and latest.checkpoint["channel_values"] == {"n": 1}  # the pointer moved back

    third = _put(saver, "src", {"n": 4}, parent=first)
    saver.prune(["src"], strategy="keep_latest")
    assert _ids(saver, "src") == [third["configurable"]["checkpoint_id"]]
    saver.prune(["src", "nobody"], strategy="delete")
    assert _ids(saver, "src") == [] and saver.get_tuple({"configurable": {"thread_id": "src"}}) is None
    with pytest.raises(InvalidInput, match="prune strategy"):
        saver.prune(["src"], strategy="everything")


def test_a_thread_is_a_branch_whose_log_is_its_history(saver: MnemosyneSaver) -> None:
    first = _put(saver, "chat-7", {"n": 1})
    _put(saver, "chat-7", {"n": 2}, parent=first)
    saver.put_writes(first, [("n", 5)], "task-1")
    repo = saver.repo
    assert thread_branch("chat-7") == "threads/chat-7" and "threads/chat-7" in repo.branches()
    messages = [c.message for c in repo.log(at="threads/chat-7")]
    assert len(messages) == 3 and messages[0].startswith("writes of task task-1 after step ")
    assert all(m.startswith("checkpoint ") for m in messages[1:])
    assert "main" not in [name for name, _ in repo.branch_tips()]  # threads never touch main


@pytest.mark.parametrize(
    "config",
    [{}, {"configurable": {}}, {"configurable": {"checkpoint_ns": ""}}],
    ids=["no configurable", "empty", "no thread"],
)
def test_a_config_without_a_thread_is_refused(saver: MnemosyneSaver, config: Any) -> None:
    with pytest.raises(InvalidInput, match="must name a thread"):
        saver.get_tuple(config)


def test_writes_need_their_checkpoint(saver: MnemosyneSaver) -> None:
    with pytest.raises(InvalidInput, match="checkpoint_id"):
        saver.put_writes({"configurable": {"thread_id": "t"}}, [("a", 1)], "task")


SEEN_SEGMENTS: dict[str, str] = {}


@given(st.lists(st.text(), max_size=5))
@settings(max_examples=examples(150), deadline=None)
def test_segments_are_valid_ids_and_branch_names_and_distinct(names: list[str]) -> None:
    repo = Repo.in_memory()
    for name in set(names):
        seg = segment(name)
        assert re.fullmatch(r"[A-Za-z0-9_.-]{1,80}", seg)
        assert SEEN_SEGMENTS.setdefault(seg, name) == name  # never two names for one segment
        repo.branch(thread_branch(name), orphan=True)  # a valid branch name
    assert segment("plain-id_1.x") == "plain-id_1.x"
    assert len({segment("a/b"), segment("a_b"), segment(""), segment("_"), segment("_x")}) == 5


# -- where deleted bytes go ------------------------------------------------------------------


def _stored_forms(canary: bytes) -> list[bytes]:
    """The canary as it sits in a stored value: as text (a JSON form), or base64 of serialized bytes."""
    forms = [canary]
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + canary)
        forms.append(encoded[4 if shift else 0 : -4])
    return forms


def _holds(path: Path, canary: bytes) -> bool:
    data = b"".join(f.read_bytes() for f in path.rglob("*") if f.is_file())
    return any(form in data for form in _stored_forms(canary))


def test_a_deleted_thread_leaves_the_file_at_gc_once_its_reflog_expires(tmp_path: Path) -> None:
    canary = f"canary-{uuid.uuid4().hex}".encode()
    path = tmp_path / "store.mnemo"
    with MnemosyneSaver.from_path(path) as saver:
        first = _put(saver, "secret-thread", {"diary": canary.decode()})
        saver.put_writes(first, [("diary", canary.decode() + " again")], "task")
        _put(saver, "kept-thread", {"diary": "nothing to hide"})
        assert _holds(path, canary)  # the check sees it
        saver.delete_thread("secret-thread")
        assert saver.get_tuple({"configurable": {"thread_id": "secret-thread"}}) is None
        assert list(saver.list({"configurable": {"thread_id": "secret-thread"}})) == []
        saver.repo.gc(grace=timedelta(0), compact=True)
        assert _holds(path, canary)  # the reflog still reaches it: as_of reads stay honest
        saver.repo.gc(grace=timedelta(0), expire_reflog=timedelta(0), compact=True)
        assert not _holds(path, canary)
        kept = saver.get_tuple({"configurable": {"thread_id": "kept-thread"}})
        assert kept is not None and kept.checkpoint["channel_values"] == {"diary": "nothing to hide"}
        assert saver.repo.fsck().ok


def test_with_erase_deleted_checkpoints_leave_a_live_thread_at_once(tmp_path: Path) -> None:
    canary = f"canary-{uuid.uuid4().hex}".encode()
    path = tmp_path / "store.mnemo"
    with MnemosyneSaver.from_path(path, erase=True) as saver:
        first = _put(saver, "t", {"diary": "hello"}, run_id="clean")
        second = _put(saver, "t", {"diary": canary.decode()}, parent=first, run_id="leaky")
        saver.put_writes(second, [("diary", canary.decode())], "task")
        _put(saver, "t", {"diary": "after"}, parent=second, run_id="clean")
        saver.delete_for_runs(["leaky"])
        assert [t.metadata["run_id"] for t in saver.list({"configurable": {"thread_id": "t"}})] == [
            "clean",
            "clean",
        ]
        saver.repo.gc(grace=timedelta(0), compact=True)
        assert not _holds(path, canary)
        assert saver.repo.fsck().ok
        # Without erase, prune only hides: the thread's history keeps what it had.
        plain = MnemosyneSaver(saver.repo)
        kept = _put(plain, "u", {"diary": "history " + canary.decode()})
        _put(plain, "u", {"diary": "newer"}, parent=kept)
        plain.prune(["u"], strategy="keep_latest")
        assert len(_ids(plain, "u")) == 1
        saver.repo.gc(grace=timedelta(0), compact=True)
        assert _holds(path, canary)


def test_from_path_creates_the_store_and_closes_it(tmp_path: Path) -> None:
    path = tmp_path / "new.mnemo"
    with MnemosyneSaver.from_path(path) as saver:
        stored = _put(saver, "t", {"x": 1})
    with MnemosyneSaver.from_path(path) as again:
        found = again.get_tuple(stored)
        assert found is not None and found.checkpoint["channel_values"] == {"x": 1}


# -- a compiled graph, end to end ------------------------------------------------------------


class DocState(TypedDict):
    notes: Annotated[list[str], operator.add]
    approved: bool


def _draft(state: DocState, store: BaseStore) -> dict[str, Any]:
    published = store.search(("docs",))  # long-term memory: what earlier runs published
    return {"notes": [f"draft {len(state['notes'])} after {len(published)} published"]}


def _review(state: DocState) -> dict[str, Any]:
    answer = interrupt({"question": "approve?", "notes": state["notes"]})
    return {"approved": answer == "yes", "notes": [f"review: {answer}"]}


def _publish(state: DocState, store: BaseStore) -> dict[str, Any]:
    outcome = "published" if state["approved"] else "shelved"
    store.put(("docs",), f"doc-{len(state['notes'])}", {"notes": state["notes"], "outcome": outcome})
    return {"notes": [outcome]}


def _graph(checkpointer: Any, store: BaseStore) -> Any:
    builder = StateGraph(DocState)
    builder.add_node("draft", _draft)
    builder.add_node("review", _review)
    builder.add_node("publish", _publish)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "review")
    builder.add_edge("review", "publish")
    builder.add_edge("publish", END)
    return builder.compile(checkpointer=checkpointer, store=store)


def _run(checkpointer: Any, store: BaseStore) -> dict[str, Any]:
    """Interrupt, resume, read the history, travel back and take the other answer."""
    graph = _graph(checkpointer, store)
    config = {"configurable": {"thread_id": "doc-1"}}
    first = graph.invoke({"notes": ["start"], "approved": False}, config)
    paused = graph.get_state(config)
    resumed = graph.invoke(Command(resume="yes"), config)
    history = list(graph.get_state_history(config))
    before_review = next(s for s in history if s.next == ("review",))
    # Time travel: fork from the checkpoint before the review, with an edited draft, and answer no.
    fork = graph.update_state(before_review.config, {"notes": ["edited"]}, as_node="draft")
    graph.invoke(None, fork)
    replay = graph.invoke(Command(resume="no"), config)
    return {
        "interrupted": [i.value for i in first["__interrupt__"]],
        "paused_next": paused.next,
        "resumed": resumed,
        "history": [(s.values, s.next, s.metadata["step"]) for s in history],
        "time_travel": replay,
        "final": graph.get_state(config).values,
        "checkpoints": len(history),
        "long_term": sorted((item.key, item.value["outcome"]) for item in store.search(("docs",))),
    }


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_graph_runs_interrupts_resumes_and_travels_back_as_on_langgraphs_saver_and_store(
    backend: str, tmp_path: Path
) -> None:
    repo = open_repo(backend, tmp_path)
    ours = _run(MnemosyneSaver(repo), MnemosyneStore(repo))
    theirs = _run(InMemorySaver(), InMemoryStore())
    assert ours == theirs
    assert [outcome for _, outcome in ours["long_term"]] == ["published", "shelved"]
    assert ours["resumed"]["notes"][-1] == "published" and ours["time_travel"]["notes"][-1] == "shelved"
    assert ours["paused_next"] == ("review",) and ours["checkpoints"] >= 5
    # The thread's whole life, including the fork made by time travel, is the branch's log.
    log = list(repo.log(at=thread_branch("doc-1")))
    assert len(log) >= ours["checkpoints"] and all(c.author == "langgraph" for c in log)
    repo.close()


# -- what a saver knows stays true ------------------------------------------------------------


def test_writes_saved_before_their_checkpoint_are_not_lost(saver: MnemosyneSaver) -> None:
    # LangGraph saves in the background and may save a task's writes before the checkpoint itself.
    first = _put(saver, "t", {"n": 1})
    saver.get_tuple({"configurable": {"thread_id": "t"}})  # the saver knows the thread now
    early = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "1fz-early"}}
    saver.put_writes(early, [("n", 2)], "task-1")
    checkpoint = empty_checkpoint()
    checkpoint["id"] = "1fz-early"
    saver.put({"configurable": {**first["configurable"]}}, checkpoint, {"step": 1}, {})
    latest = saver.get_tuple({"configurable": {"thread_id": "t"}})
    assert latest is not None and latest.checkpoint["id"] == "1fz-early"
    assert latest.pending_writes == [("task-1", "n", 2)]


def test_two_savers_starting_one_thread_keep_the_newer_checkpoint_latest(tmp_path: Path) -> None:
    with Repo.init(tmp_path / "s.mnemo") as repo:
        slow, fast = MnemosyneSaver(repo), MnemosyneSaver(repo)
        older, newer = empty_checkpoint(), empty_checkpoint()
        older["id"], newer["id"] = "1f0-0001", "1f0-0002"
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        real_branch = repo.branch
        calls = {"n": 0}

        def started_after_the_other_writer(name: str, **kwargs: Any) -> Any:
            calls["n"] += 1
            if calls["n"] == 1:  # slow read "no thread yet", then fast started it first
                fast.put(config, newer, {"step": 2}, {})  # type: ignore[arg-type]
            return real_branch(name, **kwargs)

        repo.branch = started_after_the_other_writer  # type: ignore[method-assign]
        slow.put(config, older, {"step": 1}, {})  # type: ignore[arg-type]
        repo.branch = real_branch  # type: ignore[method-assign]
        assert calls["n"] == 2  # each started the thread's branch; the slow one found it there
        for reader in (slow, fast, MnemosyneSaver(repo)):
            latest = reader.get_tuple(config)  # type: ignore[arg-type]
            assert latest is not None and latest.checkpoint["id"] == "1f0-0002"
        assert [t.checkpoint["id"] for t in fast.list(config)] == ["1f0-0002", "1f0-0001"]  # type: ignore[arg-type]


def test_an_erased_checkpoint_is_never_served_from_what_a_saver_knows(tmp_path: Path) -> None:
    with Repo.init(tmp_path / "s.mnemo") as repo:
        saver = MnemosyneSaver(repo)
        _put(saver, "t", {"secret": "passport X123"})
        config = {"configurable": {"thread_id": "t"}}
        assert saver.get_tuple(config) is not None  # known now
        (checkpoint,) = [n for n in repo.nodes(at="threads/t") if "checkpoint" in n.content]
        repo.forget(checkpoint.id, "the user asked", author="dpo")  # erasure leaves the thread's tip
        with pytest.raises(Redacted):
            saver.get_tuple(config)  # as a fresh saver: the version is gone, never its bytes
        with pytest.raises(Redacted):
            MnemosyneSaver(repo).get_tuple(config)


def test_thread_ids_that_are_not_text_work_everywhere(saver: MnemosyneSaver) -> None:
    key = uuid.UUID(int=7)
    stored = saver.put(
        {"configurable": {"thread_id": key, "checkpoint_ns": ""}}, empty_checkpoint(), {"step": 0}, {}
    )
    assert stored["configurable"]["thread_id"] == key  # as the config held it
    saver.copy_thread(key, 8)  # type: ignore[arg-type]
    assert saver.get_tuple({"configurable": {"thread_id": 8}}) is not None
    saver.prune([key], strategy="delete")
    saver.delete_thread(8)  # type: ignore[arg-type]
    assert saver.get_tuple({"configurable": {"thread_id": key}}) is None
    assert saver.get_tuple({"configurable": {"thread_id": "8"}}) is None


@pytest.mark.parametrize("name", ["w", "t"])
def test_prune_and_delete_for_runs_hold_for_a_thread_and_namespace_named_like_the_writes(
    saver: MnemosyneSaver, name: str
) -> None:
    # A write's id is threads/T/NS/CP/w/TASK/IDX: a thread or namespace named "w" must not look like one.
    stored = [_put(saver, name, {"n": i}, run_id=f"r{i}") for i in range(3)]
    saver.put_writes(stored[0], [("n", 9)], "task")
    for ns in ("w", ""):
        config = {"configurable": {"thread_id": name, "checkpoint_ns": ns}}
        checkpoint = empty_checkpoint()
        saver.put(config, checkpoint, {"step": 0, "run_id": "r0"}, {})  # type: ignore[arg-type]
    saver.delete_for_runs(["r0"])
    listed = list(saver.list({"configurable": {"thread_id": name}}))
    assert sorted(t.metadata["run_id"] for t in listed) == ["r1", "r2"]
    saver.prune([name], strategy="keep_latest")
    (kept,) = list(saver.list({"configurable": {"thread_id": name}}))
    assert kept.config["configurable"]["checkpoint_id"] == stored[2]["configurable"]["checkpoint_id"]
    assert kept.pending_writes == []

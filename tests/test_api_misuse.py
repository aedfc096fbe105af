"""Misuse of the Python API, and storage limits, meet a clear MnemoError.

Beside the hostile input of ``test_hostile``: arguments of the right type but a
wrong value (a forged commit id, a run id too long to key, zero attempts), a
handle that cannot do what it is asked (record reads read-only), values with no
JSON form, a derived index that lost entries, and every LMDB reader slot taken.
Each is an error of the library's own root, never ``ValueError``, ``TypeError``,
``StopIteration`` or an ``lmdb`` error, and the store is usable afterwards.
"""

from __future__ import annotations

import contextlib
import copy
import pickle
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest

from mnemosyne import Claim, CorruptObject, InvalidInput, MnemoError, Node, Repo, to_json, with_retry
from mnemosyne.model.objects import has_id
from mnemosyne.store.kv.base import Space

SCOPE = b"\x00\x00\x00\x00"  # the default tenant's key scope


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Repo]:
    with Repo.init(tmp_path / "store") as opened:
        opened.commit([Node(id="a", content="alpha")], message="1")
        yield opened


def test_a_forged_commit_id_is_invalid_input(repo: Repo) -> None:
    tip = repo.resolve("HEAD")
    for forged in ("zz", tip.id[:10], tip.id + "00", "g" * 64):
        with pytest.raises(InvalidInput, match="is not a commit id"):
            repo.get("a", at=msgspec.structs.replace(tip, id=forged))
    assert repo.get("a", at=msgspec.structs.replace(tip, id=tip.id.upper())) == Node(id="a", content="alpha")


@pytest.mark.parametrize(
    "run_id",
    ["", "x" * 257, "é" * 129, "bad\x00id", "lone\ud800surrogate"],
    ids=["empty", "257 bytes", "258 bytes of UTF-8", "NUL", "surrogate"],
)
def test_a_run_id_that_cannot_key_the_read_log_is_refused_before_searching(repo: Repo, run_id: str) -> None:
    with pytest.raises(InvalidInput, match="run_id"):
        repo.search("alpha", run_id=run_id)
    if len(run_id.encode(errors="replace")) > 256:
        assert repo.reads(run_id) == []  # earlier versions could record longer ones: listed
    else:
        with pytest.raises(InvalidInput, match="run_id"):
            repo.reads(run_id)
    longest = "x" * 256
    assert [h.id for h in repo.search("alpha", run_id=longest)] == ["a"]
    assert [r.ids for r in repo.reads(longest)] == [["a"]]


def test_a_read_only_handle_refuses_to_search_for_the_audit_log(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with Repo.init(path) as repo:
        repo.commit([Node(id="a", content="alpha")], message="1")
        repo.search("alpha")  # the recall indexes catch up while writable
    with Repo.open(path, readonly=True) as reader:
        with pytest.raises(InvalidInput, match="read-only handle cannot record reads"):
            reader.search("alpha", run_id="run-1")
        with pytest.raises(InvalidInput, match="read-only handle cannot record reads"):
            reader.context("alpha", run_id="run-1")
        assert [h.id for h in reader.search("alpha")] == ["a"]
        assert reader.reads("run-1") == []


@pytest.mark.parametrize("attempts", [0, -1, 1.5, True])
def test_with_retry_needs_a_whole_number_of_attempts(attempts: object) -> None:
    calls: list[int] = []
    with pytest.raises(InvalidInput, match="attempts"):
        with_retry(lambda: calls.append(1), attempts=attempts)  # type: ignore[arg-type]
    assert calls == []


def test_values_with_no_json_form_are_invalid_input() -> None:
    with pytest.raises(InvalidInput, match="no JSON form"):
        to_json({"when": object()})
    with pytest.raises(InvalidInput, match="lone surrogate"):
        to_json("text \ud800")
    cyclic: dict[str, object] = {}
    cyclic["self"] = cyclic
    with pytest.raises(InvalidInput, match="contains itself"):
        to_json(cyclic)
    assert to_json({"n": Node(id="a", content=1)}).startswith('{"n":{"id":"a"')


def test_a_node_without_an_id_keeps_it_generated_across_copies_and_pickles(repo: Repo) -> None:
    fresh = Node(content="no id yet")
    for copied in (copy.copy(fresh), copy.deepcopy(fresh), pickle.loads(pickle.dumps(fresh))):
        assert not has_id(copied) and copied == fresh
        (generated,) = repo.commit([copied], message="copied").put_ids
        assert generated and repo.get(generated) == Node(id=generated, content="no id yet")


def test_facts_over_a_change_index_that_lost_its_entries_say_the_index_is_damaged(repo: Repo) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    repo.commit(
        [Node(id="c", kind="claim", content=Claim("mira", "city", "Lisbon", valid_from=start))], message="2"
    )

    def drop_changes(txn: object) -> None:
        for key, _ in list(txn.scan(Space.INDEX, SCOPE + b"c")):  # type: ignore[attr-defined]
            txn.delete(Space.INDEX, key)  # type: ignore[attr-defined]

    repo.kv.transact(drop_changes)
    with pytest.raises(CorruptObject, match="fsck --repair"):
        repo.facts("mira", "city")
    assert not repo.fsck().ok
    assert repo.fsck(repair=True).repaired
    (fact,) = repo.facts("mira", "city")
    assert fact.node.id == "c"


def test_every_reader_slot_taken_is_a_mnemo_error_and_the_store_recovers(repo: Repo) -> None:
    with contextlib.ExitStack() as stack:
        opened = 0
        with pytest.raises(MnemoError, match="too many readers"):
            while opened < 10_000:
                stack.enter_context(repo.kv.read())
                opened += 1
        assert opened == repo.kv.env.max_readers()
    assert repo.get("a") == Node(id="a", content="alpha")
    repo.commit([Node(id="b", content="beta")], message="2")

"""The commit path's fast ways give exactly what the straightforward ones gave.

Bulk encoding and hashing, a tree built in one go from an empty one, the checks
every node passes when it is made or read back, and diffs that skip what two
chunks share: each is held to a plain reference, so no object's bytes, id or
tree root can drift. The bench's count of what a commit writes is checked here
too (its raw LMDB baseline writes the same keys).
"""

from __future__ import annotations

import importlib.util
import random
import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.tiers import examples

from mnemosyne import Node, Provenance, Repo
from mnemosyne.errors import InvalidInput
from mnemosyne.model import codec
from mnemosyne.model.objects import TreeChunk, decode_object
from mnemosyne.model.validation import check_id, check_text, has_control
from mnemosyne.store.kv.base import Space
from mnemosyne.store.prolly import EMPTY, Tree
from mnemosyne.store.tree_chunking import boundaries, is_boundary

SOME = settings(max_examples=examples(60), deadline=None)
FEW = settings(max_examples=examples(10), deadline=None)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
ids = st.from_regex(r"[a-zé0-9]{1,6}(/[a-z0-9.]{1,4}){0,3}", fullmatch=True).filter(
    lambda i: all(part not in (".", "..") for part in i.split("/"))
)
nodes = st.builds(
    lambda node_id, content, step, source: Node(
        id=node_id, content=content, provenance=Provenance(agent_step=step, source=source)
    ),
    ids,
    json_values,
    st.none() | st.integers(-(2**63), 2**64 - 1),
    st.none() | st.text(max_size=10),
)


@SOME
@given(st.lists(nodes, max_size=12))
def test_batch_encoding_and_hashing_are_one_at_a_time_s(batch):
    datas = codec.encode_all(batch)
    assert datas == [codec.encode(node) for node in batch]
    assert codec.object_ids(datas) == [codec.object_id(data) for data in datas]
    assert [oid.hex() for oid in codec.object_ids(datas)] == [node.hash for node in batch]


def test_batch_encoding_refuses_what_encoding_one_refuses():
    with pytest.raises(InvalidInput, match="cannot encode"):
        codec.encode_all(["fine", "\ud800"])


class Chunks:
    """Chunks kept as bytes (decoded on every load), and every chunk ever written."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}

    def put(self, chunk: TreeChunk) -> bytes:
        data = codec.encode(chunk)
        oid = codec.object_id(data)
        self.data[oid] = data
        return oid

    def load(self, oid: bytes) -> TreeChunk:
        chunk = decode_object(self.data[oid], oid)
        assert isinstance(chunk, TreeChunk)
        return chunk

    def tree(self) -> Tree:
        return Tree(self.load, self.put)


def key_of(i: int) -> str:
    return f"agents/a{i % 13:02d}/mem/{i:06d}"


def value_of(i: int, version: int = 0) -> bytes:
    return codec.object_id(f"{i}/{version}".encode())


@FEW
@given(st.integers(0, 2**32), st.integers(0, 3000), st.integers(1, 9))
def test_a_tree_filled_at_once_is_the_tree_grown_batch_by_batch(seed, size, batches):
    rng = random.Random(seed)
    entries = {key_of(i): value_of(i) for i in rng.sample(range(10 * size + 1), size)}
    edits = sorted(entries.items())
    absent = sorted({key_of(-1 - i) for i in range(3)})  # deleting what is not there changes nothing
    at_once = Chunks()
    root, changes = at_once.tree().update(at_once.put(EMPTY), sorted(edits + [(k, None) for k in absent]))
    assert changes == [(key, None, value) for key, value in edits]
    grown = Chunks()
    tree, step = grown.tree(), grown.put(EMPTY)
    keys = list(entries)
    rng.shuffle(keys)
    for part in range(batches):
        batch = sorted((key, entries[key]) for key in keys[part::batches])
        step, _ = tree.update(step, batch)
    assert step == root
    reachable = set()
    todo = [root]
    while todo:  # the chunks the one-go build wrote are exactly the tree's own
        oid = todo.pop()
        reachable.add(oid)
        chunk = at_once.load(oid)
        if chunk.level:
            todo.extend(chunk.values)
    assert set(at_once.data) - {codec.object_id(codec.encode(EMPTY))} <= reachable


@SOME
@given(st.lists(st.text(max_size=12), max_size=40), st.integers(0, 3))
def test_boundaries_in_one_loop_are_the_keys_that_end_a_chunk(keys, level):
    assert boundaries(keys, level) == [i for i, key in enumerate(keys) if is_boundary(key, level)]


@FEW
@given(st.integers(0, 2**32), st.sampled_from(["values", "inserts", "removals", "mixed"]))
def test_diffs_that_skip_shared_chunks_are_the_model_diff(seed, flavour):
    rng = random.Random(seed)
    store = Chunks()
    tree = store.tree()
    model = {key_of(i): value_of(i) for i in range(0, 6000, 2)}
    root = tree.build(sorted(model), [model[k] for k in sorted(model)])
    edits: dict[str, bytes | None] = {}
    for _ in range(rng.randrange(1, 60)):
        i = rng.randrange(0, 6000)
        kind = flavour if flavour != "mixed" else rng.choice(["values", "inserts", "removals"])
        if kind == "values" and key_of(i - i % 2) in model:
            edits[key_of(i - i % 2)] = value_of(i, 1)
        elif kind == "inserts":
            edits[key_of(i | 1)] = value_of(i | 1, 2)
        elif kind == "removals":
            edits[key_of(i - i % 2)] = None
    changed, _ = tree.update(root, sorted(edits.items()))
    after = dict(model)
    for key, value in edits.items():
        if value is None:
            after.pop(key, None)
        else:
            after[key] = value
    expected = sorted(
        (key, model.get(key), after.get(key))
        for key in model.keys() | after.keys()
        if model.get(key) != after.get(key)
    )
    assert list(tree.diff(root, changed)) == expected
    assert list(tree.diff(changed, root)) == [(key, new, old) for key, old, new in expected]


# -- the checks every node passes (made, or read back) ------------------------------

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def reference_check_id(node_id: str) -> bool:
    """The rules of check_id as written before its fast paths: True when accepted."""
    if not node_id:
        return False
    try:
        size = len(node_id.encode("utf-8"))
    except UnicodeEncodeError:
        return False
    if size > 256 or _CONTROL.search(node_id):
        return False
    return all(segment not in ("", ".", "..") for segment in node_id.split("/"))


texts = st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(["/", ".", "\x7f", "\x85", "\ud800"]))


@SOME
@given(texts)
def test_the_fast_text_checks_accept_and_refuse_what_the_rules_do(text):
    assert has_control(text) == (_CONTROL.search(text) is not None)
    try:
        check_id(text)
        accepted = True
    except InvalidInput:
        accepted = False
    assert accepted == reference_check_id(text)
    try:
        text.encode("utf-8")
        encodable = True
    except UnicodeEncodeError:
        encodable = False
    try:
        check_text(text, "text")
        assert encodable
    except InvalidInput:
        assert not encodable


@pytest.mark.parametrize(
    "fields",
    [
        {"agent_step": 2**64},
        {"agent_step": -(2**63) - 1},
        {"agent_step": True},
        {"agent_step": 1.0},
        {"observation": 5},
        {"source": b"bytes"},
        {"tool_call": "\ud800"},
    ],
)
def test_provenance_still_refuses_what_it_refused(fields):
    with pytest.raises(InvalidInput, match="provenance"):
        Provenance(**fields)


def test_provenance_takes_any_text_and_64_bit_steps():
    for step in (0, -(2**63), 2**64 - 1):
        assert Provenance(agent_step=step).agent_step == step
    assert Provenance(observation="é \u2028 ok", source="x").observation == "é \u2028 ok"


# -- commits --------------------------------------------------------------------------


def test_one_import_gives_the_tree_of_many_small_commits(tmp_path):
    batch = [Node(id=key_of(i), content=f"memory {i}") for i in range(2500)]
    with Repo.init(tmp_path / "once") as once, Repo.init(tmp_path / "steps") as steps:
        made = once.commit(batch, message="import")
        for start in range(0, len(batch), 400):
            steps.commit(batch[start : start + 400], message="part")
        assert made.tree == steps.resolve("HEAD").tree
        assert once.get(key_of(7)).hash == batch[7].hash


def test_a_duplicate_is_named_first_come(tmp_path):
    with Repo.init(tmp_path / "s") as repo:
        repo.commit([Node(id="a", content=1)])
        with pytest.raises(InvalidInput, match=r"^b appears more than once"):
            repo.commit([Node(id="b", content=1), Node(id="c", content=1), Node(id="b", content=2)])
        with pytest.raises(InvalidInput, match=r"^a appears more than once"):
            repo.commit([Node(id="a", content=2)], delete=["a"])
        assert [n.id for n in repo.nodes()] == ["a"]


def test_a_commit_stores_only_the_versions_that_enter_its_tree(tmp_path):
    with Repo.init(tmp_path / "s") as repo:
        repo.commit([Node(id="a", content=1), Node(id="b", content=1)])
        again = repo.commit([Node(id="a", content=1), Node(id="c", content=1)], delete=["b"])
        assert again.created and again.put_ids == ("a", "c") and again.deleted_ids == ("b",)
        assert len(repo.history("a")) == 1  # the same version again: no change recorded
        assert [n.id for n in repo.nodes()] == ["a", "c"]
        generated = repo.commit([Node(content="no id")])
        assert len(generated.put_ids) == 1 and repo.get(generated.put_ids[0]).content == "no id"


# -- the bench's raw baseline --------------------------------------------------------


def _harness():
    path = Path(__file__).resolve().parents[1] / "bench" / "harness.py"
    spec = importlib.util.spec_from_file_location("bench_harness", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_harness"] = module
    spec.loader.exec_module(module)
    return module


def test_the_bench_counts_every_key_a_commit_writes(tmp_path):
    """Its raw LMDB baseline writes "the same keys and sizes": nodes and index entries too."""
    harness = _harness()
    with Repo.init(tmp_path / "s") as repo:
        repo.commit([harness.make_node(i) for i in range(300)], message="import")

        def entries() -> int:
            with repo.kv.read() as txn:
                return sum(1 for space in Space for _ in txn.scan(space, b""))

        before = entries()
        with harness.ByteCounter() as counter:
            repo.commit([harness.make_node(i, 1) for i in range(0, 300, 30)], message="ten")
        # Every key is new but the branch's ref, which the commit moves (an overwrite).
        moved = sum(1 for space in counter.spaces if space is Space.REFS)
        assert moved == 1
        assert len(counter.puts) - moved == entries() - before
        nodes = sum(len(codec.encode(harness.make_node(i, 1))) for i in range(0, 300, 30))
        assert counter.bytes > nodes  # the nodes' bytes, and the chunks' and the commit's

"""Prolly trees against a sorted-dict model: history independence, reads, updates, diffs."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from support.tiers import examples

from mnemosyne.model import codec
from mnemosyne.model.objects import TreeChunk, decode_object
from mnemosyne.store.prolly import EMPTY, Tree
from mnemosyne.store.tree_chunking import AVERAGE_CHUNK, is_boundary

SMALL = settings(max_examples=examples(60), deadline=None)
LARGE = settings(max_examples=examples(8), deadline=None)


class ChunkStore:
    """Chunks kept as encoded bytes, decoded on every load; counts loads and new writes."""

    def __init__(self):
        self.data = {}
        self.loads = 0
        self.new_writes = 0

    def put(self, chunk):
        data = codec.encode(chunk)
        oid = codec.object_id(data)
        if oid not in self.data:
            self.new_writes += 1
            self.data[oid] = data
        return oid

    def load(self, oid):
        self.loads += 1
        chunk = decode_object(self.data[oid], oid)
        assert isinstance(chunk, TreeChunk)
        return chunk

    def tree(self):
        return Tree(self.load, self.put)


def value_of(key, version=0):
    return codec.object_id(f"{key}\x00{version}".encode())


def build(tree, model):
    keys = sorted(model)
    return tree.build(keys, [model[k] for k in keys])


def apply(tree, root, model, batch):
    """Apply one batch of (key, value-or-None) edits to the tree and the model; check the changes."""
    edits = dict(batch)  # last edit of a key wins
    ordered = sorted(edits.items())
    expected = [(k, model.get(k), v) for k, v in ordered if model.get(k) != v]
    root, changes = tree.update(root, ordered)
    assert changes == expected
    for k, v in ordered:
        if v is None:
            model.pop(k, None)
        else:
            model[k] = v
    return root


def model_diff(a, b):
    return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def chunks_by_level(store, root):
    """Every chunk of the tree, level by level from the root, each level in key order."""
    levels = []
    current = [store.load(root)]
    while True:
        levels.append(current)
        if current[0].level == 0:
            return levels
        current = [store.load(oid) for chunk in current for oid in chunk.values]


def check_shape(store, root, model):
    """The canonical shape: boundaries only at chunk ends, one chunk at the root, parents match."""
    levels = chunks_by_level(store, root)
    top = levels[0]
    assert len(top) == 1
    if top[0].level > 0:
        assert len(top[0].keys) > 1  # a single-child level is never the root
    for depth, chunks in enumerate(levels):
        level = chunks[0].level
        assert level == len(levels) - 1 - depth
        flat = [k for c in chunks for k in c.keys]
        assert flat == sorted(set(flat))
        for i, chunk in enumerate(chunks):
            assert chunk.level == level
            assert len(chunk.keys) == len(chunk.values)
            assert all(not is_boundary(k, level) for k in chunk.keys[:-1])
            if i < len(chunks) - 1:
                assert chunk.keys and is_boundary(chunk.keys[-1], level)
        if depth + 1 < len(levels):
            children = levels[depth + 1]
            assert [k for c in chunks for k in c.keys] == [c.keys[-1] for c in children]
    leaves = levels[-1]
    assert [(k, v) for c in leaves for k, v in zip(c.keys, c.values, strict=True)] == sorted(model.items())


# -- strategies ---------------------------------------------------------------------

keys = st.text(alphabet="ab/éz", min_size=1, max_size=4) | st.integers(0, 400).map(lambda n: f"n{n:03d}")
edit = st.tuples(keys, st.none() | st.integers(0, 2))
batches = st.lists(st.lists(edit, max_size=30), max_size=6)


def to_values(batch):
    return [(k, None if v is None else value_of(k, v)) for k, v in batch]


# -- history independence --------------------------------------------------------------


@SMALL
@given(batches, batches)
def test_same_entries_same_root_whatever_the_history(first, second):
    store = ChunkStore()
    tree = store.tree()
    model_a = {}
    root_a = tree.build([], [])
    for batch in first + second:
        root_a = apply(tree, root_a, model_a, to_values(batch))
    # another history: only the second part, from a different starting tree, then
    # patched to the same final state
    model_b = {}
    root_b = tree.build([], [])
    for batch in second:
        root_b = apply(tree, root_b, model_b, to_values(batch))
    fix = [(k, None) for k in model_b if k not in model_a] + list(model_a.items())
    root_b = apply(tree, root_b, model_b, fix)
    assert model_b == model_a
    assert root_a == root_b == build(tree, model_a)
    check_shape(store, root_a, model_a)


@LARGE
@given(st.integers(0, 2**32), st.integers(200, 2500))
def test_history_independence_on_large_trees(seed, size):
    rng = random.Random(seed)
    store = ChunkStore()
    tree = store.tree()
    universe = [f"users/u{rng.randrange(10**6):06d}/{rng.choice('abcdef')}" for _ in range(size)]
    final = {k: value_of(k, rng.randrange(3)) for k in universe if rng.random() < 0.7}
    # history 1: everything in one build
    expected = build(tree, final)
    # history 2: random batches of puts and deletes, in a random order, ending in ``final``
    model = {}
    root = tree.build([], [])
    noise = rng.sample(universe, len(universe) // 3)
    pending = [(k, value_of(k, 9)) for k in noise] + [(k, None) for k in noise if k not in final]
    pending += [(k, v) for k, v in final.items()]
    # keep each key's edits in order (noise first) but interleave keys randomly
    order = {}
    for position, (k, v) in enumerate(pending):
        order.setdefault(k, []).append((position, v))
    stream = []
    queues = {k: list(vs) for k, vs in order.items()}
    while queues:
        k = rng.choice(list(queues))
        stream.append((k, queues[k].pop(0)[1]))
        if not queues[k]:
            del queues[k]
    while stream:
        cut = rng.randint(1, max(1, len(stream) // 3))
        batch, stream = stream[:cut], stream[cut:]
        root = apply(tree, root, model, batch)
    assert model == final
    assert root == expected
    check_shape(store, root, final)
    # history 3: delete everything, then rebuild in two halves
    root = apply(tree, root, model, [(k, None) for k in list(model)])
    assert root == tree.build([], [])
    assert store.load(root) == EMPTY
    keys_sorted = sorted(final)
    half = len(keys_sorted) // 2
    root = apply(tree, root, model, [(k, final[k]) for k in keys_sorted[half:]])
    root = apply(tree, root, model, [(k, final[k]) for k in keys_sorted[:half]])
    assert root == expected


def test_empty_tree():
    store = ChunkStore()
    tree = store.tree()
    root = tree.build([], [])
    assert store.load(root) == EMPTY
    assert list(tree.items(root)) == []
    assert tree.get(root, "a") is None
    assert tree.count(root) == 0
    assert list(tree.diff(root, root)) == []
    # no-op edits change nothing and report nothing
    assert tree.update(root, [("a", None)]) == (root, [])
    assert tree.update(root, []) == (root, [])


# -- reads against the model -----------------------------------------------------------------


@st.composite
def populated(draw):
    entries = draw(st.dictionaries(keys, st.integers(0, 2), max_size=120))
    return {k: value_of(k, v) for k, v in entries.items()}


@SMALL
@given(populated(), st.lists(keys, max_size=20))
def test_get_matches_the_model(model, probes):
    store = ChunkStore()
    tree = store.tree()
    root = build(tree, model)
    for k in list(model) + probes:
        assert tree.get(root, k) == model.get(k)
    assert tree.count(root) == len(model)


@SMALL
@given(populated(), st.text(alphabet="ab/éz", max_size=3), st.text(alphabet="ab/éz0n", max_size=4))
def test_items_in_order_with_prefix_and_start(model, prefix, start):
    store = ChunkStore()
    tree = store.tree()
    root = build(tree, model)
    everything = sorted(model.items())
    assert list(tree.items(root)) == everything
    assert list(tree.items(root, prefix=prefix)) == [(k, v) for k, v in everything if k.startswith(prefix)]
    assert list(tree.items(root, start=start)) == [(k, v) for k, v in everything if k >= start]
    assert list(tree.items(root, prefix=prefix, start=start)) == [
        (k, v) for k, v in everything if k.startswith(prefix) and k >= start
    ]


@LARGE
@given(st.integers(0, 2**32))
def test_items_with_prefix_on_a_deep_tree(seed):
    rng = random.Random(seed)
    store = ChunkStore()
    tree = store.tree()
    model = {f"{rng.choice('abc')}/{rng.randrange(2000):04d}": value_of(str(i)) for i in range(2500)}
    root = build(tree, model)
    assert store.load(root).level >= 1
    for prefix in ("a/", "b/1", "c/19", "b/0000", "d"):
        start = f"{prefix}{rng.randrange(10)}"
        assert list(tree.items(root, prefix=prefix)) == sorted(
            (k, v) for k, v in model.items() if k.startswith(prefix)
        )
        assert list(tree.items(root, prefix=prefix, start=start)) == sorted(
            (k, v) for k, v in model.items() if k.startswith(prefix) and k >= start
        )


# -- updates ---------------------------------------------------------------------------------


@SMALL
@given(populated(), st.lists(edit, max_size=40))
def test_update_returns_exactly_the_real_changes(model, batch):
    store = ChunkStore()
    tree = store.tree()
    root = build(tree, model)
    before = dict(model)
    edits = to_values(batch)
    # include explicit no-ops: the same value again, and deleting an absent key
    edits += [(k, v) for k, v in list(before.items())[:3]]
    edits.append(("absent/key", None))
    root = apply(tree, root, model, edits)  # apply() asserts the change list
    assert sorted(tree.items(root)) == sorted(model.items())
    check_shape(store, root, model)


@SMALL
@given(populated())
def test_noop_update_keeps_the_root_and_writes_nothing(model):
    store = ChunkStore()
    tree = store.tree()
    root = build(tree, model)
    writes = store.new_writes
    same = [*sorted(model.items())[:10], ("zz/absent", None)]
    new_root, changes = tree.update(root, sorted(same))
    assert changes == []
    assert new_root == root
    assert store.new_writes == writes


@LARGE
@given(st.integers(0, 2**32), st.sampled_from(["values", "inside", "mixed"]))
def test_edits_in_place_give_the_canonical_tree(seed, flavour):
    """New values, and inserts or deletes inside chunks, are applied without re-cutting
    (the common commit); the result must still be the tree built from scratch."""
    rng = random.Random(seed)
    store = ChunkStore()
    tree = store.tree()
    model = {
        f"agents/a{rng.randrange(50):02d}/m{rng.randrange(10**7):07d}": value_of(str(i)) for i in range(3000)
    }
    root = build(tree, model)
    for round_ in range(8):
        known = sorted(model)
        batch = [(k, value_of(k, round_ + 1)) for k in rng.sample(known, 10)]
        if flavour != "values":
            batch += [
                (f"agents/a{rng.randrange(50):02d}/n{rng.randrange(10**7):07d}", value_of("new"))
                for _ in range(5)
            ]
            batch += [(k, None) for k in rng.sample(known, 5)]
        if flavour == "mixed":
            batch += [("zz/after/everything", value_of("last")), (known[0], None), (known[-1], None)]
        root = apply(tree, root, model, batch)
        assert root == build(tree, model)
    check_shape(store, root, model)


def test_small_edit_rewrites_few_chunks_and_diff_reads_few():
    rng = random.Random(7)
    store = ChunkStore()
    tree = store.tree()
    model = {f"k{rng.randrange(10**9):09d}": value_of(str(i)) for i in range(20000)}
    root = build(tree, model)
    height = store.load(root).level + 1
    assert height >= 3
    total = len(store.data)
    for _ in range(5):
        key = rng.choice(sorted(model))
        store.new_writes = 0
        new_root, changes = tree.update(root, [(key, value_of(key, 99))])
        assert [c[0] for c in changes] == [key]
        # O(log n): about one chunk per level, never a rewrite of the tree
        assert store.new_writes <= 2 * height
        assert store.new_writes < total / 100
        store.loads = 0
        assert list(tree.diff(root, new_root)) == [(key, model[key], value_of(key, 99))]
        # the diff skips every equal subtree: a few chunks per level on each side
        assert store.loads <= 4 * height


# -- diffs -----------------------------------------------------------------------------------


@SMALL
@given(populated(), st.lists(edit, max_size=40))
def test_diff_equals_the_model_diff(model, batch):
    store = ChunkStore()
    tree = store.tree()
    root_a = build(tree, model)
    model_a = dict(model)
    model_b = dict(model)
    root_b = apply(tree, root_a, model_b, to_values(batch))
    expected = model_diff(model_a, model_b)
    assert list(tree.diff(root_a, root_b)) == expected
    assert list(tree.diff(root_b, root_a)) == [(k, new, old) for k, old, new in expected]
    assert list(tree.diff(root_a, root_a)) == []


@SMALL
@given(populated(), populated())
def test_diff_of_unrelated_trees(model_a, model_b):
    store = ChunkStore()
    tree = store.tree()
    root_a = build(tree, model_a)
    root_b = build(tree, model_b)
    expected = model_diff(model_a, model_b)
    assert list(tree.diff(root_a, root_b)) == expected
    assert list(tree.diff(root_b, root_a)) == [(k, new, old) for k, old, new in expected]


@LARGE
@given(st.integers(0, 2**32), st.integers(1, 200))
def test_diff_on_large_trees(seed, edits):
    rng = random.Random(seed)
    store = ChunkStore()
    tree = store.tree()
    model_a = {f"m/{rng.randrange(10**6):06d}": value_of(str(i)) for i in range(3000)}
    root_a = build(tree, model_a)
    model_b = dict(model_a)
    batch = []
    for _ in range(edits):
        roll = rng.random()
        if roll < 0.4:
            batch.append((rng.choice(list(model_a)), None))
        elif roll < 0.7:
            k = rng.choice(list(model_a))
            batch.append((k, value_of(k, 5)))
        else:
            k = f"m/{rng.randrange(10**6):06d}"
            batch.append((k, value_of(k, 6)))
    root_b = apply(tree, root_a, model_b, batch)
    expected = model_diff(model_a, model_b)
    assert list(tree.diff(root_a, root_b)) == expected
    assert list(tree.diff(root_b, root_a)) == [(k, new, old) for k, old, new in expected]


# -- chunk sizes -----------------------------------------------------------------------------


def test_average_chunk_size():
    rng = random.Random(2024)
    store = ChunkStore()
    tree = store.tree()
    model = {f"users/u{rng.randrange(10**8):08d}/note": value_of(str(i)) for i in range(4000)}
    root = build(tree, model)
    leaves = chunks_by_level(store, root)[-1]
    average = len(model) / len(leaves)
    assert 16 <= average <= 32
    assert AVERAGE_CHUNK == 24
    # boundaries come from the key alone: the same key set cut by a different builder
    # (incremental inserts) gives the same leaves
    model2 = {}
    root2 = tree.build([], [])
    for k in rng.sample(sorted(model), len(model)):
        root2 = apply(tree, root2, model2, [(k, model[k])])
        if len(model2) >= 400:
            break
    rest = [(k, model[k]) for k in sorted(model) if k not in model2]
    root2 = apply(tree, root2, model2, rest)
    assert root2 == root

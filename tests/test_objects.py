"""Canonical objects: golden vectors, validation refusals, round trips."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.tiers import examples

from mnemosyne import Claim, CorruptObject, InvalidInput, Node, Provenance
from mnemosyne.model import codec
from mnemosyne.model.objects import CommitObject, TreeChunk, decode_object
from mnemosyne.model.validation import MAX_DEPTH, MAX_ID_BYTES

SETTINGS = settings(max_examples=examples(60), deadline=None)

# -- golden vectors ------------------------------------------------------------
#
# Computed once with the format as first released and pinned here: if one of these
# changes, every hash in every existing store changes with it. Do not "fix" a failing
# golden vector by pasting new values; add a new format version instead.

GOLDEN_NOTE = Node(
    id="users/mira/passport_deadline",
    content="2026-07-15",
    provenance=Provenance(agent_step=3, observation="e1", tool_call=None, source="chat"),
    event_time=datetime(2026, 6, 1, 9, tzinfo=UTC),
    meta={"sensitivity": "personal"},
)
GOLDEN_NOTE_HEX = (
    "98a66e6f64654031bc75736572732f6d6972612f70617373706f72745f646561646c696e65aa"
    "323032362d30372d3135a46e6f74659403a26531c0a463686174d6ff6a1d4a1081ab73656e73"
    "69746976697479a8706572736f6e616cc0"
)
GOLDEN_NOTE_ID = "d45bc8121c45309b932cf330689c56b27da2489c752c019a7331942fa0d65c6f"

GOLDEN_CLAIM = Node(
    id="acme/mira/passport_deadline/e2",
    kind="claim",
    content=Claim(
        "mira",
        "passport_deadline",
        "2026-06-30",
        datetime(2026, 6, 3, 10, tzinfo=UTC),
        valid_to=datetime(2026, 12, 31, tzinfo=UTC),
        confidence=0.9,
        evidence=("e2",),
    ),
)
GOLDEN_CLAIM_HEX = (
    "98a66e6f64654031be61636d652f6d6972612f70617373706f72745f646561646c696e652f65"
    "3298a7636c61696d4031a46d697261b170617373706f72745f646561646c696e65aa32303236"
    "2d30362d3330d6ff6a1ffb20d6ff6b359b00cb3feccccccccccccd91a26532a5636c61696d94"
    "c0c0c0c0c0c0c0"
)
GOLDEN_CLAIM_ID = "fcbe9982fc4fffc3aa82a0997ff264bc09720a92af8a7d4963e896a198d76b41"

GOLDEN_CHUNK = TreeChunk(0, ("a", "b/c"), (bytes(range(32)), bytes(range(32, 64))))
GOLDEN_CHUNK_HEX = (
    "94a67472656540310092a161a3622f6392c420000102030405060708090a0b0c0d0e0f101112"
    "131415161718191a1b1c1d1e1fc420202122232425262728292a2b2c2d2e2f30313233343536"
    "3738393a3b3c3d3e3f"
)
GOLDEN_CHUNK_ID = "62c25bac4e500198fbb2040ddb3f7c2eaa50bba0601de8cf7fa22db257fb1d6a"

GOLDEN_COMMIT = CommitObject(
    bytes(32),
    (bytes([1]) * 32,),
    datetime(2026, 6, 4, 12, 30, 15, 123456, tzinfo=UTC),
    "agent-7",
    "e2",
    {"run": "r1"},
)
GOLDEN_COMMIT_HEX = (
    "98a8636f6d6d69744031c42000000000000000000000000000000000000000000000000000000000"
    "0000000091c4200101010101010101010101010101010101010101010101010101010101010101"
    "d7ff1d6f28006a216fd7a76167656e742d37a2653281a372756ea2723190"
)
GOLDEN_COMMIT_ID = "e7ab70e418c7a55552266fc3265121a35251775908374d5d8c0778d5fddf9901"

GOLDEN_MINIMAL = Node(id="k", content="v")
GOLDEN_MINIMAL_HEX = "98a66e6f64654031a16ba176a46e6f746594c0c0c0c0c0c0c0"
GOLDEN_MINIMAL_ID = "9ea4f6fdb5fa013029e39c5c06f2a8fbd4bfdc82f3978437266abb667df49afc"

# Defaults are written too (array-like encoding keeps every field, even with omit_defaults).
GOLDEN_CLAIM_DEFAULTS = Node(
    id="c/1", kind="claim", content=Claim("mira", "city", "Oslo", datetime(2026, 6, 3, 10, tzinfo=UTC))
)
GOLDEN_CLAIM_DEFAULTS_HEX = (
    "98a66e6f64654031a3632f3198a7636c61696d4031a46d697261a463697479a44f736c6fd6ff6a1ffb20c0c090a5"
    "636c61696d94c0c0c0c0c0c0c0"
)
GOLDEN_CLAIM_DEFAULTS_ID = "4d6cdf4a1c609a7869708d9ea01bf4eaf8949694e36abce07ca62e16b8be0df3"

GOLDEN_ROOT_COMMIT = CommitObject(bytes(32), (), datetime(2026, 6, 4, tzinfo=UTC), "a", "m")
GOLDEN_ROOT_COMMIT_HEX = (
    "98a8636f6d6d69744031c4200000000000000000000000000000000000000000000000000000000000000000"
    "90d6ff6a20c000a161a16dc090"
)
GOLDEN_ROOT_COMMIT_ID = "085a09d0196900a2b270c82e26b03f62c98598769b233f2e8a3f44c73eebff80"

GOLDEN = [
    pytest.param(GOLDEN_NOTE, GOLDEN_NOTE_HEX, GOLDEN_NOTE_ID, id="note"),
    pytest.param(GOLDEN_CLAIM, GOLDEN_CLAIM_HEX, GOLDEN_CLAIM_ID, id="claim"),
    pytest.param(GOLDEN_CHUNK, GOLDEN_CHUNK_HEX, GOLDEN_CHUNK_ID, id="tree-chunk"),
    pytest.param(GOLDEN_COMMIT, GOLDEN_COMMIT_HEX, GOLDEN_COMMIT_ID, id="commit"),
    pytest.param(GOLDEN_MINIMAL, GOLDEN_MINIMAL_HEX, GOLDEN_MINIMAL_ID, id="minimal-note"),
    pytest.param(
        GOLDEN_CLAIM_DEFAULTS, GOLDEN_CLAIM_DEFAULTS_HEX, GOLDEN_CLAIM_DEFAULTS_ID, id="claim-defaults"
    ),
    pytest.param(
        GOLDEN_ROOT_COMMIT, GOLDEN_ROOT_COMMIT_HEX, GOLDEN_ROOT_COMMIT_ID, id="root-commit-defaults"
    ),
]


@pytest.mark.parametrize(("obj", "hex_bytes", "oid"), GOLDEN)
def test_golden_bytes(obj, hex_bytes, oid):
    assert codec.encode(obj).hex() == hex_bytes


@pytest.mark.parametrize(("obj", "hex_bytes", "oid"), GOLDEN)
def test_golden_ids(obj, hex_bytes, oid):
    assert codec.object_id(bytes.fromhex(hex_bytes)).hex() == oid
    if isinstance(obj, Node):
        assert obj.hash == oid


@pytest.mark.parametrize(("obj", "hex_bytes", "oid"), GOLDEN)
def test_golden_bytes_decode_to_the_object(obj, hex_bytes, oid):
    decoded = decode_object(bytes.fromhex(hex_bytes), bytes.fromhex(oid))
    assert type(decoded) is type(obj)
    assert decoded == obj


def test_golden_note_is_timezone_independent():
    same_moment = datetime(2026, 6, 1, 11, tzinfo=timezone(timedelta(hours=2)))
    node = msgspec.structs.replace(GOLDEN_NOTE, event_time=same_moment)
    assert node.event_time == GOLDEN_NOTE.event_time
    assert node.event_time.utcoffset() == timedelta(0)
    assert node.hash == GOLDEN_NOTE_ID


def test_golden_claim_from_json_shape_hashes_the_same():
    node = Node(
        id="acme/mira/passport_deadline/e2",
        kind="claim",
        content={
            "subject": "mira",
            "predicate": "passport_deadline",
            "value": "2026-06-30",
            "valid_from": "2026-06-03T10:00:00Z",
            "valid_to": "2026-12-31T00:00:00Z",
            "confidence": 0.9,
            "evidence": ["e2"],
        },
    )
    assert node == GOLDEN_CLAIM
    assert node.hash == GOLDEN_CLAIM_ID


# -- validation refusals -----------------------------------------------------------

NAIVE = datetime(2026, 6, 1, 9)
AWARE = datetime(2026, 6, 1, 9, tzinfo=UTC)


@pytest.mark.parametrize(
    "bad_id",
    [
        pytest.param("", id="empty"),
        pytest.param("a" * (MAX_ID_BYTES + 1), id="too-long-ascii"),
        pytest.param("é" * (MAX_ID_BYTES // 2) + "a", id="too-long-utf8"),
        pytest.param("a//b", id="empty-segment"),
        pytest.param("/a", id="leading-slash"),
        pytest.param("a/", id="trailing-slash"),
        pytest.param("/", id="only-slash"),
        pytest.param(".", id="dot"),
        pytest.param("..", id="dotdot"),
        pytest.param("a/./b", id="dot-segment"),
        pytest.param("a/../b", id="dotdot-segment"),
        pytest.param("a\x00b", id="nul"),
        pytest.param("a\nb", id="newline"),
        pytest.param("a\tb", id="tab"),
        pytest.param("a\x7fb", id="del"),
        pytest.param("a\x85b", id="c1-control"),
        pytest.param("a\ud800", id="lone-high-surrogate"),
        pytest.param("\udc00b", id="lone-low-surrogate"),
    ],
)
def test_bad_ids_refused(bad_id):
    with pytest.raises(InvalidInput):
        Node(id=bad_id, content="x")  # the empty id too: only an omitted one is generated (at commit)


def test_an_empty_id_is_refused_and_an_omitted_one_has_no_hash_yet():
    with pytest.raises(InvalidInput, match="id must not be empty"):
        Node(id="", content="x")
    unnamed = Node(content="x")  # allowed: the commit gives it an id
    with pytest.raises(InvalidInput):
        _ = unnamed.hash


@pytest.mark.parametrize("bad_id", [None, 5, b"abc"])
def test_non_string_ids_refused(bad_id):
    with pytest.raises(InvalidInput):
        Node(id=bad_id, content="x")


@pytest.mark.parametrize(
    "good_id",
    ["a", "a/b/c", "a" * MAX_ID_BYTES, "é" * (MAX_ID_BYTES // 2), "...", "a/.b/c.", "ünï/cødé", "a b"],
)
def test_edge_ids_accepted(good_id):
    assert Node(id=good_id, content="x").id == good_id


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize(
    "where",
    ["content", "content-list", "content-dict", "content-deep", "meta", "meta-deep", "claim-value"],
)
def test_non_finite_numbers_refused(bad, where):
    with pytest.raises(InvalidInput):
        if where == "content":
            Node(id="k", content=bad)
        elif where == "content-list":
            Node(id="k", content=[1, bad])
        elif where == "content-dict":
            Node(id="k", content={"x": bad})
        elif where == "content-deep":
            Node(id="k", content={"x": [{"y": [bad]}]})
        elif where == "meta":
            Node(id="k", content="v", meta={"score": bad})
        elif where == "meta-deep":
            Node(id="k", content="v", meta={"a": {"b": [bad]}})
        else:
            Claim("s", "p", {"v": bad}, AWARE)


@pytest.mark.parametrize(
    "content",
    [
        pytest.param({1: "a"}, id="int-key"),
        pytest.param({None: "a"}, id="none-key"),
        pytest.param({("a",): 1}, id="tuple-key"),
        pytest.param({"ok": {2.5: 1}}, id="nested-float-key"),
        pytest.param([{"a": {True: 1}}], id="bool-key-in-list"),
    ],
)
def test_non_string_map_keys_refused(content):
    with pytest.raises(InvalidInput):
        Node(id="k", content=content)
    with pytest.raises(InvalidInput):
        Node(id="k", content="v", meta={"m": content})


def test_non_string_meta_key_refused():
    with pytest.raises(InvalidInput):
        Node(id="k", content="v", meta={1: "a"})


@pytest.mark.parametrize("meta", [["a"], "text", 5])
def test_meta_must_be_a_map(meta):
    with pytest.raises(InvalidInput):
        Node(id="k", content="v", meta=meta)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: Node(id="k", content="v", event_time=NAIVE), id="event_time"),
        pytest.param(lambda: Node(id="k", content="v", expires_at=NAIVE), id="expires_at"),
        pytest.param(lambda: Claim("s", "p", 1, NAIVE), id="claim-valid_from"),
        pytest.param(lambda: Claim("s", "p", 1, AWARE, valid_to=NAIVE), id="claim-valid_to"),
        pytest.param(
            lambda: Node(
                id="k",
                kind="claim",
                content={"subject": "s", "predicate": "p", "value": 1, "valid_from": "2026-06-01T09:00:00"},
            ),
            id="claim-json-naive-string",
        ),
        pytest.param(lambda: Node(id="k", content="v", event_time="2026-06-01"), id="event_time-string"),
    ],
)
def test_naive_or_non_datetimes_refused(make):
    with pytest.raises(InvalidInput):
        make()


def test_out_of_range_datetimes_refused_as_invalid_input():
    # Converting to UTC can leave the datetime range; that must be InvalidInput, not OverflowError.
    with pytest.raises(InvalidInput):
        Node(id="k", content="v", event_time=datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5))))
    with pytest.raises(InvalidInput):
        Node(id="k", content="v", expires_at=datetime(9999, 12, 31, 23, tzinfo=timezone(timedelta(hours=-5))))


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, 10**30, -(10**30)])
def test_ints_beyond_64_bits_refused(value):
    with pytest.raises(InvalidInput):
        Node(id="k", content=value)
    with pytest.raises(InvalidInput):
        Node(id="k", content={"n": [value]})
    with pytest.raises(InvalidInput):
        Node(id="k", content="v", meta={"n": value})
    with pytest.raises(InvalidInput):
        Claim("s", "p", value, AWARE)


@pytest.mark.parametrize("value", [2**64 - 1, -(2**63), 0, -1, 2**63])
def test_64_bit_boundary_ints_round_trip(value):
    node = Node(id="k", content={"n": value})
    decoded = decode_object(codec.encode(node), b"")
    assert decoded == node
    assert decoded.content["n"] == value


@pytest.mark.parametrize(
    "content",
    [
        pytest.param({1, 2}, id="set"),
        pytest.param(b"bytes", id="bytes"),
        pytest.param(bytearray(b"x"), id="bytearray"),
        pytest.param(object(), id="object"),
        pytest.param((1, 2), id="tuple"),
        pytest.param(AWARE, id="datetime"),
        pytest.param([1, {"a": {3}}], id="nested-set"),
        pytest.param(1 + 2j, id="complex"),
    ],
)
def test_non_json_content_refused(content):
    with pytest.raises(InvalidInput):
        Node(id="k", content=content)


def _nested_lists(depth):
    value = 0
    for _ in range(depth):
        value = [value]
    return value


def _nested_maps(depth):
    value = 0
    for _ in range(depth):
        value = {"a": value}
    return value


def test_nesting_up_to_max_depth_accepted_and_round_trips():
    for value in (_nested_lists(MAX_DEPTH), _nested_maps(MAX_DEPTH)):
        node = Node(id="k", content=value)
        assert decode_object(codec.encode(node), b"") == node
    Node(id="k", content="v", meta=_nested_maps(MAX_DEPTH))


def test_nesting_beyond_max_depth_refused():
    with pytest.raises(InvalidInput):
        Node(id="k", content=_nested_lists(MAX_DEPTH + 1))
    with pytest.raises(InvalidInput):
        Node(id="k", content=_nested_maps(MAX_DEPTH + 1))
    with pytest.raises(InvalidInput):
        Node(id="k", content="v", meta=_nested_maps(MAX_DEPTH + 1))
    with pytest.raises(InvalidInput):
        Claim("s", "p", _nested_lists(MAX_DEPTH + 1), AWARE)


@pytest.mark.parametrize(
    "text",
    ["\ud800", "ok\udfff", "\udc00\ud800"],
)
def test_lone_surrogates_refused_everywhere(text):
    with pytest.raises(InvalidInput):
        Node(id="k", content=text)
    with pytest.raises(InvalidInput):
        Node(id="k", content={text: 1})
    with pytest.raises(InvalidInput):
        Node(id="k", content="v", meta={"m": text})
    with pytest.raises(InvalidInput):
        Node(id="k", content="v", provenance=Provenance(source=text))
    with pytest.raises(InvalidInput):
        Claim(text, "p", 1, AWARE)
    with pytest.raises(InvalidInput):
        Claim("s", "p", 1, AWARE, evidence=(text,))


def test_provenance_types_checked():
    with pytest.raises(InvalidInput):
        Provenance(agent_step="3")
    with pytest.raises(InvalidInput):
        Provenance(agent_step=True)
    with pytest.raises(InvalidInput):
        Provenance(observation=5)
    with pytest.raises(InvalidInput):
        Node(id="k", content="v", provenance={"agent_step": 1})


def test_kind_rules():
    with pytest.raises(InvalidInput):
        Node(id="k", content="v", kind="fact")
    with pytest.raises(InvalidInput):
        Node(id="k", content=Claim("s", "p", 1, AWARE))  # a Claim needs kind="claim"
    with pytest.raises(InvalidInput):
        Node(id="k", kind="claim", content="just text")
    with pytest.raises(InvalidInput):
        Node(id="k", kind="claim", content={"subject": "s", "predicate": "p"})  # no value, valid_from


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: Claim("s", "p", 1, AWARE, valid_to=AWARE), id="valid_to-equal"),
        pytest.param(
            lambda: Claim("s", "p", 1, AWARE, valid_to=AWARE - timedelta(microseconds=1)),
            id="valid_to-before",
        ),
        pytest.param(lambda: Claim("s", "p", 1, AWARE, confidence=-0.01), id="confidence-negative"),
        pytest.param(lambda: Claim("s", "p", 1, AWARE, confidence=1.01), id="confidence-above-one"),
        pytest.param(lambda: Claim("s", "p", 1, AWARE, confidence=math.nan), id="confidence-nan"),
        pytest.param(lambda: Claim("s", "p", 1, AWARE, confidence=True), id="confidence-bool"),
        pytest.param(lambda: Claim("s", "p", 1, AWARE, confidence="0.5"), id="confidence-string"),
        pytest.param(lambda: Claim("", "p", 1, AWARE), id="empty-subject"),
        pytest.param(lambda: Claim("s", "", 1, AWARE), id="empty-predicate"),
        pytest.param(lambda: Claim("s", 5, 1, AWARE), id="non-string-predicate"),
        pytest.param(lambda: Claim("s", "p", 1, AWARE, evidence=("",)), id="empty-evidence"),
        pytest.param(lambda: Claim("s", "p", 1, AWARE, evidence=(3,)), id="non-string-evidence"),
        pytest.param(lambda: Claim("s", "p", 1, AWARE, evidence="e2"), id="evidence-a-bare-string"),
    ],
)
def test_claim_rules(make):
    with pytest.raises(InvalidInput):
        make()


def test_claim_boundaries_accepted():
    Claim("s", "p", 1, AWARE, valid_to=AWARE + timedelta(microseconds=1), confidence=0)
    Claim("s", "p", 1, AWARE, confidence=1)
    Claim("s", "p", 1, AWARE, confidence=0.0)


def test_claim_with_bare_string_evidence_never_reaches_storage():
    # Regression: evidence="e2" used to be accepted, encoded as a msgpack string and
    # then refused as CorruptObject on every read.
    from mnemosyne import Repo

    repo = Repo.in_memory()
    try:
        node = Node(id="c", kind="claim", content=Claim("s", "p", 1, AWARE, evidence="e2"))
    except InvalidInput:
        return
    repo.commit([node])
    assert repo.get("c") == node


def test_claim_integer_confidence_is_canonical():
    # Regression: confidence=1 encoded as an int but decoded as 1.0, so the same claim
    # had two hashes and a decoded node re-encoded to different bytes.
    as_int = Node(id="c", kind="claim", content=Claim("s", "p", 1, AWARE, confidence=1))
    as_float = Node(id="c", kind="claim", content=Claim("s", "p", 1, AWARE, confidence=1.0))
    assert as_int.hash == as_float.hash
    data = codec.encode(as_int)
    assert codec.encode(decode_object(data, b"")) == data


def test_claim_evidence_list_equals_tuple():
    as_list = Node(id="c", kind="claim", content=Claim("s", "p", 1, AWARE, evidence=["a", "b"]))
    as_tuple = Node(id="c", kind="claim", content=Claim("s", "p", 1, AWARE, evidence=("a", "b")))
    assert as_list.hash == as_tuple.hash
    assert decode_object(codec.encode(as_list), b"") == as_list


def test_empty_meta_hashes_like_no_meta():
    none = Node(id="k", content="v")
    empty = Node(id="k", content="v", meta={})
    assert empty.meta is None
    assert empty == none
    assert empty.hash == none.hash
    assert codec.encode(empty) == codec.encode(none)
    assert Node(id="k", content="v", meta={"a": 1}).hash != none.hash


def test_meta_key_order_does_not_matter():
    a = Node(id="k", content={"x": 1, "y": 2}, meta={"b": 1, "a": 2})
    b = Node(id="k", content={"y": 2, "x": 1}, meta={"a": 2, "b": 1})
    assert codec.encode(a) == codec.encode(b)
    assert a.hash == b.hash


def test_each_field_changes_the_hash():
    base = Node(id="k", content="v")
    variants = [
        Node(id="k2", content="v"),
        Node(id="k", content="w"),
        Node(id="k", content=["v"]),
        Node(id="k", content="v", provenance=Provenance(agent_step=0)),
        Node(id="k", content="v", provenance=Provenance(source="")),
        Node(id="k", content="v", event_time=AWARE),
        Node(id="k", content="v", expires_at=AWARE),
        Node(id="k", content="v", meta={"": None}),
        Node(id="k", content=1),
        Node(id="k", content=1.0),
        Node(id="k", content=True),
    ]
    hashes = {base.hash} | {v.hash for v in variants}
    assert len(hashes) == len(variants) + 1


# -- decoding refusals -------------------------------------------------------------


@pytest.mark.parametrize("tag", ["node@2", "tree@7", "commit@3", "memory@1"])
def test_newer_format_tag_refused_by_name(tag):
    data = msgspec.msgpack.encode([tag, "k", "v", "note"])
    with pytest.raises(CorruptObject, match=tag):
        decode_object(data, codec.object_id(data))


def test_newer_node_format_with_full_field_list_refused():
    fields = msgspec.msgpack.decode(codec.encode(GOLDEN_NOTE))
    fields[0] = "node@2"
    fields.append("a field from the future")
    data = msgspec.msgpack.encode(fields)
    with pytest.raises(CorruptObject, match="node@2"):
        decode_object(data, codec.object_id(data))


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"\xc1", id="never-used-byte"),
        pytest.param(bytes.fromhex(GOLDEN_NOTE_HEX)[:-3], id="truncated"),
        pytest.param(msgspec.msgpack.encode({"id": "k"}), id="a-map"),
        pytest.param(msgspec.msgpack.encode(["node@1", "k"]), id="too-few-fields"),
        pytest.param(msgspec.msgpack.encode(["node@1", "a//b", "v", "note"]), id="invalid-id-inside"),
        pytest.param(msgspec.msgpack.encode(["node@1", "k", float("nan"), "note"]), id="nan-inside"),
    ],
)
def test_garbage_refused_as_corrupt(data):
    with pytest.raises(CorruptObject):
        decode_object(data, codec.object_id(data))


# -- round trips (property) -----------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
json_maps = st.dictionaries(st.text(max_size=6), json_values, max_size=4)

segment = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="/\x85"),
    min_size=1,
    max_size=8,
).filter(lambda s: s not in (".", ".."))
node_ids = (
    st.lists(segment, min_size=1, max_size=4).map("/".join).filter(lambda s: len(s.encode()) <= MAX_ID_BYTES)
)
offsets = st.builds(timezone, st.timedeltas(min_value=-timedelta(hours=23), max_value=timedelta(hours=23)))
aware_times = st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=offsets)
provenances = st.builds(
    Provenance,
    agent_step=st.none() | st.integers(min_value=-(2**63), max_value=2**63 - 1),
    observation=st.none() | st.text(max_size=8),
    tool_call=st.none() | st.text(max_size=8),
    source=st.none() | st.text(max_size=8),
)


@st.composite
def claims(draw):
    valid_from = draw(aware_times)
    length = draw(
        st.none() | st.timedeltas(min_value=timedelta(microseconds=1), max_value=timedelta(days=9999))
    )
    key_text = st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=8)
    return Claim(
        draw(key_text),
        draw(key_text),
        draw(json_values),
        valid_from,
        valid_to=valid_from + length if length is not None else None,
        confidence=draw(st.none() | st.floats(min_value=0, max_value=1) | st.sampled_from([0, 1])),
        evidence=tuple(draw(st.lists(st.text(min_size=1, max_size=8), max_size=3))),
    )


@st.composite
def nodes(draw):
    kind = draw(st.sampled_from(["note", "claim"]))
    return Node(
        id=draw(node_ids),
        content=draw(claims()) if kind == "claim" else draw(json_values),
        kind=kind,
        provenance=draw(provenances),
        event_time=draw(st.none() | aware_times),
        meta=draw(st.none() | json_maps),
        expires_at=draw(st.none() | aware_times),
    )


@SETTINGS
@given(nodes())
def test_any_valid_node_round_trips(node):
    data = codec.encode(node)
    decoded = decode_object(data, codec.object_id(data))
    assert isinstance(decoded, Node)
    assert decoded == node
    assert codec.encode(decoded) == data
    assert decoded.hash == node.hash == codec.object_id(data).hex()


@SETTINGS
@given(nodes())
def test_node_hash_is_deterministic_and_64_hex(node):
    rebuilt = msgspec.structs.replace(node)
    assert rebuilt.hash == node.hash
    assert len(node.hash) == 64
    assert int(node.hash, 16) >= 0
    assert node.hash == node.hash.lower()


@SETTINGS
@given(nodes())
def test_datetimes_are_stored_in_utc(node):
    for value in (node.event_time, node.expires_at):
        if value is not None:
            assert value.utcoffset() == timedelta(0)
    if node.kind == "claim":
        assert node.content.valid_from.utcoffset() == timedelta(0)


@SETTINGS
@given(
    st.integers(min_value=0, max_value=3),
    st.lists(st.tuples(st.text(max_size=5), st.binary(min_size=32, max_size=32)), max_size=5),
)
def test_tree_chunks_round_trip(level, entries):
    chunk = TreeChunk(level, tuple(k for k, _ in entries), tuple(v for _, v in entries))
    data = codec.encode(chunk)
    assert decode_object(data, codec.object_id(data)) == chunk


@SETTINGS
@given(
    st.lists(st.binary(min_size=32, max_size=32), max_size=3),
    st.datetimes(timezones=st.just(UTC)),
    st.text(max_size=10),
    st.none() | json_maps.filter(bool),
)
def test_commit_objects_round_trip(parents, when, message, meta):
    obj = CommitObject(bytes(32), tuple(parents), when, "a", message, meta)
    data = codec.encode(obj)
    assert decode_object(data, codec.object_id(data)) == obj

"""The hashed objects: nodes, claims, tree chunks and commits.

Every stored object is a frozen, tagged, array-like msgspec ``Struct``. The tag
names the object kind and its format version (``"node@1"``), so an object of a
newer format is refused by name instead of being misread. Array-like encoding
writes every field, so a schema change is a new format version (a new tag and
Struct, decoded beside the old one): stored bytes, and their hashes, never change.
"""

from __future__ import annotations

import functools
from collections.abc import Collection
from datetime import datetime
from typing import Any, NewType

import msgspec

from mnemosyne.errors import CorruptObject, InvalidInput
from mnemosyne.model import codec
from mnemosyne.model.choices import Kind
from mnemosyne.model.times import utc
from mnemosyne.model.validation import (
    INT_MAX,
    INT_MIN,
    check_id,
    check_json,
    check_json_around,
    check_text,
    has_control,
)

ObjectId = NewType("ObjectId", bytes)
"""The raw 32-byte blake3 digest of an object's stored bytes."""


class _NoId(str):
    """The type of :data:`NO_ID`: an empty text that is told apart from ``""`` by identity."""

    __slots__ = ()

    # One instance only: copies and pickles give it back, so has_id() holds across them.
    def __reduce__(self) -> tuple[Any, tuple[()]]:
        return (_no_id, ())

    def __copy__(self) -> _NoId:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _NoId:
        return self


def _no_id() -> str:
    return NO_ID


NO_ID: str = _NoId()
"""The id of a node created without one: the commit gives it a generated id.

An explicit empty id is refused; only an omitted one is generated.
"""


def has_id(node: Node) -> bool:
    """Whether ``node`` was given an id (rather than left for the commit to generate)."""
    return node.id is not NO_ID


def _set(obj: msgspec.Struct, name: str, value: Any) -> None:
    # Normalisation (UTC, claim decoding) happens once, at construction, on a frozen struct.
    msgspec.structs.force_setattr(obj, name, value)


class Provenance(msgspec.Struct, frozen=True, array_like=True, kw_only=True, forbid_unknown_fields=True):
    """Where a memory came from. Every field is optional.

    Attributes:
        agent_step: the step of the agent loop that formed the memory.
        observation: the observation (message, event, document) it was formed from.
        tool_call: the tool call that produced it.
        source: the channel or system it came through (``"chat"``, a URL, …).
    """

    agent_step: int | None = None
    observation: str | None = None
    tool_call: str | None = None
    source: str | None = None

    def __post_init__(self) -> None:
        # Runs for every node read back too: the usual values (an int in range, ASCII
        # text) pass on one test each, without a call.
        step = self.agent_step
        if step is not None and (step.__class__ is not int or not INT_MIN <= step <= INT_MAX):
            if isinstance(step, bool) or not isinstance(step, int):
                raise InvalidInput("provenance.agent_step must be an integer")
            check_json(step, "provenance.agent_step")  # 64-bit, as the encoding holds
        for value, name in (
            (self.observation, "observation"),
            (self.tool_call, "tool_call"),
            (self.source, "source"),
        ):
            if value is not None and (value.__class__ is not str or not value.isascii()):
                if not isinstance(value, str):
                    raise InvalidInput(f"provenance.{name} must be a string")
                check_text(value, f"provenance.{name}")


class Claim(
    msgspec.Struct,
    frozen=True,
    array_like=True,
    tag="claim@1",
    forbid_unknown_fields=True,
    omit_defaults=True,
):
    """An assertion about the world: ``subject`` ``predicate`` ``value``, valid from a time.

    Attributes:
        subject: what the claim is about (``"mira"``).
        predicate: which attribute of the subject (``"passport_deadline"``).
        value: any JSON value.
        valid_from: when the value starts to hold in the world (timezone-aware).
        valid_to: when it stops holding, if known; must be after ``valid_from``.
        confidence: the writer's confidence, from 0 to 1.
        evidence: references (node ids, hashes, source URIs) that support the claim.
    """

    subject: str
    predicate: str
    value: Any
    valid_from: datetime
    valid_to: datetime | None = None
    confidence: float | None = None
    evidence: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("subject", "predicate"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise InvalidInput(f"claim {name} must be a non-empty string")
            check_text(value, f"claim {name}")
            if has_control(value):
                # They are keys of the claim index, where control characters separate fields.
                raise InvalidInput(f"claim {name} {value!r} contains a control character")
        check_json(self.value, "claim value")
        _set(self, "valid_from", utc(self.valid_from, "claim valid_from"))
        _set(self, "valid_to", utc(self.valid_to, "claim valid_to"))
        if self.valid_to is not None and self.valid_to <= self.valid_from:
            raise InvalidInput("claim valid_to must be after valid_from")
        if self.confidence is not None:
            if isinstance(self.confidence, bool) or not isinstance(self.confidence, int | float):
                raise InvalidInput("claim confidence must be a number")
            # Compared as given: float() of an integer too large for a float raises OverflowError.
            if not 0.0 <= self.confidence <= 1.0:
                raise InvalidInput("claim confidence must be between 0 and 1")
            # One spelling per value: an int would encode differently from the float it decodes to.
            _set(self, "confidence", float(self.confidence))
        if not isinstance(self.evidence, list | tuple):
            # A bare string would be stored as a string and refused on every read.
            raise InvalidInput("claim evidence must be a list of non-empty strings")
        for ref in self.evidence:
            if not isinstance(ref, str) or not ref:
                raise InvalidInput("claim evidence must be a list of non-empty strings")
            check_text(ref, "claim evidence")
        _set(self, "evidence", tuple(self.evidence))


class _ClaimFields(msgspec.Struct, forbid_unknown_fields=True):
    """The JSON shape of a claim, as users write it."""

    subject: str
    predicate: str
    value: Any
    valid_from: datetime
    valid_to: datetime | None = None
    confidence: float | None = None
    evidence: tuple[str, ...] = ()


def _claim_from(content: Any) -> Claim:
    if isinstance(content, Claim):
        return content
    try:
        if isinstance(content, list):
            return msgspec.convert(content, Claim)
        if isinstance(content, dict):
            fields = msgspec.convert(content, _ClaimFields)
            return Claim(**msgspec.structs.asdict(fields))
    except msgspec.ValidationError as exc:
        raise InvalidInput(f"claim content: {exc}") from None
    raise InvalidInput("a claim node's content must be a Claim (subject, predicate, value, valid_from)")


class Node(msgspec.Struct, frozen=True, array_like=True, tag="node@1", kw_only=True, dict=True):
    """One version of one memory. Immutable; writing the same id again makes a new version.

    Attributes:
        id: the stable key, ``/``-separated (``users/mira/prefs/language``); when
            omitted, the commit generates one (a time-ordered ULID). An empty id is
            refused.
        content: text or any JSON value; a :class:`Claim` when ``kind`` is ``"claim"``.
        kind: ``"note"`` or ``"claim"``.
        provenance: who or what wrote it, from which step, observation or tool call.
        event_time: when the agent formed the memory (timezone-aware).
        meta: an optional JSON map for application policy.
        expires_at: when the memory stops being current (retention bound).
    """

    id: str = NO_ID
    content: Any
    kind: Kind = "note"
    provenance: Provenance = Provenance()
    event_time: datetime | None = None
    meta: dict[str, Any] | None = None
    expires_at: datetime | None = None

    def __post_init__(self) -> None:
        if self.id is not NO_ID:
            check_id(self.id)
        if self.kind == "claim":
            _set(self, "content", _claim_from(self.content))
        elif self.kind == "note":
            if isinstance(self.content, Claim):
                raise InvalidInput("content is a Claim: give the node kind='claim'")
            check_json(self.content, "content")
        else:
            shown = repr(self.kind) if isinstance(self.kind, str) else type(self.kind).__name__
            raise InvalidInput(f"kind must be 'note' or 'claim', not {shown}")
        if not isinstance(self.provenance, Provenance):
            raise InvalidInput("provenance must be a Provenance")
        if self.event_time is not None:
            _set(self, "event_time", utc(self.event_time, "event_time"))
        if self.expires_at is not None:
            _set(self, "expires_at", utc(self.expires_at, "expires_at"))
        if self.meta is not None:
            if not isinstance(self.meta, dict):
                raise InvalidInput("meta must be a JSON map")
            check_json(self.meta, "meta")
            if not self.meta:
                # One spelling for "no meta", so equal memories hash equally.
                _set(self, "meta", None)

    @functools.cached_property
    def hash(self) -> str:
        """The content address of this version: 64 lowercase hex characters.

        Raises:
            InvalidInput: the node has no id yet (its id, and so its hash, is set
                when it is committed).
        """
        if self.id is NO_ID:
            raise InvalidInput("a node without an id has no hash until a commit gives it an id")
        return codec.object_id(codec.encode(self)).hex()


def note_with_proven(
    node_id: str,
    content: dict[str, Any],
    provenance: Provenance,
    proven: Collection[Any],
    nesting: int,
) -> Node:
    """A note whose content holds values already proven JSON: checked as any, but for those.

    A value a writer has already walked to decide it is exact JSON (a LangGraph
    channel's value, say) need not be walked a second time: ``Node(...)`` would. The
    rest of the content is checked as ``Node`` checks it, with the same errors.

    Args:
        node_id: the node's id.
        content: the content.
        provenance: the provenance.
        proven: values in ``content`` proven to be built only of ``None``, ``bool``,
            ``int`` (64-bit), finite ``float``, ``str`` (valid UTF-8), ``list`` and
            ``dict`` with ``str`` keys, exactly those types, nested less than ``nesting``
            deep (see :func:`~mnemosyne.model.validation.check_json_around`).
        nesting: how deep the proven values nest at most.

    Raises:
        InvalidInput: as ``Node(id=node_id, content=content, provenance=provenance)``.
    """
    if node_id is not NO_ID:
        check_id(node_id)  # first, as Node checks it
    check_json_around(content, "content", {id(value) for value in proven}, nesting)
    node = Node(id=node_id, content=None, provenance=provenance)
    _set(node, "content", content)  # before anything reads it: the hash is computed on demand
    return node


class TreeChunk(
    msgspec.Struct, frozen=True, array_like=True, tag="tree@1", forbid_unknown_fields=True, gc=False
):
    """One chunk of a prolly tree.

    At level 0 ``values`` are node hashes; above, they are child chunk hashes and
    ``keys`` hold the last (largest) key of each child.
    """

    # gc=False: a chunk holds only an int and tuples of str and bytes, so it can
    # never be part of a reference cycle, and the tens of thousands a long-lived
    # handle keeps decoded need not be walked by every full garbage collection.

    level: int
    keys: tuple[str, ...]
    values: tuple[bytes, ...]


class CommitObject(
    msgspec.Struct,
    frozen=True,
    array_like=True,
    tag="commit@1",
    forbid_unknown_fields=True,
    omit_defaults=True,
):
    """The stored form of a commit; :class:`Commit` adds its id and hex hashes.

    ``contradictions`` names the contradiction records a merge found (empty for
    every other commit).
    """

    tree: bytes
    parents: tuple[bytes, ...]
    record_time: datetime
    author: str
    message: str
    meta: dict[str, Any] | None = None
    contradictions: tuple[bytes, ...] = ()


class VerifyingCommitObject(CommitObject, frozen=True, tag="commit@2"):
    """The stored form of a commit that re-confirms memories: ``commit@1`` plus ``verified``.

    Its tree is its parent's; ``verified`` names the ids whose current versions it
    confirmed. A format of its own, not a field appended to ``commit@1``: array-like
    encoding writes every field, so an appended one would change the bytes (and
    ids) of every commit written from then on.
    """

    verified: tuple[str, ...] = ()


def verified_ids(commit: CommitObject) -> tuple[str, ...]:
    """The ids a stored commit verified (none, unless it is a ``commit@2``)."""
    return commit.verified if isinstance(commit, VerifyingCommitObject) else ()


class Commit(msgspec.Struct, frozen=True, kw_only=True):
    """A commit: a snapshot (tree), its parents, and who recorded it when.

    Attributes:
        id: 64-char lowercase hex blake3 id.
        tree: hex id of the root tree chunk.
        parents: hex ids of the parent commits (first parent first).
        record_time: when the store recorded the commit (UTC, strictly increasing
            along a branch).
        author: who made the commit.
        message: why.
        meta: optional JSON map (run id, …).
        verified: the ids whose current versions this commit re-confirmed without
            changing them (a verification: its tree is its parent's); empty for
            every other commit.
    """

    id: str
    tree: str
    parents: tuple[str, ...]
    record_time: datetime
    author: str
    message: str
    meta: dict[str, Any] | None = None
    verified: tuple[str, ...] = ()

    @classmethod
    def from_object(cls, oid: bytes, obj: CommitObject) -> Commit:
        """Build the public form from a stored commit and its id."""
        return cls(
            id=oid.hex(),
            tree=obj.tree.hex(),
            parents=tuple(p.hex() for p in obj.parents),
            record_time=obj.record_time,
            author=obj.author,
            message=obj.message,
            meta=obj.meta,
            verified=verified_ids(obj),
        )


class ContradictionObject(
    msgspec.Struct, frozen=True, array_like=True, tag="contradiction@1", forbid_unknown_fields=True
):
    """A merge's record of two claims that disagree about overlapping valid time.

    ``claims`` holds ``(node id, node hash)`` of each claim, one from each side.
    """

    subject: str
    predicate: str
    claims: tuple[tuple[str, bytes], ...]


class Redaction(msgspec.Struct, frozen=True, array_like=True, tag="redaction@1", forbid_unknown_fields=True):
    """The append-only record that one node version was erased on purpose.

    Kept in the redactions keyspace under the version's hash, so trees and commits
    that still name the hash stay valid and a read of it can say why it is gone.

    Attributes:
        id: the node id the version belonged to.
        hash: the erased version's hash (hex).
        time: when it was erased (UTC).
        author: who erased it.
        reason: why.
    """

    id: str
    hash: str
    time: datetime
    author: str
    reason: str


StoredObject = Node | TreeChunk | CommitObject | VerifyingCommitObject | ContradictionObject


_decoder = msgspec.msgpack.Decoder(StoredObject)


def decode_object(data: bytes, oid: bytes) -> StoredObject:
    """Decode stored bytes into their object.

    Raises:
        CorruptObject: if the bytes are not an object of a known kind and version.
    """
    try:
        obj: StoredObject = _decoder.decode(data)
    except (msgspec.DecodeError, InvalidInput) as exc:
        raise CorruptObject(
            f"object {oid.hex()} cannot be decoded: {codec.describe_tag(data) or exc}"
        ) from None
    return obj

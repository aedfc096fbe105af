"""The messages of a transfer over HTTP: each step of :mod:`.transfer` as a request and an answer.

A served store (``mnemo serve``) answers the steps at
``POST /v1/tenants/{tenant}/transfer/{step}``; the client side is
:mod:`mnemosyne.admin.http_remote`. Bodies are msgpack (:data:`MEDIA_TYPE`),
ids raw 32-byte hashes, objects their exact stored bytes: a 10,000-commit
transfer moves its objects, not their text. Every message is read strictly:
a field it does not take, or an id that is not 32 bytes, is refused.

Fetching (the served store sends; a read token):

- ``offer``: :class:`Want` → :class:`OfferMessage`: the server's head and
  branches, the candidate commits, the redaction records the client lacks.
- ``plan``: :class:`Plan` → :class:`Ids`: the objects those commits add.
- ``read``: :class:`Ids` → :class:`ObjectBatch`: their bytes, as many as fit
  in about :data:`READ_LIMIT` bytes (the client asks again for the rest).

Pushing (the served store receives; a write token, an admin one to carry erasures):

- ``survey``: :class:`Empty` → :class:`SurveyMessage`: its tips and erased versions.
- ``lacking``: :class:`Lacking` → :class:`Lacking`: which of the ids it lacks.
- ``redact``: :class:`Records` → :class:`Counts`: redaction records applied first.
- ``store``: :class:`ObjectBatch` → :class:`Counts`: objects written, each hashed, in one transaction.
- ``finish``: :class:`Finish` → :class:`Finished`: the commits indexed, then the
  branch moved by compare-and-swap (only forward unless forced).
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

import msgspec

from mnemosyne.errors import InvalidInput
from mnemosyne.model.reports import RefUpdate

MEDIA_TYPE = "application/vnd.msgpack"
"""The content type of transfer bodies and answers (errors stay the API's JSON)."""

READ_LIMIT = 8 << 20
"""Bytes of objects one ``read`` answer holds, about (at least one object)."""

Id = Annotated[bytes, msgspec.Meta(min_length=32, max_length=32)]
"""An object's id: 32 bytes."""

M = TypeVar("M", bound=msgspec.Struct)


class Empty(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A request that says nothing more than its step."""


class Want(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a fetching client has: the tips it asks for are the sender's.

    Attributes:
        tips: the commits wanted (None: every branch of the sender).
        have: commits the client has indexed (its refs' tips).
        erased: versions the client erased: never sent.
    """

    tips: list[Id] | None = None
    have: list[Id] = []
    erased: list[Id] = []


class OfferMessage(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What the sender offers (see :class:`~mnemosyne.admin.transfer.Offer`)."""

    head: str
    branches: list[tuple[str, Id]]
    commits: list[tuple[Id, list[Id]]]
    redactions: list[tuple[Id, bytes]]


class Plan(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The commits the client will index, parents first."""

    commits: list[Id]


class Ids(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Object ids, in order."""

    ids: list[Id]


class ObjectBatch(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Objects: ids and their stored bytes, in order.

    Attributes:
        ids: the objects' ids.
        data: each one's bytes (None: the sender lacks it).
        erased: those of them erased since they were offered (a rerun brings the erasure first).
    """

    ids: list[Id]
    data: list[bytes | None]
    erased: list[Id] = []


class SurveyMessage(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What the receiving store has (see :class:`~mnemosyne.admin.transfer.Survey`)."""

    tips: list[Id]
    erased: list[Id]


class Lacking(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Commits and objects asked about, or (the answer) those of them the receiver lacks."""

    commits: list[Id] = []
    objects: list[Id] = []


class Records(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Redaction records: ``(id of the version erased, the record as stored)``."""

    records: list[tuple[Id, bytes]]


class Counts(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a receiving step wrote."""

    objects: int = 0
    bytes: int = 0
    redactions: int = 0


class Move(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A branch of the receiving store to move, by compare-and-swap.

    Attributes:
        remote: the client's name for the server (for messages only).
        branch: the branch.
        tip: where it moves.
        force: even when commits leave its history.
        author: who, in its reflog (None: the token's name).
    """

    remote: str
    branch: str
    tip: Id
    force: bool = False
    author: str | None = None


class Finish(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The commits to index (their objects are stored), parents first; then, if given, the move."""

    commits: list[Id]
    move: Move | None = None


class Finished(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How many commits were indexed, and the branch moved (None: it was there already, or no move)."""

    commits: int
    ref: RefUpdate | None = None


STEPS: dict[str, tuple[type[msgspec.Struct], type[msgspec.Struct]]] = {
    "offer": (Want, OfferMessage),
    "plan": (Plan, Ids),
    "read": (Ids, ObjectBatch),
    "survey": (Empty, SurveyMessage),
    "lacking": (Lacking, Lacking),
    "redact": (Records, Counts),
    "store": (ObjectBatch, Counts),
    "finish": (Finish, Finished),
}
"""Each step: the message it takes, the message it answers."""

_encoder = msgspec.msgpack.Encoder()
_decoders: dict[type[Any], msgspec.msgpack.Decoder[Any]] = {}


def encode(message: msgspec.Struct) -> bytes:
    """A message's bytes."""
    return _encoder.encode(message)


def decode(data: bytes, cls: type[M], what: str) -> M:
    """Read a message of type ``cls`` strictly.

    Raises:
        InvalidInput: the bytes are not such a message (``what`` says whose they are).
    """
    decoder = _decoders.get(cls)
    if decoder is None:
        decoder = _decoders[cls] = msgspec.msgpack.Decoder(cls)
    try:
        return decoder.decode(data)  # type: ignore[no-any-return]
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise InvalidInput(f"{what} is not a {cls.__name__} transfer message: {error}") from None

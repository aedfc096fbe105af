"""The one canonical encoding, and object ids.

msgpack through msgspec with ``order="deterministic"`` (sorted map keys), so equal
objects always encode to equal bytes; the id of an object is the blake3 digest
of exactly the bytes stored. Decoding stored bytes into the objects they are is
:func:`mnemosyne.model.objects.decode_object`, beside the objects.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import blake3
import msgspec

from mnemosyne.errors import InvalidInput

NODE_TAG = b"\xa6node@1"
"""How a node's stored bytes go on after their array header (the msgpack fixstr tag)."""
CLAIM_TAG = b"\xa7claim@1"
"""How a claim's content begins inside a node's stored bytes."""
COMMIT_TAGS = (b"\xa8commit@1", b"\xa8commit@2")
"""How a commit's stored bytes go on after their array header, one per format."""

_encoder = msgspec.msgpack.Encoder(order="deterministic")


def encode(obj: Any) -> bytes:
    """Encode ``obj`` canonically.

    Raises:
        InvalidInput: if the value cannot be encoded (text that is not UTF-8, …).
    """
    try:
        return _encoder.encode(obj)
    except (msgspec.EncodeError, UnicodeEncodeError, TypeError, OverflowError) as exc:
        raise InvalidInput(f"cannot encode value: {exc}") from None


def encode_all(objs: Iterable[Any]) -> list[bytes]:
    """Encode each of ``objs`` canonically, as :func:`encode` does one (the same bytes).

    Raises:
        InvalidInput: if a value cannot be encoded.
    """
    try:
        return list(map(_encoder.encode, objs))
    except (msgspec.EncodeError, UnicodeEncodeError, TypeError, OverflowError) as exc:
        raise InvalidInput(f"cannot encode value: {exc}") from None


def object_id(data: bytes) -> bytes:
    """Return the 32-byte blake3 digest that addresses ``data``."""
    return blake3.blake3(data).digest()


def object_ids(datas: Iterable[bytes]) -> list[bytes]:
    """:func:`object_id` of each of ``datas``, in order."""
    # One hasher, reset between inputs: a third cheaper than a new one each for the
    # few hundred bytes of a node. Local to the call, so threads never share it.
    hasher = blake3.blake3()
    update, digest, reset = hasher.update, hasher.digest, hasher.reset
    out: list[bytes] = []
    append = out.append
    for data in datas:
        update(data)
        append(digest())
        reset()
    return out


def tag_of(data: bytes) -> str | None:
    """The kind tag (``"node@1"``, …) an encoded tagged struct starts with, or None."""
    try:
        raw = msgspec.msgpack.decode(data)
    except msgspec.DecodeError:
        return None
    return raw[0] if isinstance(raw, list) and raw and isinstance(raw[0], str) else None


def describe_tag(data: bytes) -> str | None:
    """Name an object's kind tag when it is one this version does not know."""
    tag = tag_of(data)
    if tag is not None and tag not in {"node@1", "tree@1", "commit@1", "commit@2", "contradiction@1"}:
        return f"object format {tag!r} is not one this version of Mnemosyne reads (newer?)"
    return None

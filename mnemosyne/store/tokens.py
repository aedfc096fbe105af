"""Access tokens of a served store (``meta`` · ``token/<id>``, and the key that hashes them).

A token's text is ``mnemo_<id>_<secret>``: its id (12 hex digits, not secret:
listings show it) and a secret of 256 random bits. The store keeps, per id, the
token's tenant, role, name, times and an HMAC-SHA256 of the whole text under a
key of the store's own (``meta`` · ``token-key``, 32 random bytes made with the
first token), never the text: a copy of the store file does not hand out access.
Checking a token reads one record and compares digests in constant time, so it
is cheap enough for every request, and revoking (deleting the record) takes
effect on the next one. Tokens are local credentials: exports do not carry them,
and dropping a tenant deletes its tokens in the same transaction.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import datetime

import msgspec

from mnemosyne.errors import CorruptObject, InvalidInput, NotFound
from mnemosyne.model.access import ROLES, TOKEN_PREFIX, NewToken, Role, Token
from mnemosyne.model.times import from_micros, micros
from mnemosyne.store.kv.base import ReadTxn, Space, WriteTxn

_PREFIX = b"token/"
_KEY = b"token-key"
_ID = re.compile(r"[0-9a-f]{12}")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._@-]{0,63}")
_TEXT = re.compile(re.escape(TOKEN_PREFIX) + r"([0-9a-f]{12})_([A-Za-z0-9_-]{43})")


class _Record(msgspec.Struct, frozen=True, array_like=True, tag="token@1"):
    """A token as stored: everything but its text, and the keyed hash of the text."""

    name: str | None
    tenant: str
    role: str
    created_us: int
    expires_us: int | None
    digest: bytes


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(_Record)


def check_name(name: str) -> str:
    """Return ``name`` if it may name a token.

    Raises:
        InvalidInput: not 1 to 64 letters, digits, ``.``, ``_``, ``@`` or ``-``
            (starting with a letter, digit or ``_``), or 12 hex digits (an id's shape).
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidInput(
            f"{name!r} is not a token name (1 to 64 letters, digits, '.', '_', '@', '-'; "
            "starting with a letter, digit or '_')"
        )
    if _ID.fullmatch(name):
        raise InvalidInput(f"{name!r} looks like a token id (12 hex digits): choose another name")
    return name


def check_role(role: str) -> Role:
    """Return ``role`` if it is one.

    Raises:
        InvalidInput: not ``read``, ``write`` or ``admin``.
    """
    if role not in ROLES:
        raise InvalidInput(f"{role!r} is not a role (read, write or admin)")
    checked: Role = role  # type: ignore[assignment]  # one of ROLES, checked above
    return checked


def _hash_key(txn: WriteTxn) -> bytes:
    """The store's token key, made (32 random bytes) when the first token is."""
    key = txn.get(Space.META, _KEY)
    if key is None:
        key = secrets.token_bytes(32)
        txn.put(Space.META, _KEY, key)
    return key


def _digest(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def _public(token_id: str, record: _Record) -> Token:
    return Token(
        id=token_id,
        name=record.name,
        tenant=record.tenant,
        role=check_role(record.role),
        created_at=from_micros(record.created_us),
        expires_at=from_micros(record.expires_us) if record.expires_us is not None else None,
    )


def _decode(key: bytes, raw: bytes) -> _Record:
    try:
        return _decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise CorruptObject(f"the token record {key!r} is damaged (the store file is)") from None


def _records(txn: ReadTxn) -> list[tuple[str, _Record]]:
    return [(key[len(_PREFIX) :].decode(), _decode(key, raw)) for key, raw in txn.scan(Space.META, _PREFIX)]


def create(
    txn: WriteTxn,
    *,
    tenant: str,
    role: Role,
    name: str | None,
    now: datetime,
    expires_at: datetime | None,
) -> NewToken:
    """Make a token (its text returned here, once) and record its keyed hash.

    The caller checks that the tenant exists.

    Raises:
        InvalidInput: a bad role or name, a name another token has, or an
            expiry not after ``now``.
    """
    check_role(role)
    if name is not None:
        check_name(name)
        if any(record.name == name for _, record in _records(txn)):
            raise InvalidInput(f"a token named {name!r} exists (revoke it first, or choose another name)")
    if expires_at is not None and expires_at <= now:
        raise InvalidInput("a token must expire after it is created")
    while True:  # 48 random bits: a clash is rare, and never reuses an id
        token_id = secrets.token_hex(6)
        if txn.get(Space.META, _PREFIX + token_id.encode()) is None:
            break
    text = f"{TOKEN_PREFIX}{token_id}_{secrets.token_urlsafe(32)}"
    record = _Record(
        name=name,
        tenant=tenant,
        role=role,
        created_us=micros(now),
        expires_us=micros(expires_at) if expires_at is not None else None,
        digest=_digest(_hash_key(txn), text),
    )
    txn.put(Space.META, _PREFIX + token_id.encode(), _encoder.encode(record))
    listed = _public(token_id, record)
    return NewToken(token=text, **msgspec.structs.asdict(listed))


def every(txn: ReadTxn) -> list[Token]:
    """Every token, by tenant, then name (unnamed last), then id."""
    found = [_public(token_id, record) for token_id, record in _records(txn)]
    return sorted(found, key=lambda t: (t.tenant, t.name is None, t.name or "", t.id))


def revoke(txn: WriteTxn, id_or_name: str) -> Token:
    """Delete the token whose id or name is ``id_or_name``; return it as it was listed.

    Raises:
        NotFound: no token has that id or name.
        InvalidInput: not text.
    """
    if not isinstance(id_or_name, str) or not id_or_name:
        raise InvalidInput("name a token by its id or its name")
    for token_id, record in _records(txn):
        if id_or_name in (token_id, record.name):
            txn.delete(Space.META, _PREFIX + token_id.encode())
            return _public(token_id, record)
    raise NotFound(f"no token with id or name {id_or_name!r} (see 'mnemo token list')")


def check(txn: ReadTxn, text: str, now: datetime) -> Token | None:
    """The token ``text`` is, if it is one the store issued and it has not expired; else None.

    One record read and one HMAC, compared in constant time; unknown ids,
    revoked and expired tokens and text of another shape all give None alike.
    """
    if not isinstance(text, str):
        return None
    shaped = _TEXT.fullmatch(text)
    key = txn.get(Space.META, _KEY)
    if shaped is None or key is None:
        return None
    stored = _PREFIX + shaped.group(1).encode()
    raw = txn.get(Space.META, stored)
    if raw is None:
        return None
    record = _decode(stored, raw)
    if not hmac.compare_digest(record.digest, _digest(key, text)):
        return None
    token = _public(shaped.group(1), record)
    return None if token.expired(now) else token


def drop_tenant(txn: WriteTxn, tenant: str) -> int:
    """Delete every token of ``tenant`` (it is being dropped); return how many."""
    gone = [token_id for token_id, record in _records(txn) if record.tenant == tenant]
    for token_id in gone:
        txn.delete(Space.META, _PREFIX + token_id.encode())
    return len(gone)

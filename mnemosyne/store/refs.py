"""Refs: branches under ``refs/heads/``, a symbolic ``HEAD``, remote-tracking refs, and their reflogs.

Remote-tracking refs (``refs/remotes/<remote>/<branch>``) record where a
remote's branches stood at the last fetch or push; they move like branches
(compare-and-swap, reflogged) but nothing commits onto them.

Every move of a ref is a compare-and-swap in the caller's write transaction and
appends one reflog entry in the same transaction, keyed by a time that strictly
increases per ref. The reflog is what record-time (as-of) reads consult.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime

import msgspec

from mnemosyne.errors import CorruptObject, InvalidInput, NotFound, RefConflict
from mnemosyne.model.defaults import DEFAULT_BRANCH
from mnemosyne.model.times import MICROSECOND, micros, rfc3339
from mnemosyne.store.kv.base import ReadTxn, Space, WriteTxn

HEAD = "HEAD"
BRANCH_PREFIX = "refs/heads/"
REMOTE_PREFIX = "refs/remotes/"
"""Remote-tracking refs: ``refs/remotes/<remote>/<branch>``."""
_SYMBOLIC = b"ref:"
_UNBORN = b""  # the stored value of a branch created before its first commit
_BRANCH_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*")
TICK = MICROSECOND
"""How far a record time is nudged to keep a branch's times strictly increasing."""


class ReflogEntry(msgspec.Struct, frozen=True, array_like=True):
    """One move of a ref: from ``old`` to ``new`` (raw ids; empty for none)."""

    old: bytes
    new: bytes
    time: datetime
    author: str
    reason: str


_reflog_encoder = msgspec.msgpack.Encoder()
_reflog_decoder = msgspec.msgpack.Decoder(ReflogEntry)


def _entry(data: bytes) -> ReflogEntry:
    """A stored reflog entry, decoded.

    Raises:
        CorruptObject: the bytes are not one (the store file is damaged).
    """
    try:
        return _reflog_decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise CorruptObject(f"a reflog entry is damaged ({exc}); run 'mnemo fsck'") from None


def _name(raw: bytes) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise CorruptObject(f"a ref name is damaged ({raw!r}); run 'mnemo fsck'") from None


def check_branch_name(name: str) -> str:
    """Return ``name`` if it may name a branch, else raise :class:`InvalidInput`.

    A name is what follows ``refs/heads/``; one that starts with ``refs/`` is
    refused, since every revision reads ``refs/heads/x`` as the branch ``x``.
    """
    if isinstance(name, str) and (name == "refs" or name.startswith("refs/")):
        raise InvalidInput(
            f"{name!r} is not a valid branch name: give the name without 'refs/heads/' (it is added for you)"
        )
    if (
        not isinstance(name, str)
        or len(name) > 200
        or not _BRANCH_NAME.fullmatch(name)
        or ".." in name
        or name.endswith((".", ".lock"))
        or name == HEAD
    ):
        raise InvalidInput(
            f"{name!r} is not a valid branch name (letters, digits, '.', '_', '-', segments separated by '/')"
        )
    return name


def time_key(when: datetime) -> bytes:
    """Eight big-endian bytes of microseconds since the epoch: sorts as time does."""
    return max(micros(when), 0).to_bytes(8, "big", signed=False)


class RefStore:
    """The refs and reflogs of one tenant: the ``refs`` and ``reflog`` keyspaces."""

    HEAD_KEY = HEAD.encode()
    """How ``HEAD`` is keyed, after the scope."""

    @staticmethod
    def is_symbolic(value: bytes) -> bool:
        """Whether a stored ref value names a branch (``HEAD``'s) rather than a commit."""
        return value.startswith(_SYMBOLIC)

    def __init__(self, scope: bytes) -> None:
        self.scope = scope

    def _key(self, name: str) -> bytes:
        return self.scope + name.encode()

    def _log_prefix(self, name: str) -> bytes:
        return self.scope + name.encode() + b"\x00"

    def read(self, txn: ReadTxn, name: str) -> bytes | None:
        """The commit id a ref points at, or None for an unborn or absent ref."""
        return self.state(txn, name)[1]

    def state(self, txn: ReadTxn, name: str) -> tuple[bool, bytes | None]:
        """Whether the ref is set (:meth:`exists`) and the commit it points at (:meth:`read`), in one read."""
        value = txn.get(Space.REFS, self._key(name))
        if value is None:
            return False, None
        return True, (value if value and not value.startswith(_SYMBOLIC) else None)

    def exists(self, txn: ReadTxn, name: str) -> bool:
        """Whether the ref is set: a branch with commits, or one created with none yet."""
        return txn.get(Space.REFS, self._key(name)) is not None

    def create_unborn(self, txn: WriteTxn, name: str, *, when: datetime, author: str, reason: str) -> None:
        """Create a branch with no commits yet (its first commit starts it), and log it."""
        txn.put(Space.REFS, self._key(name), _UNBORN)
        entry = ReflogEntry(b"", b"", when, author, reason)
        txn.put(Space.REFLOG, self._log_prefix(name) + time_key(when), _reflog_encoder.encode(entry))

    def head_branch(self, txn: ReadTxn) -> str:
        """The branch name HEAD points at (it may have no commits yet)."""
        value = txn.get(Space.REFS, self._key(HEAD))
        if value is None or not value.startswith(_SYMBOLIC):
            return DEFAULT_BRANCH
        return _name(value[len(_SYMBOLIC) :])[len(BRANCH_PREFIX) :]

    def set_head(self, txn: WriteTxn, branch: str) -> None:
        """Point HEAD at ``branch``."""
        txn.put(Space.REFS, self._key(HEAD), _SYMBOLIC + (BRANCH_PREFIX + branch).encode())

    def branches(self, txn: ReadTxn) -> Iterator[tuple[str, bytes]]:
        """Yield ``(branch name, tip id)`` in name order."""
        prefix = self._key(BRANCH_PREFIX)
        for key, value in txn.scan(Space.REFS, prefix):
            if value:  # an unborn branch has no tip
                yield _name(key[len(prefix) :]), value

    def tracking(self, txn: ReadTxn, remote: str | None = None) -> Iterator[tuple[str, bytes]]:
        """Yield ``(remote/branch, tip id)`` of the remote-tracking refs (of one remote), by name."""
        prefix = self._key(REMOTE_PREFIX)
        start = prefix + (remote.encode() + b"/" if remote is not None else b"")
        for key, value in txn.scan(Space.REFS, start):
            if value:
                yield _name(key[len(prefix) :]), value

    def unborn(self, txn: ReadTxn) -> Iterator[str]:
        """Names of the branches created with no commits yet, in name order."""
        prefix = self._key(BRANCH_PREFIX)
        for key, value in txn.scan(Space.REFS, prefix):
            if not value:
                yield _name(key[len(prefix) :])

    def last_time(self, txn: ReadTxn, name: str) -> datetime | None:
        """Time of the newest reflog entry of a ref."""
        for _, value in txn.scan(Space.REFLOG, self._log_prefix(name), reverse=True):
            return _entry(value).time
        return None

    def next_time(self, txn: ReadTxn, name: str, now: datetime) -> datetime:
        """``now``, nudged forward so the ref's reflog times strictly increase."""
        last = self.last_time(txn, name)
        if last is not None and now <= last:
            return last + TICK
        return now

    def update(
        self,
        txn: WriteTxn,
        name: str,
        expected: bytes | None,
        new: bytes | None,
        *,
        when: datetime,
        author: str,
        reason: str,
    ) -> None:
        """Compare-and-swap: move ``name`` from ``expected`` to ``new`` and log it.

        ``when`` must come from :meth:`next_time`. A ``new`` of None deletes the ref.

        Raises:
            RefConflict: if the ref does not point at ``expected``.
        """
        if not isinstance(author, str) or not isinstance(reason, str):
            # A reflog entry that does not decode would break every later read of the ref.
            raise InvalidInput("the author of a ref move must be a string")
        current = self.read(txn, name)
        if current != expected:
            raise RefConflict(
                f"{name} moved: expected {expected.hex()[:12] if expected else 'nothing'}, "
                f"found {current.hex()[:12] if current else 'nothing'}"
            )
        if new is None:
            txn.delete(Space.REFS, self._key(name))
        else:
            txn.put(Space.REFS, self._key(name), new)
        entry = ReflogEntry(expected or b"", new or b"", when, author, reason)
        try:
            data = _reflog_encoder.encode(entry)
        except UnicodeEncodeError:
            raise InvalidInput("the author and reason of a ref move must be valid UTF-8 text") from None
        txn.put(Space.REFLOG, self._log_prefix(name) + time_key(when), data)

    @staticmethod
    def decode_entry(data: bytes) -> ReflogEntry:
        """Decode one stored reflog entry."""
        return _reflog_decoder.decode(data)

    def every_entry(self, txn: ReadTxn) -> Iterator[ReflogEntry]:
        """Every reflog entry of every ref (deleted branches' too), in key order."""
        for _, value in txn.scan(Space.REFLOG, self.scope):
            yield _entry(value)

    def expire(self, txn: WriteTxn, horizon: datetime) -> int:
        """Delete reflog entries older than ``horizon``, keeping each ref's newest; return how many."""
        newest: dict[bytes, bytes] = {}
        old: list[bytes] = []
        cutoff = time_key(horizon)
        size = len(self.scope)
        for key, _ in txn.scan(Space.REFLOG, self.scope):
            # <ref name> 00 <8-byte time>: the time may itself contain zero bytes.
            newest[key[size:-9]] = key
            if key[-8:] < cutoff:
                old.append(key)
        kept = set(newest.values())
        doomed = [key for key in old if key not in kept]
        for key in doomed:
            txn.discard(Space.REFLOG, key)
        return len(doomed)

    def raw_refs(self, txn: ReadTxn) -> Iterator[tuple[bytes, bytes]]:
        """Every ref as stored: ``(name, value)`` (for export)."""
        size = len(self.scope)
        for key, value in txn.scan(Space.REFS, self.scope):
            yield key[size:], value

    def raw_reflog(self, txn: ReadTxn) -> Iterator[tuple[bytes, bytes]]:
        """Every reflog entry as stored: ``(name 00 time, entry)`` (for export)."""
        size = len(self.scope)
        for key, value in txn.scan(Space.REFLOG, self.scope):
            yield key[size:], value

    def put_raw_ref(self, txn: WriteTxn, name: bytes, value: bytes) -> None:
        """Set a ref to a checked stored value (a restore)."""
        txn.put(Space.REFS, self.scope + name, value)

    def put_raw_log(self, txn: WriteTxn, key: bytes, value: bytes) -> bool:
        """Add a checked reflog entry under its stored key (a restore); False when present."""
        return txn.put(Space.REFLOG, self.scope + key, value, overwrite=False)

    def reflog(self, txn: ReadTxn, name: str) -> Iterator[ReflogEntry]:
        """Yield a ref's moves, newest first."""
        for _, value in txn.scan(Space.REFLOG, self._log_prefix(name), reverse=True):
            yield _entry(value)

    def at_time(self, txn: ReadTxn, name: str, when: datetime) -> bytes:
        """What ``name`` pointed at at ``when`` (inclusive), per its reflog.

        Raises:
            NotFound: if the ref did not exist then.
        """
        prefix = self._log_prefix(name)
        for _, value in txn.scan(Space.REFLOG, prefix, start=prefix + time_key(when), reverse=True):
            entry = _entry(value)
            if not entry.new:
                break
            return entry.new
        short = name[len(BRANCH_PREFIX) :] if name.startswith(BRANCH_PREFIX) else name
        raise NotFound(f"{short} did not exist at {rfc3339(when)}")

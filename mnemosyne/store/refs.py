"""Refs: branches under ``refs/heads/``, a symbolic ``HEAD``, and their reflogs.

Every move of a ref is a compare-and-swap in the caller's write transaction and
appends one reflog entry in the same transaction, keyed by a time that strictly
increases per ref. The reflog is what record-time (as-of) reads consult.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import msgspec

from mnemosyne.errors import InvalidInput, NotFound, RefConflict
from mnemosyne.model.validation import rfc3339
from mnemosyne.store.kv.base import ReadTxn, Space, WriteTxn

HEAD = "HEAD"
BRANCH_PREFIX = "refs/heads/"
DEFAULT_BRANCH = "main"
_SYMBOLIC = b"ref:"
_BRANCH_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
TICK = timedelta(microseconds=1)


class ReflogEntry(msgspec.Struct, frozen=True, array_like=True):
    """One move of a ref: from ``old`` to ``new`` (raw ids; empty for none)."""

    old: bytes
    new: bytes
    time: datetime
    author: str
    reason: str


_reflog_encoder = msgspec.msgpack.Encoder()
_reflog_decoder = msgspec.msgpack.Decoder(ReflogEntry)


def check_branch_name(name: str) -> str:
    """Return ``name`` if it may name a branch, else raise :class:`InvalidInput`."""
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
    micros = max((when - _EPOCH) // TICK, 0)
    return micros.to_bytes(8, "big", signed=False)


class RefStore:
    """The refs and reflogs of one tenant."""

    def __init__(self, scope: bytes) -> None:
        self.scope = scope

    def _key(self, name: str) -> bytes:
        return self.scope + name.encode()

    def _log_prefix(self, name: str) -> bytes:
        return self.scope + name.encode() + b"\x00"

    def read(self, txn: ReadTxn, name: str) -> bytes | None:
        """The commit id a ref points at, or None for an unborn or absent ref."""
        value = txn.get(Space.REFS, self._key(name))
        if value is None or value.startswith(_SYMBOLIC):
            return None
        return value

    def exists(self, txn: ReadTxn, name: str) -> bool:
        """Whether the ref is set (a branch with at least one commit)."""
        return txn.get(Space.REFS, self._key(name)) is not None

    def head_branch(self, txn: ReadTxn) -> str:
        """The branch name HEAD points at (it may have no commits yet)."""
        value = txn.get(Space.REFS, self._key(HEAD))
        if value is None or not value.startswith(_SYMBOLIC):
            return DEFAULT_BRANCH
        return value[len(_SYMBOLIC) :].decode()[len(BRANCH_PREFIX) :]

    def set_head(self, txn: WriteTxn, branch: str) -> None:
        """Point HEAD at ``branch``."""
        txn.put(Space.REFS, self._key(HEAD), _SYMBOLIC + (BRANCH_PREFIX + branch).encode())

    def branches(self, txn: ReadTxn) -> Iterator[tuple[str, bytes]]:
        """Yield ``(branch name, tip id)`` in name order."""
        prefix = self._key(BRANCH_PREFIX)
        for key, value in txn.scan(Space.REFS, prefix):
            yield key[len(prefix) :].decode(), value

    def last_time(self, txn: ReadTxn, name: str) -> datetime | None:
        """Time of the newest reflog entry of a ref."""
        for _, value in txn.scan(Space.REFLOG, self._log_prefix(name), reverse=True):
            return _reflog_decoder.decode(value).time
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

    def reflog(self, txn: ReadTxn, name: str) -> Iterator[ReflogEntry]:
        """Yield a ref's moves, newest first."""
        for _, value in txn.scan(Space.REFLOG, self._log_prefix(name), reverse=True):
            yield _reflog_decoder.decode(value)

    def at_time(self, txn: ReadTxn, name: str, when: datetime) -> bytes:
        """What ``name`` pointed at at ``when`` (inclusive), per its reflog.

        Raises:
            NotFound: if the ref did not exist then.
        """
        prefix = self._log_prefix(name)
        for _, value in txn.scan(Space.REFLOG, prefix, start=prefix + time_key(when), reverse=True):
            entry = _reflog_decoder.decode(value)
            if not entry.new:
                break
            return entry.new
        short = name[len(BRANCH_PREFIX) :] if name.startswith(BRANCH_PREFIX) else name
        raise NotFound(f"{short} did not exist at {rfc3339(when)}")

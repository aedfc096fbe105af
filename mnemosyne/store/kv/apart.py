"""Whole-store reads run in a child process, so damage LMDB does not survive is reported.

LMDB trusts its pages: a cursor that steps onto a zeroed or overwritten page
fails an assertion and aborts the process (``SIGABRT``), or reads through a
wild pointer (``SIGSEGV``); no error code comes back. ``fsck`` and ``export``
step through every page of a store, so they are the reads that meet such
damage: they run in a forked child that opens the store afresh, read-only, and
sends its result back. A child killed by a signal is damage, reported as
:class:`~mnemosyne.errors.CorruptObject` with LMDB's own words, and the caller
(a CLI command, a server) lives on. Other backends read in the process itself.
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import signal
import tempfile
from collections.abc import Callable
from contextlib import suppress
from os import _exit
from typing import IO, TypeVar

from mnemosyne import errors
from mnemosyne.errors import CorruptObject, MnemoError
from mnemosyne.store.kv.base import KV
from mnemosyne.store.kv.lmdb_kv import LmdbKV

T = TypeVar("T")

_CHUNK = 1 << 20


def apart(kv: KV, work: Callable[[IO[bytes] | None], T], out: IO[bytes] | None = None) -> T:
    """``work()`` in a child process on an LMDB store, else here; what it writes goes to ``out``.

    ``work`` is given the stream to write to: ``out`` itself in this process, a
    pipe to this one (copied into ``out``) in a child.

    Raises:
        CorruptObject: the child was killed by a signal (the store file is damaged).
        MnemoError: whatever ``work`` raised, raised again here.
    """
    if not isinstance(kv, LmdbKV) or not hasattr(os, "fork"):
        return work(out)
    path = os.path.join(kv.path, "data.mdb")
    results, sent = os.pipe()
    data, written = os.pipe() if out is not None else (-1, -1)
    with tempfile.TemporaryFile() as said:  # the child's stderr: where LMDB's assertion goes
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child (coverage does not follow a fork)
            _child(kv, work, said.fileno(), (results, data), sent, written)
        os.close(sent)
        if written >= 0:
            os.close(written)
        try:
            if out is not None:
                while chunk := os.read(data, _CHUNK):
                    out.write(chunk)
            payload = _read_all(results)
            _, status = os.waitpid(pid, 0)
            pid = 0
        finally:
            for end in (results, data):
                if end >= 0:
                    os.close(end)
            if pid:  # this process failed first (an interrupt, a full disk): the child goes too
                with suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            said.seek(0)
            raise _crashed(path, os.WTERMSIG(status), said.read().decode(errors="replace"))
    if not payload:
        raise MnemoError(f"reading the store {path} in a child process failed (exit {status})")
    outcome, value = pickle.loads(payload)  # our own child's bytes
    if outcome == "error":
        raise value
    if outcome == "failed":
        name, message = value
        kind = getattr(errors, name, MnemoError)
        if isinstance(kind, type) and issubclass(kind, MnemoError):
            raise kind(message)
        raise MnemoError(message)
    result: T = value
    return result


def _child(
    kv: LmdbKV,
    work: Callable[[IO[bytes] | None], object],
    stderr: int,
    parent_ends: tuple[int, int],
    sent: int,
    written: int,
) -> None:  # pragma: no cover - runs in the child
    """Run ``work`` on the store opened afresh, send its outcome, and end without cleanup."""
    try:
        for end in parent_ends:
            if end >= 0:
                os.close(end)
        faulthandler.disable()  # a crash here is the parent's to report, in one line
        os.dup2(stderr, 2)
        stream = os.fdopen(written, "wb") if written >= 0 else None
        try:
            kv.reopen_in_child()
            outcome: tuple[str, object] = ("ok", work(stream))
        except MnemoError as exc:
            outcome = ("error", exc)
        except BaseException as exc:
            outcome = ("failed", (type(exc).__name__, f"{type(exc).__name__}: {exc}"))
        finally:
            if stream is not None:
                with suppress(OSError):
                    stream.close()
        try:
            payload = pickle.dumps(outcome)
        except Exception:
            payload = pickle.dumps(("failed", (type(outcome[1]).__name__, str(outcome[1]))))
        with os.fdopen(sent, "wb") as pipe:
            pipe.write(payload)
        kv.close()
    finally:
        _exit(0)  # no atexit handlers, no finalizers: they belong to the parent


def _read_all(handle: int) -> bytes:
    parts = []
    while chunk := os.read(handle, _CHUNK):
        parts.append(chunk)
    return b"".join(parts)


def _crashed(path: str, number: int, said: str) -> CorruptObject:
    """The error for a read that LMDB ended with a signal: its assertion, when it printed one."""
    name = signal.Signals(number).name if number in signal.valid_signals() else f"signal {number}"
    lines = [line.strip() for line in said.splitlines() if line.strip()]
    detail = next((line for line in lines if "Assertion" in line), lines[-1] if lines else "")
    why = f"{name}: {detail.split(': ', 1)[-1]}" if detail else name
    return CorruptObject(
        f"the store file {path} is damaged: reading it stopped LMDB ({why}); restore the store "
        "from a backup ('mnemo import'), and keep this file"
    )

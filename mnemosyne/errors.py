"""The error tree: every failure the API raises derives from :class:`MnemoError`.

The CLI maps each class to one exit code (docs/cli.md, "Exit codes"), so a new error
must subclass the branch whose exit code fits it.
"""

from __future__ import annotations


class MnemoError(Exception):
    """Root of every error raised by Mnemosyne."""


class InvalidInput(MnemoError, ValueError):
    """The caller passed something Mnemosyne refuses: a bad id, a naive datetime, bad JSON."""


class NotFound(MnemoError, KeyError):
    """A store, ref, revision, object or tenant does not exist."""

    def __str__(self) -> str:
        # KeyError quotes its argument; a one-line message reads better without.
        return str(self.args[0]) if self.args else "not found"


class RefConflict(MnemoError):
    """A compare-and-swap on a ref failed: the branch moved since the caller read it."""


class MergeConflict(MnemoError):
    """Merge resolutions were stale or left conflicts unresolved."""


class ClaimConflict(MnemoError):
    """Two claims on one (subject, predicate) start at the same time with different values."""


class Redacted(NotFound):
    """The requested version was erased on purpose; its redaction record survives."""


class CorruptObject(MnemoError):
    """Bytes read back from storage do not match their hash, or cannot be decoded."""


class StorageFull(MnemoError):
    """The disk or the storage map cannot grow to hold the write; nothing was written."""


class AccessDenied(MnemoError):
    """A served store refused the request: no token, one it does not honour, or a role too low.

    A token it does not honour is unknown, revoked or expired: the server does not say which.
    """


EXIT_CODES: tuple[tuple[type[MnemoError], int], ...] = (
    (NotFound, 3),  # Redacted too: it subclasses NotFound
    (InvalidInput, 2),
    (ClaimConflict, 2),
    (MergeConflict, 2),
    (RefConflict, 4),
    (CorruptObject, 5),
    (StorageFull, 6),
    (AccessDenied, 7),
)
"""The exit code of each error (docs/cli.md, "Exit codes"); any other ``MnemoError`` is 1.

Kept with the errors, so the command line and the HTTP server's error bodies agree.
"""


KINDS: tuple[type[MnemoError], ...] = (
    AccessDenied,
    Redacted,
    NotFound,
    InvalidInput,
    ClaimConflict,
    MergeConflict,
    RefConflict,
    CorruptObject,
    StorageFull,
    MnemoError,
)
"""The public error classes, most specific first: an error's kind on the wire (the HTTP
server names a private subclass by its public class; its clients raise the class named)."""

_BY_NAME = {kind.__name__: kind for kind in KINDS}


def error_class(name: object) -> type[MnemoError]:
    """The public error class called ``name`` in an error body (``MnemoError`` for any other name)."""
    return _BY_NAME.get(name, MnemoError) if isinstance(name, str) else MnemoError


def exit_code(error: MnemoError) -> int:
    """The exit code ``mnemo`` gives ``error`` (1 for a kind without one of its own)."""
    for kind, code in EXIT_CODES:
        if isinstance(error, kind):
            return code
    return 1


def one_line(error: BaseException) -> str:
    """An error's message on a single line (its class name when it has none), as every face reports it."""
    parts = [part.strip() for part in str(error).splitlines() if part.strip()]
    return "; ".join(parts) or type(error).__name__

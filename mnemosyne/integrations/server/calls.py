"""What every route of the HTTP API is made of: the route, its parameters, the call a handler gets, its reply.

:mod:`~mnemosyne.integrations.server.routes` holds the handlers and the table
built from these; the dispatcher (:mod:`~mnemosyne.integrations.server.asgi`)
and the OpenAPI document read the same table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import msgspec

from mnemosyne import Commit, ForgetReport, InvalidInput, RefConflict, Repo
from mnemosyne.model.access import Role, Token
from mnemosyne.model.defaults import DEFAULT_AUTHOR
from mnemosyne.model.times import parse_duration

TENANT = "/v1/tenants/{tenant}"

SLASHED = frozenset({"id", "name", "rev"})
"""Path parameters that hold ``/`` by design (ids, branch names, revisions): the last one
in a route may be sent encoded (``mem%2F0``) or as the path's remaining segments (``mem/0``)."""


class Tip(msgspec.Struct, frozen=True, kw_only=True):
    """A branch and the commit at its tip (None: no commits yet)."""

    name: str
    commit: Commit | None


class Branches(msgspec.Struct, frozen=True, kw_only=True):
    """The tenant's current branch, and every branch with its tip, by name."""

    head: str
    branches: list[Tip]


class IdList(msgspec.Struct, frozen=True, kw_only=True):
    """The ids of a snapshot, in order, and the commit listed (None: the branch has no commits yet)."""

    commit: Commit | None
    ids: list[str]


class ForgetReports(msgspec.Struct, frozen=True, kw_only=True):
    """What ``forget`` erased: one report per id, in the order given."""

    reports: list[ForgetReport]


@dataclass(frozen=True)
class Param:
    """A query parameter a route takes."""

    name: str
    kind: str  # string, integer or boolean
    description: str
    required: bool = False


@dataclass
class Call:
    """One request as a handler sees it: the tenant's ``Repo``, the token, and what was sent."""

    repo: Repo
    token: Token
    tenant: str
    path: dict[str, str]
    query: dict[str, str]
    body: Any = None
    if_match: str | None = None

    def text(self, name: str) -> str | None:
        """A query parameter, or None when absent."""
        return self.query.get(name)

    def integer(self, name: str) -> int | None:
        """A query parameter that is a whole number."""
        value = self.query.get(name)
        if value is None:
            return None
        if not value.isascii() or not value.isdigit() or len(value) > 18:
            raise InvalidInput(f"?{name}= must be a whole number, not {value!r}")
        return int(value)

    def flag(self, name: str) -> bool:
        """A query parameter that is ``true`` or ``false`` (absent: false)."""
        value = self.query.get(name)
        if value is None or value == "false":
            return False
        if value == "true":
            return True
        raise InvalidInput(f"?{name}= must be true or false, not {value!r}")

    def duration(self, name: str) -> timedelta | None:
        """A query parameter that is a duration (``30d``)."""
        value = self.query.get(name)
        return parse_duration(value, name) if value is not None else None

    def author(self, given: str | None) -> str:
        """Who writes: the author the request names, else the token's name, else ``unknown``."""
        return given or self.token.name or DEFAULT_AUTHOR


@dataclass
class Reply:
    """What a handler answers: a result (or JSON Lines of results, or msgpack bytes), a status and headers."""

    value: Any = None
    status: int = 200
    etag: str | None = None
    location: str | None = None
    lines: Iterator[Any] | None = None
    raw: bytes | None = None


@dataclass(frozen=True)
class Route:
    """One route of the API."""

    method: str
    path: str
    role: Role
    summary: str
    handler: Callable[[Call], Reply]
    query: tuple[Param, ...] = ()
    body: type[msgspec.Struct] | None = None
    response: Any = None
    lines: bool = False
    status: int = 200
    headers: tuple[str, ...] = field(default=())
    recall: bool = False  # CPU- and memory-heavy: run a few at a time (see asgi.Api)
    wire: bool = False  # a transfer step: msgpack body and answer (mnemosyne.admin.wire)
    quick: bool = False  # one lookup at a branch's tip: answered on the event loop when local (asgi.Api)


# -- shared parameters ----------------------------------------------------------------

AT = Param(
    "at", "string", "A revision to read instead of HEAD (branch, commit id or prefix, REV~N, B@{TIME})."
)
AS_OF = Param("as_of", "string", "Read the branch as it was at this record time (RFC 3339).")
VALID_AT = Param("valid_at", "string", "The world time asked about (RFC 3339; default: now).")
LIMIT = Param("limit", "integer", "At most this many.")
PREFIX = Param("prefix", "string", "Only ids under this namespace.")
ALLOWED_FOR = Param("allowed_for", "string", "The use the memories are for (meta allowed_for).")
MAX_SENSITIVITY = Param("max_sensitivity", "string", "The most sensitive level to return.")
VERIFIED_WITHIN = Param(
    "verified_within", "string", "Leave out memories last confirmed longer ago than this (30d, 12h)."
)


def branch_etag(repo: Repo, at: str | None, as_of: str | None) -> str | None:
    """The tip of the branch a read looks at, read before it: its ``ETag``.

    Read first, so a client that commits with ``If-Match`` set to it never
    overwrites what it did not see (at worst it is refused and reads again).
    None when the read is not of a branch's tip (a commit, ``REV~N``, ``as_of``).
    """
    if as_of is not None:
        return None
    try:
        return repo.tip(at if at is not None else repo.head)
    except InvalidInput:  # not a branch name: HEAD~2, a commit id with a '/', ...
        return None


def verified_within_of(value: str | None) -> timedelta | None:
    """The ``verified_within`` query parameter as a duration (None when not given)."""
    return parse_duration(value, "verified_within") if value is not None else None


class PreconditionFailed(RefConflict):
    """``If-Match`` named a tip the branch is no longer at: 412, nothing written."""

    def __init__(self, branch: str, expected: str, tip: str | None, detail: str | None = None) -> None:
        now = f"is at {tip}" if tip is not None else "has moved" if detail else "has no commits"
        super().__init__(
            f"If-Match: branch {branch!r} {now}, not {expected}: nothing was written (read it again)"
        )


def is_precondition(error: BaseException) -> bool:
    """Whether ``error`` is a failed ``If-Match`` (412) rather than another conflict (409)."""
    return isinstance(error, PreconditionFailed)

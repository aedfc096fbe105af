"""Revision syntax: what ``at``, ``ref``, ``a``, ``b``, ``start`` and ``to`` accept.

A branch name, ``HEAD``, a full commit id, a unique prefix of at least 4 hex
characters (a branch name wins over a prefix), ``REV~N`` / ``REV^`` / ``REV^N``,
and ``REF@{TIME}`` (what the ref pointed at at that time, per its reflog).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from mnemosyne.errors import InvalidInput, NotFound
from mnemosyne.index.view import View
from mnemosyne.model.objects import CommitObject
from mnemosyne.store.kv.base import Space
from mnemosyne.store.refs import BRANCH_PREFIX, HEAD

_REV = re.compile(r"(?P<base>[^~^@{}]+)(?:@\{(?P<time>[^}]*)\})?(?P<ops>(?:[~^][0-9]*)*)")
_OP = re.compile(r"([~^])([0-9]*)")
_HEX = re.compile(r"[0-9a-f]{4,64}")


def parse_time(text: str) -> datetime:
    """Parse an RFC 3339 time; a bare date means midnight UTC.

    Raises:
        InvalidInput: if ``text`` is not such a time.
    """
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInput(f"{text!r} is not an RFC 3339 time (e.g. 2026-06-04T00:00:00Z)") from None
    if value.tzinfo is None:
        if len(text.strip()) == 10:
            return value.replace(tzinfo=UTC)
        raise InvalidInput(f"time {text!r} has no timezone; add Z for UTC")
    try:
        return value.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:00:00-05:00 is past the last datetime
        raise InvalidInput(f"time {text!r} is out of range once converted to UTC") from None


def ref_name(view: View, name: str) -> str | None:
    """The full ref a short name denotes (``HEAD`` → its branch), or None."""
    if name == HEAD:
        return BRANCH_PREFIX + view.refs.head_branch(view.txn)
    full = name if name.startswith(BRANCH_PREFIX) else BRANCH_PREFIX + name
    if view.refs.exists(view.txn, full):
        return full
    return None


def resolve(view: View, rev: str, as_of: datetime | None = None) -> bytes:
    """Resolve a revision to a commit id.

    Args:
        view: the stores to read.
        rev: the revision text.
        as_of: read the ref as it was at this time; ``rev`` must then name a ref.

    Raises:
        InvalidInput: malformed or ambiguous revision, or ``as_of`` with a commit id.
        NotFound: nothing by that name, or the ref did not exist then.
    """
    if not isinstance(rev, str):
        raise InvalidInput("a revision must be a string")
    match = _REV.fullmatch(rev.strip())
    if not match:
        raise InvalidInput(f"{rev!r} is not a revision (branch, HEAD, commit id, REV~N, REF@{{TIME}})")
    base = match["base"]
    when = parse_time(match["time"]) if match["time"] is not None else None
    if as_of is not None:
        if when is not None:
            raise InvalidInput("give the time either as REF@{TIME} or as as_of, not both")
        when = as_of
    name = ref_name(view, base)
    if when is not None and name is None:
        # A deleted branch keeps its reflog: what it pointed at then is still known.
        logged = base if base.startswith(BRANCH_PREFIX) else BRANCH_PREFIX + base
        if view.refs.last_time(view.txn, logged) is not None:
            name = logged
    if when is not None:
        if name is None:
            if base == HEAD or not _HEX.fullmatch(base):
                raise NotFound(f"no branch named {base!r}")
            raise InvalidInput("an as-of time needs a branch name or HEAD, not a commit id")
        oid = view.refs.at_time(view.txn, name, when)
    elif name is not None:
        found = view.refs.read(view.txn, name)
        if found is None:
            raise NotFound(f"branch {name[len(BRANCH_PREFIX) :]!r} has no commits yet")
        oid = found
    elif base == HEAD:
        raise NotFound("HEAD's branch has no commits yet")
    else:
        oid = _by_prefix(view, base)
    for op, count in _OP.findall(match["ops"]):
        number = int(count) if count else 1
        if op == "~":
            for _ in range(number):
                oid = _parent(view, oid, 0, rev)
        elif number:
            oid = _parent(view, oid, number - 1, rev)
    return oid


def _parent(view: View, oid: bytes, index: int, rev: str) -> bytes:
    parents = view.commit(oid).parents
    if index >= len(parents):
        raise NotFound(f"{rev}: commit {oid.hex()[:7]} has no parent number {index + 1}")
    return parents[index]


def _by_prefix(view: View, text: str) -> bytes:
    lowered = text.lower()
    if not _HEX.fullmatch(lowered):
        raise NotFound(f"no branch or commit named {text!r}")
    if len(lowered) == 64:
        oid = bytes.fromhex(lowered)
        view.commit(oid)
        return oid
    even = bytes.fromhex(lowered[: len(lowered) // 2 * 2])
    scope = view.objects.scope
    found: list[bytes] = []
    for key, _ in view.txn.scan(Space.OBJECTS, scope + even):
        oid = key[len(scope) :]
        if not oid.hex().startswith(lowered):
            continue
        try:
            obj = view.objects.load(view.txn, oid)
        except NotFound:
            continue
        if isinstance(obj, CommitObject):
            found.append(oid)
            if len(found) > 1:
                raise InvalidInput(f"commit prefix {text!r} is ambiguous; give more characters")
    if not found:
        raise NotFound(f"no branch or commit named {text!r}")
    return found[0]

"""Revision syntax: what ``at``, ``ref``, ``a``, ``b``, ``start`` and ``to`` accept.

A branch name, ``HEAD``, a full commit id, a unique prefix of at least 4 hex
characters (a branch name wins over a prefix), ``REV~N`` / ``REV^`` / ``REV^N``,
and ``REF@{TIME}`` (what the ref pointed at at that time, per its reflog). A
remote-tracking ref is named ``REMOTE/BRANCH`` (or ``refs/remotes/REMOTE/BRANCH``);
a local branch of the same name wins, as in git.
"""

from __future__ import annotations

import re
from datetime import datetime

from mnemosyne.errors import CorruptObject, InvalidInput, NotFound
from mnemosyne.index.view import View
from mnemosyne.model.objects import Commit, CommitObject
from mnemosyne.model.times import parse_time
from mnemosyne.model.validation import is_full_hash
from mnemosyne.store.refs import BRANCH_PREFIX, HEAD, REMOTE_PREFIX

Rev = str | Commit
"""A revision as a caller may give it: its text, or a :class:`Commit` (from ``resolve``, ``log``, …)."""

_REV = re.compile(r"(?P<base>[^~^@{}]+)(?:@\{(?P<time>[^}]*)\})?(?P<ops>(?:[~^][0-9]*)*)")
_OP = re.compile(r"([~^])([0-9]*)")
_HEX = re.compile(r"[0-9a-f]{4,64}")


def label(rev: Rev) -> str:
    """How messages name a revision: its text, or a commit's short id."""
    return rev.id[:12] if isinstance(rev, Commit) else rev


def ref_name(view: View, name: str) -> str | None:
    """The full ref a short name denotes (``HEAD`` → its branch), or None."""
    if name == HEAD:
        return BRANCH_PREFIX + view.refs.head_branch(view.txn)
    full = name if name.startswith(BRANCH_PREFIX) else BRANCH_PREFIX + name
    if view.refs.exists(view.txn, full):
        return full
    if name.startswith(REMOTE_PREFIX) or ("/" in name and not name.startswith("refs/")):
        tracking = name if name.startswith(REMOTE_PREFIX) else REMOTE_PREFIX + name
        if view.refs.exists(view.txn, tracking):
            return tracking
    return None


def resolve(view: View, rev: Rev, as_of: datetime | None = None) -> bytes:
    """Resolve a revision to a commit id.

    Args:
        view: the stores to read.
        rev: the revision text, or a commit (which must be in this tenant).
        as_of: read the ref as it was at this time; ``rev`` must then name a ref.

    Raises:
        InvalidInput: malformed or ambiguous revision, or ``as_of`` with a commit.
        NotFound: nothing by that name, or the ref did not exist then.
    """
    if isinstance(rev, Commit):
        if as_of is not None:
            raise InvalidInput("an as-of time needs a branch name or HEAD, not a commit")
        if not is_full_hash(rev.id):
            raise InvalidInput(f"{rev.id!r} is not a commit id (64 hex digits)")
        oid = bytes.fromhex(rev.id)
        view.commit(oid)  # a commit of another store or tenant is not found here
        return oid
    if not isinstance(rev, str):
        raise InvalidInput(f"a revision must be text or a Commit, not {type(rev).__name__}")
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
        raise NotFound(f"HEAD's branch {view.refs.head_branch(view.txn)!r} has no commits yet")
    else:
        oid = _by_prefix(view, base)
    for op, count in _OP.findall(match["ops"]):
        number = int(count) if count else 1
        if op == "~":
            oid = _first_parent_ancestor(view, oid, number, rev)
        elif number:
            parents = view.commit(oid).parents
            if number > len(parents):
                raise NotFound(
                    f"{rev}: commit {oid.hex()[:7]} has {len(parents)} "
                    f"parent{'' if len(parents) == 1 else 's'}, not a parent number {number}"
                )
            oid = parents[number - 1]
    return oid


def _first_parent_ancestor(view: View, oid: bytes, number: int, rev: str) -> bytes:
    """The ``number``-th first-parent ancestor of ``oid``.

    By the commit graph's skip pointers: a few entries read however far back (on
    PostgreSQL a round trip each, where a commit at a time was one per step). A
    commit the graph does not index (named by its id) goes a commit at a time.
    """
    try:
        depth: int | None = view.graph.shape(view.txn, oid).depth
    except CorruptObject:
        depth = None
    if depth is not None and number <= depth:
        return view.graph.first_parent_at(view.txn, oid, depth - number)
    if depth is not None:
        raise NotFound(
            f"{rev}: {oid.hex()[:7]} has only {depth} first-parent ancestor"
            f"{'' if depth == 1 else 's'}, not {number}"
        )
    start = oid
    for step in range(number):
        parents = view.commit(oid).parents
        if not parents:
            raise NotFound(
                f"{rev}: {start.hex()[:7]} has only {step} first-parent ancestor"
                f"{'' if step == 1 else 's'}, not {number}"
            )
        oid = parents[0]
    return oid


def _by_prefix(view: View, text: str) -> bytes:
    lowered = text.lower()
    if not _HEX.fullmatch(lowered):
        raise NotFound(f"no branch or commit named {text!r}")
    if len(lowered) == 64:
        oid = bytes.fromhex(lowered)
        view.commit(oid)
        return oid
    even = bytes.fromhex(lowered[: len(lowered) // 2 * 2])
    found: list[bytes] = []
    for oid, _ in view.objects.scan(view.txn, even):
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

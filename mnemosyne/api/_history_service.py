"""History: writing commits and reading snapshots, history, blame, diffs, claims and valid time."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import timedelta
from itertools import chain, compress, filterfalse, repeat
from operator import attrgetter
from typing import Any

from mnemosyne.api._handle import Handle
from mnemosyne.errors import InvalidInput, NotFound
from mnemosyne.history import queries, walk
from mnemosyne.history.revisions import Rev, resolve
from mnemosyne.index.confirmed import confirmed_at
from mnemosyne.index.view import View, WriteView
from mnemosyne.model.choices import CLAIM_POLICIES, ClaimPolicy
from mnemosyne.model.defaults import DEFAULT_AUTHOR
from mnemosyne.model.objects import Commit, Node
from mnemosyne.model.results import (
    Blame,
    Change,
    CommitResult,
    Contradiction,
    Diff,
    Fact,
    History,
    TimelineChange,
    Version,
)
from mnemosyne.model.times import TimeLike, as_time
from mnemosyne.model.validation import (
    check_id,
    check_json,
    check_new_id,
    check_policy_meta,
    check_scope,
    check_window,
)
from mnemosyne.store.refs import check_branch_name

_meta_of = attrgetter("meta")
_id_of = attrgetter("id")


class Ids(Iterator[str]):
    """The ids of a snapshot in order (an iterator, read a batch at a time), and its commit.

    Attributes:
        commit: the commit whose snapshot they are (the revision resolved, once), so
            that the reads that follow can look at the same one; None on a branch
            with no commits yet.
    """

    def __init__(self, commit: Commit | None, ids: Iterator[str]) -> None:
        self.commit = commit
        self._ids = ids

    def __next__(self) -> str:
        return next(self._ids)

    def __iter__(self) -> Iterator[str]:
        return self._ids  # the same ids, without a Python call per id (``list(repo.ids())``)


class HistoryService:
    """Commits and every read of history, for one tenant (see :class:`Repo` for each call)."""

    def __init__(self, handle: Handle) -> None:
        self._handle = handle

    # -- writing ----------------------------------------------------------------------

    def commit(
        self,
        put: Iterable[Node],
        delete: Iterable[str],
        *,
        message: str,
        author: str,
        branch: str | None,
        parent: Rev | None,
        meta: dict[str, Any] | None,
        allow_empty: bool,
        on_claim_conflict: ClaimPolicy,
    ) -> CommitResult:
        """The work of :meth:`Repo.commit`."""
        if on_claim_conflict not in CLAIM_POLICIES:
            raise InvalidInput(f"on_claim_conflict must be one of {', '.join(CLAIM_POLICIES)}")
        if isinstance(put, Node) or isinstance(delete, str) or not _iterable(put, delete):
            raise InvalidInput("put takes an iterable of Nodes and delete an iterable of ids")
        nodes = list(put)
        removals = [check_id(i) for i in delete]
        # In C (map, compress) before any Python per node: an import checks a million.
        if not all(map(isinstance, nodes, repeat(Node))):
            stranger = next(node for node in nodes if not isinstance(node, Node))
            raise InvalidInput(f"put takes Node objects, not {type(stranger).__name__}")
        for node_id in filterfalse(str.isascii, map(_id_of, nodes)):  # ids beyond ASCII only
            check_new_id(node_id)
        for node in compress(nodes, map(_meta_of, nodes)):  # the nodes with a meta map
            check_policy_meta(node.meta, node.id or "a node")
        if not isinstance(message, str) or not isinstance(author, str):
            raise InvalidInput("message and author must be strings")
        if meta is not None:
            if not isinstance(meta, dict):
                raise InvalidInput("commit meta must be a JSON map")
            check_json(meta, "commit meta")
        target = check_branch_name(branch) if branch is not None else None
        handle = self._handle
        from mnemosyne.history.commits import apply_commit  # the write path: loaded when first used

        def work(view: WriteView) -> CommitResult:
            return apply_commit(
                view,
                branch=target or view.refs.head_branch(view.txn),
                parent=parent,
                nodes=nodes,
                removals=removals,
                author=author,
                message=message,
                meta=meta,
                allow_empty=allow_empty,
                on_claim_conflict=on_claim_conflict,
                now=handle.now(),
            )

        return handle.write(work)

    def verify(self, ids: tuple[str, ...], *, by: str | None, note: str | None, branch: str | None) -> Commit:
        """The work of :meth:`Repo.verify`."""
        if not ids:
            raise InvalidInput("verify takes at least one id")
        wanted = tuple(sorted({check_id(i) for i in ids}))
        if by is not None and not isinstance(by, str):
            raise InvalidInput("by must be a string (who verified)")
        if note is not None and not isinstance(note, str):
            raise InvalidInput("note must be a string")
        target = check_branch_name(branch) if branch is not None else None
        message = note or (f"verify {wanted[0]}" if len(wanted) == 1 else f"verify {len(wanted)} memories")
        handle = self._handle
        from mnemosyne.history.commits import apply_verify

        def work(view: WriteView) -> Commit:
            return apply_verify(
                view,
                branch=target or view.refs.head_branch(view.txn),
                ids=wanted,
                author=by if by is not None else DEFAULT_AUTHOR,
                message=message,
                now=handle.now(),
            )

        return handle.write(work)

    def revert(self, commit: Rev, *, author: str, message: str | None) -> CommitResult:
        """The work of :meth:`Repo.revert`."""
        from mnemosyne.history.branches import inverse

        with self._handle.read() as view:
            tip = self._handle.tip(view, None, None)
            if tip is None:
                raise NotFound("the current branch has no commits")
            oid, summary, puts, removals = inverse(view, commit, tip)
        return self.commit(
            puts,
            removals,
            message=message or f"Revert {oid.hex()[:7]}: {summary}",
            author=author,
            branch=None,
            parent=tip.hex(),
            meta=None,
            allow_empty=False,
            on_claim_conflict="refuse",
        )

    # -- reading ----------------------------------------------------------------------

    def resolve(self, rev: Rev, as_of: TimeLike | None) -> Commit:
        """The work of :meth:`Repo.resolve`."""
        when = as_time(as_of, "as_of")

        def read(view: View) -> Commit:
            oid = resolve(view, rev, as_of=when)
            return Commit.from_object(oid, view.commit(oid))

        return self._handle.view(read)

    def get(self, node_id: str, at: Rev | None, as_of: TimeLike | None, include_expired: bool) -> Node | None:
        """The work of :meth:`Repo.get`."""
        check_id(node_id)
        when = as_time(as_of, "as_of")
        handle = self._handle

        def read(view: View) -> Node | None:
            tip = handle.tip(view, at, when)
            if tip is None:
                return None
            value = view.tree.get(view.commit(tip).tree, node_id)
            if value is None:
                return None
            node = view.node(value)
            if not include_expired and queries.expired(node, handle.judged_at(when)):
                return None
            return node

        return handle.view(read)

    def nodes(
        self,
        at: Rev | None,
        as_of: TimeLike | None,
        prefix: str | None,
        include_expired: bool,
        allowed_for: str | None = None,
        max_sensitivity: str | None = None,
        verified_within: timedelta | None = None,
        after: str | None = None,
    ) -> Iterator[Node]:
        """The work of :meth:`Repo.nodes`."""
        from mnemosyne.recall.scope import permitted, scoping  # no index of its own: meta alone

        for name, value in (("prefix", prefix), ("after", after)):
            if value is not None and not isinstance(value, str):
                raise InvalidInput(f"{name} must be a string, not {type(value).__name__}")
        check_scope(allowed_for, max_sensitivity, verified_within)
        when = as_time(as_of, "as_of")
        handle = self._handle
        with handle.read() as view:
            tip = handle.tip(view, at, when)
            scope = scoping(view.txn, allowed_for, max_sensitivity)
            nodes: Iterator[Node] = iter(())
            if tip is not None:
                root = view.commit(tip).tree
                # The first batch in the same read (on PostgreSQL, the round trip that resolved the tip).
                first, after = walk.node_batch(view, root, prefix or "", after)
                nodes = (
                    iter(first)
                    if after is None
                    else chain(first, walk.nodes(handle.read, root, prefix or "", after))
                )
        now = handle.judged_at(when)
        if not include_expired:
            nodes = (node for node in nodes if not queries.expired(node, now))
        if scope.active:
            nodes = (node for node in nodes if permitted(node.meta, scope))
        if verified_within is not None and tip is not None:
            since = now - verified_within

            def fresh(node: Node) -> bool:
                with handle.read() as view:
                    confirmed = confirmed_at(view, node.id, bytes.fromhex(node.hash), tip)
                return confirmed is not None and confirmed >= since

            nodes = (node for node in nodes if fresh(node))
        return nodes

    def log(
        self, at: Rev | None, node: str | None, limit: int | None, as_of: TimeLike | None
    ) -> Iterator[Commit]:
        """The work of :meth:`Repo.log`."""
        if node is not None:
            check_id(node)
        _check_limit(limit)
        when = as_time(as_of, "as_of")
        handle = self._handle
        with handle.read() as view:
            tip = handle.tip(view, at, when)
            if tip is None:
                return iter(())
            if node is None:
                return walk.commits(handle.read, tip, limit)
            found: list[Commit] = []
            for oid, _ in walk.changes_of(view, node, tip):
                if limit is not None and len(found) >= limit:
                    break
                found.append(Commit.from_object(oid, view.commit(oid)))
            return iter(found)

    def history(self, node_id: str, at: Rev | None, limit: int | None = None) -> list[Version]:
        """The work of :meth:`Repo.history`."""
        check_id(node_id)
        _check_limit(limit)
        handle = self._handle
        with handle.read() as view:
            tip = handle.tip(view, at, None)
            if tip is None:
                return []
            return queries.history(view, node_id, tip, handle.now(), limit)

    def histories(
        self,
        ids: Iterable[str],
        at: Rev | None,
        as_of: TimeLike | None,
        limit: int | None,
        include_expired: bool,
    ) -> dict[str, History]:
        """The work of :meth:`Repo.histories`."""
        if isinstance(ids, str) or not isinstance(ids, Iterable):
            raise InvalidInput("ids must be an iterable of ids (a list of strings), not one string")
        wanted = list(dict.fromkeys(check_id(i) for i in ids))
        _check_limit(limit)
        when = as_time(as_of, "as_of")
        handle = self._handle

        def read(view: View) -> dict[str, History]:
            tip = handle.tip(view, at, when)
            if tip is None:
                return {i: History(id=i, node=None, versions=[]) for i in wanted}
            tree = view.commit(tip).tree
            values = [view.tree.get(tree, i) for i in wanted]
            present = [value for value in values if value is not None]
            decoded = dict(zip(present, view.objects.nodes(view.txn, present), strict=True))
            judged = handle.judged_at(when)
            found = queries.histories(view, wanted, tip, handle.now(), limit, dict(decoded))
            out: dict[str, History] = {}
            for i, value in zip(wanted, values, strict=True):
                node = decoded.get(value) if value is not None else None
                if node is not None and not include_expired and queries.expired(node, judged):
                    node = None
                out[i] = History(id=i, node=node, versions=found[i])
            return out

        # The change-index entries of every id are read in the round trip that begins the read.
        return handle.view(read, None if limit == 0 else handle.stores.changes.first_scans(wanted))

    def ids(self, at: Rev | None, as_of: TimeLike | None, prefix: str | None) -> Ids:
        """The work of :meth:`Repo.ids`."""
        if prefix is not None and not isinstance(prefix, str):
            raise InvalidInput(f"prefix must be a string, not {type(prefix).__name__}")
        when = as_time(as_of, "as_of")
        handle = self._handle

        def read(view: View) -> tuple[Commit | None, list[str], str | None]:
            tip = handle.tip(view, at, when)
            if tip is None:
                return None, [], None
            commit = Commit.from_object(tip, view.commit(tip))
            # The first batch in the same read (on PostgreSQL, the round trip that resolved the tip).
            return commit, *walk.id_batch(view, bytes.fromhex(commit.tree), prefix or "", None)

        commit, first, after = handle.view(read)
        if commit is None or after is None:
            return Ids(commit, iter(first))
        rest = walk.ids(handle.read, bytes.fromhex(commit.tree), prefix or "", after)
        return Ids(commit, chain(first, rest))

    def blame(self, node_id: str, at: Rev | None) -> Blame:
        """The work of :meth:`Repo.blame`."""
        from mnemosyne.history.blame import blame

        check_id(node_id)
        handle = self._handle
        with handle.read() as view:
            tip = handle.tip(view, at, None)
            if tip is None:
                raise NotFound(f"{node_id} is not in the store: there are no commits yet")
            return blame(view, node_id, tip)

    def diff(self, a: Rev | None, b: Rev, as_of: TimeLike | None) -> Diff:
        """The work of :meth:`Repo.diff`."""
        # With the claim index it builds on: loaded by the reads that need them, not by every Repo.
        from mnemosyne.index.build import tree_changes

        when = as_time(as_of, "as_of")
        with self._handle.read() as view:
            oid_a = resolve(view, a, as_of=when) if a is not None else None
            oid_b = resolve(view, b, as_of=when)
            tree_b = view.commit(oid_b).tree
            changed = tree_changes(view, view.commit(oid_a).tree if oid_a is not None else None, tree_b)
            added: list[Change] = []
            removed: list[Change] = []
            modified: list[Change] = []
            # Every version both sides name, read at once (on PostgreSQL one round trip, not one each).
            hashes = list(dict.fromkeys(h for _, old, new in changed for h in (old, new) if h is not None))
            versions = dict(zip(hashes, view.objects.nodes(view.txn, hashes), strict=True))
            for key, old, new in changed:
                change = Change(
                    key,
                    versions[old] if old is not None else None,
                    versions[new] if new is not None else None,
                    old.hex() if old is not None else None,
                    new.hex() if new is not None else None,
                )
                (added if old is None else removed if new is None else modified).append(change)
            return Diff(
                a=oid_a.hex() if oid_a is not None else None,
                b=oid_b.hex(),
                added=added,
                removed=removed,
                modified=modified,
            )

    # -- claims and valid time --------------------------------------------------------

    def facts(
        self,
        subject: str,
        predicate: str | None,
        valid_at: TimeLike | None,
        as_of: TimeLike | None,
        at: Rev | None,
        verified_within: timedelta | None = None,
    ) -> list[Fact]:
        """The work of :meth:`Repo.facts`."""
        _check_claim_key(subject, "subject")
        if predicate is not None:
            _check_claim_key(predicate, "predicate")
        when = as_time(as_of, "as_of")
        world = as_time(valid_at, "valid_at")
        check_window(verified_within)
        handle = self._handle
        with handle.read() as view:
            tip = handle.tip(view, at, when)
            if tip is None:
                return []
            now = handle.judged_at(when)
            since = now - verified_within if verified_within is not None else None
            return queries.facts(view, tip, subject, predicate, world or now, now, since)

    def timeline(self, subject: str, predicate: str, as_of: TimeLike | None, at: Rev | None) -> list[Fact]:
        """The work of :meth:`Repo.timeline`."""
        _check_claim_key(subject, "subject")
        _check_claim_key(predicate, "predicate")
        when = as_time(as_of, "as_of")
        handle = self._handle
        with handle.read() as view:
            tip = handle.tip(view, at, when)
            if tip is None:
                return []
            return queries.timeline(view, tip, subject, predicate, handle.judged_at(when))

    def timeline_history(
        self, subject: str, predicate: str, as_of: TimeLike | None, at: Rev | None, limit: int | None
    ) -> list[TimelineChange]:
        """The work of :meth:`Repo.timeline_history`."""
        _check_claim_key(subject, "subject")
        _check_claim_key(predicate, "predicate")
        _check_limit(limit)
        when = as_time(as_of, "as_of")
        handle = self._handle
        with handle.read() as view:
            tip = handle.tip(view, at, when)
        if tip is None or limit == 0:
            return []
        return queries.timeline_history(handle.read, tip, subject, predicate, handle.judged_at(when), limit)

    def contradictions(self, at: Rev | None, recorded: bool) -> list[Contradiction]:
        """The work of :meth:`Repo.contradictions`."""
        with self._handle.read() as view:
            tip = self._handle.tip(view, at, None)
            if tip is None:
                return []
            if recorded:
                return queries.recorded_contradictions(view, tip)
            return queries.open_contradictions(view, tip)


def _iterable(*values: object) -> bool:
    return all(isinstance(value, Iterable) for value in values)


def _check_limit(limit: object) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise InvalidInput("limit must be a non-negative integer")


def _check_claim_key(value: object, name: str) -> None:
    """Refuse a subject or predicate no claim can have: asking for it is a mistake, not "no facts"."""
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"{name} must be a non-empty string (as every claim's {name} is)")

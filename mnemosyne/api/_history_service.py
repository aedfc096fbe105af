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
    History,
    Version,
)
from mnemosyne.model.times import TimeLike, as_time
from mnemosyne.model.validation import (
    check_id,
    check_json,
    check_limit,
    check_new_id,
    check_policy_meta,
    check_scope,
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

    def get(
        self,
        id: str,
        *,
        at: Rev | None = None,
        as_of: TimeLike | None = None,
        include_expired: bool = False,
    ) -> Node | None:
        """The version of ``id`` in a snapshot (default: HEAD), or None when absent.

        Args:
            id: the node id.
            at: a revision; default HEAD.
            as_of: read the branch as it was at this record time, per its reflog.
            include_expired: return a node even past its ``expires_at`` (judged at
                ``as_of`` when given, else now by the store's clock).

        Raises:
            Redacted: the version there was erased.
        """
        check_id(id)
        when = as_time(as_of, "as_of")
        handle = self._handle

        def read(view: View) -> Node | None:
            tip = handle.tip(view, at, when)
            if tip is None:
                return None
            value = view.tree.get(view.commit(tip).tree, id)
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
        check_limit(limit)
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
        check_limit(limit)
        handle = self._handle
        with handle.read() as view:
            tip = handle.tip(view, at, None)
            if tip is None:
                return []
            return queries.history(view, node_id, tip, handle.now(), limit)

    def histories(
        self,
        ids: Iterable[str],
        *,
        at: Rev | None = None,
        as_of: TimeLike | None = None,
        limit: int | None = None,
        include_expired: bool = False,
    ) -> dict[str, History]:
        """Each of ``ids`` in a snapshot (default: HEAD) with its history, all in one read.

        What :meth:`get` and :meth:`history` say of each id, from one snapshot:
        on PostgreSQL a few round trips for any number of ids, where each
        ``history`` costs about four. A face that shows many items with their
        times (a page of search results) reads them this way.

        Args:
            ids: the node ids (each once in the answer, in the order given).
            at: a revision; default HEAD.
            as_of: read the branch as it was at this record time, per its reflog.
            limit: at most this many versions of each id, the newest.
            include_expired: give ``node`` even past its ``expires_at`` (judged at
                ``as_of`` when given, else now).

        Returns:
            Per id, a :class:`History`: ``node`` as :meth:`get` reads it (None when
            absent, expired or erased) and ``versions`` as :meth:`history` gives them.
        """
        if isinstance(ids, str) or not isinstance(ids, Iterable):
            raise InvalidInput("ids must be an iterable of ids (a list of strings), not one string")
        wanted = list(dict.fromkeys(check_id(i) for i in ids))
        check_limit(limit)
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

    def ids(self, *, at: Rev | None = None, as_of: TimeLike | None = None, prefix: str | None = None) -> Ids:
        """The ids in a snapshot (default: HEAD), in order, optionally under ``prefix``, reading no node.

        Cheaper than :meth:`nodes` where only ids are wanted (a listing to page
        through, then :meth:`histories` of a page): every id in the tree is listed,
        an expired or erased version's too, as no node is read to judge it. The
        iterator's ``commit`` is the commit listed (None on a branch with no
        commits yet): pass it as ``at`` to read the same snapshot again.
        """
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

    def blame(self, id: str, *, at: Rev | None = None) -> Blame:
        """Who wrote the current version of ``id``, when, from what; per line or field.

        Raises:
            NotFound: if the id is not in the snapshot.
        """
        from mnemosyne.history.blame import blame

        check_id(id)
        handle = self._handle
        with handle.read() as view:
            tip = handle.tip(view, at, None)
            if tip is None:
                raise NotFound(f"{id} is not in the store: there are no commits yet")
            return blame(view, id, tip)

    def diff(self, a: Rev | None, b: Rev, *, as_of: TimeLike | None = None) -> Diff:
        """What changed from revision ``a`` to revision ``b``.

        Walks only the parts of the two trees whose hashes differ. With ``as_of``,
        both revisions must name refs and are read as they were at that time.
        ``a=None`` is the empty snapshot: what a root commit added (``Diff.a`` is
        then None), erased versions included by their hashes.
        """
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

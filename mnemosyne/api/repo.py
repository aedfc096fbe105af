"""``Repo``: the Python API of a Mnemosyne store.

Returns data (Structs and iterators) and raises the :mod:`mnemosyne.errors`
tree; never prints, never reads the environment, and takes its clock as a
parameter so record time is testable.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from mnemosyne.admin.fsck import FsckReport, fsck, reindex
from mnemosyne.api.branches import BranchMethods
from mnemosyne.api.erasure import ForgettingMethods
from mnemosyne.api.handle import Clock, aware
from mnemosyne.api.recall import RecallMethods
from mnemosyne.errors import InvalidInput, NotFound
from mnemosyne.history import branches as branching
from mnemosyne.history import queries, walk
from mnemosyne.history.blame import Blame, blame
from mnemosyne.history.commits import ClaimPolicy, apply_commit
from mnemosyne.history.merge import Contradiction
from mnemosyne.history.revisions import resolve
from mnemosyne.index.view import WriteView
from mnemosyne.model.ids import new_id
from mnemosyne.model.objects import Commit, Node
from mnemosyne.model.results import Change, Diff, Fact, Version
from mnemosyne.model.validation import check_id, check_json
from mnemosyne.recall.embedders import Embedder
from mnemosyne.store.kv.base import WriteTxn
from mnemosyne.store.kv.lmdb_kv import DEFAULT_MAP_SIZE, DEFAULT_MAX_MAP_SIZE, LmdbKV
from mnemosyne.store.kv.memory import MemoryKV
from mnemosyne.store.refs import check_branch_name
from mnemosyne.store.tenancy import (
    DEFAULT_TENANT,
    check_bound,
    check_tenant_name,
    drop_tenant,
    initialise,
    open_tenant,
    scope,
    tenant_names,
)

_DATA_FILE = "data.mdb"


def system_clock() -> datetime:
    """The default clock: the system's time in UTC."""
    return datetime.now(UTC)


def _open_kv(
    path: Path, create: bool, readonly: bool, map_size: int, max_map_size: int, sync: bool
) -> LmdbKV:
    return LmdbKV(
        path, create=create, readonly=readonly, map_size=map_size, max_map_size=max_map_size, sync=sync
    )


class Repo(RecallMethods, ForgettingMethods, BranchMethods):
    """A store of agent memory, bound to one tenant.

    Open one with :meth:`init`, :meth:`open` or :meth:`in_memory`; use it as a
    context manager or call :meth:`close`. A ``Repo`` may be shared by threads
    (reads run concurrently, writes are serialised); open it again in a forked
    child rather than carrying it across ``fork()``.
    """

    # -- opening -------------------------------------------------------------

    @classmethod
    def init(
        cls,
        path: str | os.PathLike[str],
        *,
        clock: Clock = system_clock,
        map_size: int = DEFAULT_MAP_SIZE,
        max_map_size: int = DEFAULT_MAX_MAP_SIZE,
        sync: bool = True,
        embedder: Embedder | str | None = None,
    ) -> Repo:
        """Create a new store in the directory ``path`` and open its default tenant.

        Keyword arguments are those of :meth:`open`.

        Raises:
            InvalidInput: if a store (or any other file) is already there.
        """
        where = _store_path(path)
        if where.exists():
            if (where / _DATA_FILE).exists():
                raise InvalidInput(f"a store already exists at {where}")
            if not where.is_dir():
                raise InvalidInput(f"{where} exists and is not a directory")
            if any(where.iterdir()):
                raise InvalidInput(f"{where} exists and is not empty")
        kv = _open_kv(where, True, False, map_size, max_map_size, sync)
        try:
            kv.transact(initialise)
        except BaseException:
            kv.close()
            raise
        return cls(kv, scope(0), DEFAULT_TENANT, clock, where)._with(embedder)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        tenant: str = DEFAULT_TENANT,
        create: bool = False,
        readonly: bool = False,
        clock: Clock = system_clock,
        map_size: int = DEFAULT_MAP_SIZE,
        max_map_size: int = DEFAULT_MAX_MAP_SIZE,
        sync: bool = True,
        embedder: Embedder | str | None = None,
    ) -> Repo:
        """Open an existing store.

        Args:
            path: the store directory.
            tenant: the tenant whose keyspace this handle is bound to.
            create: create the tenant if it does not exist yet.
            readonly: open for inspection; any write raises ``InvalidInput``.
            clock: where record time comes from.
            map_size: initial LMDB map size in bytes.
            max_map_size: the map grows on demand up to this size.
            embedder: the embedder for semantic search (an ``Embedder`` or a name:
                ``hash``, ``hash-DIM``, ``minilm``, ``none``); default: the store's
                ``embedder`` setting.
            sync: flush every commit to disk before returning (off: faster bulk
                loads, and a crash may lose the latest commits, never the store).

        Raises:
            NotFound: no store at ``path``, or an unknown tenant without ``create``.
            InvalidInput: a store of a newer format, or a bad tenant name.
        """
        where = _store_path(path)
        try:
            present = (where / _DATA_FILE).is_file()
        except OSError:  # a name too long for the file system, …
            present = False
        if not present:
            raise NotFound(f"no store at {where} (create one with 'mnemo init')")
        check_tenant_name(tenant)
        kv = _open_kv(where, False, readonly, map_size, max_map_size, sync)
        try:
            scope = open_tenant(kv, tenant, create, where)
        except BaseException:
            kv.close()
            raise
        return cls(kv, scope, tenant, clock, where)._with(embedder)

    @classmethod
    def in_memory(cls, *, clock: Clock = system_clock, embedder: Embedder | str | None = None) -> Repo:
        """A store held in memory only: for tests and throwaway experiments."""
        kv = MemoryKV()
        kv.transact(initialise)
        return cls(kv, scope(0), DEFAULT_TENANT, clock, None)._with(embedder)

    def _with(self, embedder: Embedder | str | None) -> Repo:
        if embedder is not None:
            try:
                self.use_embedder(embedder)
            except BaseException:
                self.close()
                raise
        return self

    # -- writing -------------------------------------------------------------

    def commit(
        self,
        put: Iterable[Node] = (),
        delete: Iterable[str] = (),
        *,
        message: str = "",
        author: str = "unknown",
        branch: str | None = None,
        parent: str | None = None,
        meta: dict[str, Any] | None = None,
        allow_empty: bool = False,
        on_claim_conflict: ClaimPolicy = "refuse",
    ) -> Commit:
        """Record new versions of nodes and removals of ids as one atomic commit.

        The commit applies to the branch tip found inside its write transaction, so
        concurrent writers never lose each other's commits.

        Args:
            put: node versions to write; a node without an id gets a generated one.
            delete: ids to remove from the snapshot (history keeps them).
            message: why.
            author: who.
            branch: the branch to commit to (default: HEAD's branch).
            parent: the commit the caller expects at the tip (optimistic concurrency).
            meta: optional JSON map stored in the commit (run id, …).
            allow_empty: record a commit even when the snapshot does not change.
            on_claim_conflict: what to do when a claim starts at the same ``valid_from``
                as another claim on the same (subject, predicate) with a different value:
                ``"refuse"`` (raise ``ClaimConflict``, the default), ``"replace"``
                (remove the other claims in this commit) or ``"keep"`` (keep both;
                ``facts`` then returns both until a later commit resolves it).

        Returns:
            The new commit.

        Raises:
            InvalidInput: bad nodes, ids or meta; an id both written and removed; nothing
                to commit.
            NotFound: removing an id that is not in the branch; an unknown ``parent``.
            RefConflict: ``parent`` was given and the branch has moved past it.
            ClaimConflict: a claim conflicts with another and the policy is ``"refuse"``.
        """
        if on_claim_conflict not in ("refuse", "replace", "keep"):
            raise InvalidInput("on_claim_conflict must be 'refuse', 'replace' or 'keep'")
        if isinstance(put, Node) or isinstance(delete, str) or not _iterable(put, delete):
            raise InvalidInput("put takes an iterable of Nodes and delete an iterable of ids")
        nodes = list(put)
        removals = [check_id(i) for i in delete]
        for node in nodes:
            if not isinstance(node, Node):
                raise InvalidInput(f"put takes Node objects, not {type(node).__name__}")
        if not isinstance(message, str) or not isinstance(author, str):
            raise InvalidInput("message and author must be strings")
        if meta is not None:
            if not isinstance(meta, dict):
                raise InvalidInput("commit meta must be a JSON map")
            check_json(meta, "commit meta")
        when_hint = self._now()
        nodes = [n if n.id else _with_id(n, new_id(when_hint)) for n in nodes]
        seen: set[str] = set()
        for node_id in [n.id for n in nodes] + removals:
            if node_id in seen:
                raise InvalidInput(f"{node_id} appears more than once in one commit")
            seen.add(node_id)
        target = check_branch_name(branch) if branch is not None else None

        def work(txn: WriteTxn) -> Commit:
            check_bound(txn, self.tenant, self._scope)
            view = WriteView(self._stores, txn)
            return apply_commit(
                view,
                branch=target or view.refs.head_branch(txn),
                parent=parent,
                nodes=nodes,
                removals=removals,
                author=author,
                message=message,
                meta=meta,
                allow_empty=allow_empty,
                on_claim_conflict=on_claim_conflict,
                now=self._now(),
            )

        return self._kv.transact(work)

    # -- reading -------------------------------------------------------------

    def resolve(self, rev: str = "HEAD", as_of: datetime | None = None) -> Commit:
        """The commit a revision names (see ``INTERFACE.md`` for the syntax)."""
        with self._view() as view:
            oid = resolve(view, rev, as_of=aware(as_of) if as_of is not None else None)
            return Commit.from_object(oid, view.commit(oid))

    def get(
        self,
        id: str,
        at: str | None = None,
        as_of: datetime | None = None,
        *,
        include_expired: bool = False,
    ) -> Node | None:
        """The version of ``id`` in a snapshot (default: HEAD), or None when absent.

        Args:
            id: the node id.
            at: a revision (see ``INTERFACE.md``); default HEAD.
            as_of: read the branch as it was at this record time, per its reflog.
            include_expired: return a node even past its ``expires_at`` (judged at
                ``as_of`` when given, else now by the store's clock).
        """
        check_id(id)
        with self._view() as view:
            tip = self._tip(view, at, as_of)
            if tip is None:
                return None
            value = view.tree.get(view.commit(tip).tree, id)
            if value is None:
                return None
            node = view.node(value)
            if not include_expired and queries.expired(node, self._judged_at(as_of)):
                return None
            return node

    def nodes(
        self,
        at: str | None = None,
        as_of: datetime | None = None,
        prefix: str | None = None,
        *,
        include_expired: bool = False,
    ) -> Iterator[Node]:
        """The nodes of a snapshot (default: HEAD), ordered by id, optionally under ``prefix``.

        Expired nodes are left out unless ``include_expired``.
        """
        if prefix is not None and not isinstance(prefix, str):
            raise InvalidInput(f"prefix must be a string, not {type(prefix).__name__}")
        with self._view() as view:
            tip = self._tip(view, at, as_of)
            root = view.commit(tip).tree if tip is not None else None
        nodes = walk.nodes(self._view, root, prefix or "")
        if include_expired:
            return nodes
        now = self._judged_at(as_of)
        return (node for node in nodes if not queries.expired(node, now))

    def log(
        self,
        ref: str | None = None,
        node: str | None = None,
        limit: int | None = None,
        as_of: datetime | None = None,
    ) -> Iterator[Commit]:
        """Commits reachable from ``ref`` (default: HEAD), newest first, streaming.

        With ``node``, only the commits that changed that id (through the change
        index, without reading the others).
        """
        if node is not None:
            check_id(node)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise InvalidInput("limit must be a non-negative integer")
        with self._view() as view:
            tip = self._tip(view, ref, as_of)
            if tip is None:
                return iter(())
            if node is None:
                return walk.commits(self._view, tip, limit)
            found = []
            for oid, _ in walk.changes_of(view, node, tip):
                found.append(Commit.from_object(oid, view.commit(oid)))
                if limit is not None and len(found) >= limit:
                    break
            return iter(found)

    def history(self, id: str, ref: str | None = None) -> list[Version]:
        """Every version of ``id`` in ``ref``'s history (default: HEAD), newest first."""
        check_id(id)
        with self._view() as view:
            tip = self._tip(view, ref, None)
            if tip is None:
                return []
            return queries.history(view, id, tip, self._now())

    # -- claims and valid time ---------------------------------------------------

    def facts(
        self,
        subject: str,
        predicate: str | None = None,
        valid_at: datetime | None = None,
        as_of: datetime | None = None,
        at: str | None = None,
    ) -> list[Node]:
        """The claim nodes in force on ``subject`` at valid time ``valid_at``.

        One claim per predicate: the one with the latest ``valid_from`` not after
        ``valid_at``, unless its own ``valid_to`` has passed. Two claims are returned
        for one predicate only when they start together with different values and
        were kept on purpose (``on_claim_conflict="keep"``).

        Args:
            subject: whose facts.
            predicate: one attribute, or None for all of the subject's.
            valid_at: the world time asked about (default: now, by the store's clock).
            as_of: read the branch as it was at this record time ("what did we believe").
            at: a revision to read instead of HEAD.
        """
        with self._view() as view:
            tip = self._tip(view, at, as_of)
            if tip is None:
                return []
            now = self._judged_at(as_of)
            when = aware(valid_at, "valid_at") if valid_at is not None else now
            return queries.facts(view, tip, subject, predicate, when, now)

    def contradictions(self, ref: str | None = None) -> list[Contradiction]:
        """Open contradictions at ``ref`` (default: HEAD): merged claims that disagree.

        A contradiction stays open while both claims are in the snapshot unchanged;
        an ordinary commit that corrects or removes either one resolves it.
        """
        with self._view() as view:
            tip = self._tip(view, ref, None)
            return queries.open_contradictions(view, tip) if tip is not None else []

    def timeline(
        self, subject: str, predicate: str, as_of: datetime | None = None, at: str | None = None
    ) -> list[Fact]:
        """Every claim on one (subject, predicate), ordered by ``valid_from``.

        Each comes with the commit that recorded it, its effective interval and the
        claim it superseded in valid time.
        """
        with self._view() as view:
            tip = self._tip(view, at, as_of)
            if tip is None:
                return []
            return queries.timeline(view, tip, subject, predicate, self._judged_at(as_of))

    def blame(self, id: str, at: str | None = None) -> Blame:
        """Who wrote the current version of ``id``, when, from what; per line or field.

        Raises:
            NotFound: if the id is not in the snapshot.
        """
        check_id(id)
        with self._view() as view:
            tip = self._tip(view, at, None)
            if tip is None:
                raise NotFound(f"{id} is not in the store: there are no commits yet")
            return blame(view, id, tip)

    def diff(self, a: str, b: str, as_of: datetime | None = None) -> Diff:
        """What changed from revision ``a`` to revision ``b``.

        Walks only the parts of the two trees whose hashes differ. With ``as_of``,
        both revisions must name refs and are read as they were at that time.
        """
        when = aware(as_of) if as_of is not None else None
        with self._view() as view:
            oid_a = resolve(view, a, as_of=when)
            oid_b = resolve(view, b, as_of=when)
            root_a = view.commit(oid_a).tree
            root_b = view.commit(oid_b).tree
            added: list[Change] = []
            removed: list[Change] = []
            modified: list[Change] = []
            for key, old, new in view.tree.diff(root_a, root_b):
                change = Change(
                    key,
                    queries.readable(view, old) if old is not None else None,
                    queries.readable(view, new) if new is not None else None,
                    old.hex() if old is not None else None,
                    new.hex() if new is not None else None,
                )
                if old is None:
                    added.append(change)
                elif new is None:
                    removed.append(change)
                else:
                    modified.append(change)
            return Diff(a=oid_a.hex(), b=oid_b.hex(), added=added, removed=removed, modified=modified)

    # -- tenants -----------------------------------------------------------------

    def tenants(self) -> list[str]:
        """Names of the store's tenants, sorted."""
        with self._kv.read() as txn:
            return tenant_names(txn)

    def drop_tenant(self, name: str) -> int:
        """Delete a whole tenant: its objects, refs, reflogs and indexes.

        The handle's own tenant cannot be dropped (open another tenant's handle to
        do it). A tenant later created under the same name starts empty, in a new
        key scope. Handles still bound to the dropped tenant refuse every read and
        write with ``NotFound`` from then on, so they neither see the new tenant's
        data nor write into the dropped scope.

        Returns:
            The number of keys deleted.

        Raises:
            NotFound: no such tenant.
            InvalidInput: it is this handle's tenant.
        """
        check_tenant_name(name)
        if name == self.tenant:
            raise InvalidInput(f"cannot drop tenant {name!r} from a handle bound to it")
        return self._kv.transact(lambda txn: drop_tenant(txn, name))

    # -- integrity -------------------------------------------------------------

    def fsck(self) -> FsckReport:
        """Re-hash every object; check refs, reflogs, commits, trees and derived indexes.

        Returns:
            A report; ``ok`` is False when anything is wrong, and ``problems`` says what.
        """
        with self._view() as view:
            return fsck(view)

    def reindex(self) -> int:
        """Rebuild the derived indexes (commit graph, change index) from the commits.

        Returns:
            The number of index entries written.
        """

        def work(txn: WriteTxn) -> int:
            check_bound(txn, self.tenant, self._scope)
            return reindex(self._stores, txn)

        return self._kv.transact(work)

    def revert(self, commit: str, *, author: str = "unknown", message: str | None = None) -> Commit:
        """Undo one commit with a new commit on the current branch.

        Raises:
            MergeConflict: an id the commit changed has changed again since.
        """
        with self._view() as view:
            tip = self._tip(view, None, None)
            if tip is None:
                raise NotFound("the current branch has no commits")
            oid, summary, puts, removals = branching.inverse(view, commit, tip)
        return self.commit(
            puts,
            removals,
            message=message or f"Revert {oid.hex()[:7]}: {summary}",
            author=author,
            parent=tip.hex(),
        )


def _store_path(path: str | os.PathLike[str]) -> Path:
    if not isinstance(path, str | os.PathLike):
        raise InvalidInput(f"a store path must be a string or a path, not {type(path).__name__}")
    return Path(path)


def _iterable(*values: object) -> bool:
    return all(isinstance(value, Iterable) for value in values)


def _with_id(node: Node, node_id: str) -> Node:
    return msgspec.structs.replace(node, id=node_id)

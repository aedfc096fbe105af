"""``Repo``: the Python API of one tenant of a store.

A thin facade over the objects that own each job (history, branches, recall,
erasure, maintenance), all sharing one :class:`~mnemosyne.api.handle.Handle`.
The methods of remotes, recall and upkeep (erasure and maintenance) are in
mixins of their own (:mod:`~mnemosyne.api.repo_sync`,
:mod:`~mnemosyne.api.repo_recall`, :mod:`~mnemosyne.api.repo_upkeep`).
Returns data (Structs and iterators) and raises the :mod:`mnemosyne.errors`
tree; never prints, never reads the environment, and takes its clock as a
parameter so record time is testable.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mnemosyne.api.handle import Clock, Handle, Resource, system_clock
from mnemosyne.api.repo_recall import RecallMethods
from mnemosyne.api.repo_sync import RemoteMethods
from mnemosyne.api.repo_upkeep import UpkeepMethods
from mnemosyne.api.store import Location, Store
from mnemosyne.errors import InvalidInput
from mnemosyne.model.choices import ClaimPolicy, MergeStrategy
from mnemosyne.model.defaults import DEFAULT_AUTHOR, DEFAULT_TENANT
from mnemosyne.store import tenancy
from mnemosyne.store.kv.lmdb_kv import DEFAULT_MAP_SIZE, DEFAULT_MAX_MAP_SIZE

if TYPE_CHECKING:
    from mnemosyne.api.branches import Branches
    from mnemosyne.api.history import History
    from mnemosyne.history.branches import Resolution
    from mnemosyne.history.revisions import Rev
    from mnemosyne.model.objects import Commit, Node
    from mnemosyne.model.results import (
        Blame,
        CommitResult,
        Contradiction,
        Diff,
        Fact,
        MergeResult,
        Version,
    )
    from mnemosyne.model.times import TimeLike
    from mnemosyne.recall.embedders import Embedder
    from mnemosyne.store.kv.base import KV

_UNSET: Any = object()


def _renamed(old: str, new: str, old_value: Any, new_value: Any) -> Any:
    """The value of a renamed keyword argument, warning when the old name was used."""
    if old_value is _UNSET:
        return new_value
    if new_value is not None:
        raise InvalidInput(f"give {new}= alone ({old}= is its old name)")
    warnings.warn(f"{old}= is deprecated; use {new}=", DeprecationWarning, stacklevel=3)
    return old_value


class Repo(RemoteMethods, RecallMethods, UpkeepMethods, Resource):
    """A store of agent memory, bound to one tenant.

    Open one with :meth:`init`, :meth:`open`, :meth:`in_memory` or
    :meth:`Store.repo`; use it as a context manager or call :meth:`close`. A
    ``Repo`` may be shared by threads (reads run concurrently, writes are
    serialised); open it again in a forked child rather than carrying it across
    ``fork()``. Every revision argument (``at=``, ``a``, ``b``, ``to``, …) takes
    revision text or a :class:`Commit`; every time argument (``as_of=``,
    ``valid_at=``) a timezone-aware datetime or RFC 3339 text.
    """

    def __init__(self, store: Store, handle: Handle, *, owned: bool) -> None:
        """Use :meth:`init`, :meth:`open`, :meth:`in_memory` or :meth:`Store.repo` instead."""
        self.store = store
        self._owned = owned
        self._handle = handle

    # The parts are made (and their modules imported) when first used: a short-lived
    # process that only reads history never loads merge, recall or erasure.

    @functools.cached_property
    def _history(self) -> History:
        from mnemosyne.api.history import History

        return History(self._handle)

    @functools.cached_property
    def _branches(self) -> Branches:
        from mnemosyne.api.branches import Branches

        return Branches(self._handle)

    @classmethod
    def bind(
        cls,
        store: Store,
        tenant: str,
        *,
        create: bool,
        clock: Clock,
        embedder: Embedder | str | None,
        owned: bool,
    ) -> Repo:
        """A handle on ``tenant`` of an open store (see :meth:`Store.repo`)."""
        tenancy.check_tenant_name(tenant)
        scope = tenancy.open_tenant(store.kv, tenant, create, store.where)
        repo = cls(store, Handle(store.kv, scope, tenant, clock), owned=owned)
        if embedder is not None:
            try:
                repo.use_embedder(embedder)
            except BaseException:
                repo.close()
                raise
        return repo

    # -- opening -------------------------------------------------------------

    @classmethod
    def init(
        cls,
        path: Location,
        *,
        clock: Clock = system_clock,
        map_size: int = DEFAULT_MAP_SIZE,
        max_map_size: int = DEFAULT_MAX_MAP_SIZE,
        sync: bool = True,
        embedder: Embedder | str | None = None,
    ) -> Repo:
        """Create a new store in the directory ``path`` and open its default tenant.

        Keyword arguments are those of :meth:`open` (see :meth:`Store.init`).

        Raises:
            InvalidInput: if a store (or any other file) is already there.
        """
        store = Store.init(path, map_size=map_size, max_map_size=max_map_size, sync=sync)
        return cls._owning(store, DEFAULT_TENANT, False, clock, embedder)

    @classmethod
    def open(
        cls,
        path: Location,
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
        """Open an existing store, bound to one tenant: ``Store.open(path).repo(tenant)`` in one call.

        Args:
            path: the store directory.
            tenant: the tenant whose keyspace this handle is bound to.
            create: create the tenant if it does not exist yet.
            readonly: open for inspection; any write raises ``InvalidInput``.
            clock: where record time comes from.
            map_size: initial LMDB map size in bytes.
            max_map_size: the map grows on demand up to this size.
            sync: flush every commit to disk before returning (off: faster bulk
                loads, and a crash may lose the latest commits, never the store).
            embedder: the embedder for semantic search (an ``Embedder`` or a name:
                ``hash``, ``hash-DIM``, ``minilm``, ``none``); default: the store's
                ``embedder`` setting.

        Raises:
            NotFound: no store at ``path``, or an unknown tenant without ``create``.
            InvalidInput: a store of a newer format, or a bad tenant name.
        """
        tenancy.check_tenant_name(tenant)
        store = Store.open(path, readonly=readonly, map_size=map_size, max_map_size=max_map_size, sync=sync)
        return cls._owning(store, tenant, create, clock, embedder)

    @classmethod
    def in_memory(cls, *, clock: Clock = system_clock, embedder: Embedder | str | None = None) -> Repo:
        """A store held in memory only: for tests and throwaway experiments."""
        return cls._owning(Store.in_memory(), DEFAULT_TENANT, False, clock, embedder)

    @classmethod
    def _owning(
        cls, store: Store, tenant: str, create: bool, clock: Clock, embedder: Embedder | str | None
    ) -> Repo:
        try:
            return cls.bind(store, tenant, create=create, clock=clock, embedder=embedder, owned=True)
        except BaseException:
            store.close()
            raise

    def close(self) -> None:
        """Release the handle; a handle that opened its store closes the store too."""
        if self._owned:
            self.store.close()

    def __repr__(self) -> str:
        return f"<Repo {self.store.where} tenant={self.tenant}>"

    @property
    def tenant(self) -> str:
        """The tenant this handle is bound to."""
        return self._handle.tenant

    @property
    def path(self) -> Path | None:
        """The store's directory (None in memory)."""
        return self.store.path

    @property
    def readonly(self) -> bool:
        """Whether the handle refuses writes."""
        return self._handle.readonly

    def now(self) -> datetime:
        """The store's clock, in UTC: the time record times and expiry are judged by.

        Raises:
            InvalidInput: the clock returned a naive datetime.
        """
        return self._handle.now()

    @property
    def kv(self) -> KV:
        """The storage backend (for maintenance tools and benchmarks)."""
        return self._handle.kv

    # -- writing -------------------------------------------------------------

    def commit(
        self,
        put: Iterable[Node] = (),
        delete: Iterable[str] = (),
        *,
        message: str = "",
        author: str = DEFAULT_AUTHOR,
        branch: str | None = None,
        parent: Rev | None = None,
        meta: dict[str, Any] | None = None,
        allow_empty: bool = False,
        on_claim_conflict: ClaimPolicy = "refuse",
    ) -> CommitResult:
        """Record new versions of nodes and removals of ids as one atomic commit.

        The commit applies to the branch tip found inside its write transaction, so
        concurrent writers never lose each other's commits. A commit whose puts and
        removals change nothing writes nothing and returns the tip as it is
        (``created`` False), so a write retried after a timeout never fails.

        Args:
            put: node versions to write; a node without an id gets a generated one.
            delete: ids to remove from the snapshot (history keeps them).
            message: why.
            author: who.
            branch: the branch to commit to (default: HEAD's branch); it must
                exist (create it with :meth:`branch`), unless it is HEAD's.
            parent: the commit the caller expects at the tip (optimistic concurrency).
            meta: optional JSON map stored in the commit (run id, …).
            allow_empty: record a commit even when the snapshot does not change.
            on_claim_conflict: what to do when a claim starts at the same ``valid_from``
                as another claim on the same (subject, predicate) with a different value:
                ``"refuse"`` (raise ``ClaimConflict``, the default), ``"replace"``
                (remove the other claims in this commit) or ``"keep"`` (keep both;
                ``facts`` then returns both until a later commit resolves it).

        Returns:
            The commit (a :class:`Commit`) with the ids written (``put_ids``,
            generated ones included) and removed (``deleted_ids``), and ``created``.

        Raises:
            InvalidInput: bad nodes, ids or meta; an id both written and removed.
            NotFound: removing an id that is not in the branch; an unknown ``parent``;
                no such branch.
            RefConflict: ``parent`` was given and the branch has moved past it.
            ClaimConflict: a claim conflicts with another and the policy is ``"refuse"``.
        """
        return self._history.commit(
            put,
            delete,
            message=message,
            author=author,
            branch=branch,
            parent=parent,
            meta=meta,
            allow_empty=allow_empty,
            on_claim_conflict=on_claim_conflict,
        )

    def verify(
        self, *ids: str, by: str | None = None, note: str | None = None, branch: str | None = None
    ) -> Commit:
        """Record that the current versions of ``ids`` were re-confirmed, without a new version.

        One commit whose tree is the tip's, so no node and no hash changes; its
        record time (the store's clock) is when they were last confirmed, which
        ``history``, ``blame``, ``Hit.confirmed_at`` and ``verified_within=`` read.

        Args:
            ids: the ids to verify (one or more).
            by: who confirmed them (the commit's author; default ``unknown``).
            note: how or why (the commit's message; default ``verify ID``).
            branch: the branch whose tip holds them (default: HEAD's branch).

        Returns:
            The verification commit; its ``verified`` names the ids.

        Raises:
            NotFound: an id is not in the branch, or the branch has no commits
                (nothing is written).
            InvalidInput: no ids, a bad id or branch name.
        """
        return self._history.verify(ids, by=by, note=note, branch=branch)

    def revert(
        self, commit: Rev, *, author: str = DEFAULT_AUTHOR, message: str | None = None
    ) -> CommitResult:
        """Undo one commit with a new commit on the current branch.

        Raises:
            MergeConflict: an id the commit changed has changed again since.
            InvalidInput: the commit is a merge.
        """
        return self._history.revert(commit, author=author, message=message)

    # -- reading -------------------------------------------------------------

    def resolve(self, rev: Rev = "HEAD", *, as_of: TimeLike | None = None) -> Commit:
        """The commit a revision names (see the README's "Revisions and times").

        Raises:
            NotFound: nothing by that name (HEAD on a branch with no commits yet too).
        """
        return self._history.resolve(rev, as_of)

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
        return self._history.get(id, at, as_of, include_expired)

    def nodes(
        self,
        *,
        at: Rev | None = None,
        as_of: TimeLike | None = None,
        prefix: str | None = None,
        include_expired: bool = False,
        allowed_for: str | None = None,
        max_sensitivity: str | None = None,
        verified_within: timedelta | None = None,
    ) -> Iterator[Node]:
        """The nodes of a snapshot (default: HEAD), ordered by id, optionally under ``prefix``.

        Expired nodes are left out unless ``include_expired``; erased ones always.
        ``allowed_for``, ``max_sensitivity`` and ``verified_within`` leave out what
        they leave out of :meth:`search`.
        """
        return self._history.nodes(
            at, as_of, prefix, include_expired, allowed_for, max_sensitivity, verified_within
        )

    def log(
        self,
        *,
        at: Rev | None = None,
        node: str | None = None,
        limit: int | None = None,
        as_of: TimeLike | None = None,
        ref: Rev | None = _UNSET,
    ) -> Iterator[Commit]:
        """Commits reachable from ``at`` (default: HEAD), newest first, streaming.

        With ``node``, only the commits that changed that id (through the change
        index, without reading the others). ``ref=`` is the old name of ``at=``.
        """
        return self._history.log(_renamed("ref", "at", ref, at), node, limit, as_of)

    def history(
        self, id: str, *, at: Rev | None = None, ref: Rev | None = _UNSET, limit: int | None = None
    ) -> list[Version]:
        """Every version of ``id`` in ``at``'s history (default: HEAD), newest first.

        Each version has its status (``current``, ``superseded``, ``deleted``,
        ``expired``, ``redacted``), the commit that wrote it and the one that ended
        it; an erased one has its redaction record. ``ref=`` is the old name of ``at=``.
        With ``limit``, only the newest ``limit`` versions, read without the older ones.
        """
        return self._history.history(id, _renamed("ref", "at", ref, at), limit)

    def blame(self, id: str, *, at: Rev | None = None) -> Blame:
        """Who wrote the current version of ``id``, when, from what; per line or field.

        Raises:
            NotFound: if the id is not in the snapshot.
        """
        return self._history.blame(id, at)

    def diff(self, a: Rev | None, b: Rev, *, as_of: TimeLike | None = None) -> Diff:
        """What changed from revision ``a`` to revision ``b``.

        Walks only the parts of the two trees whose hashes differ. With ``as_of``,
        both revisions must name refs and are read as they were at that time.
        ``a=None`` is the empty snapshot: what a root commit added (``Diff.a`` is
        then None), erased versions included by their hashes.
        """
        return self._history.diff(a, b, as_of)

    # -- claims and valid time -----------------------------------------------

    def facts(
        self,
        subject: str,
        predicate: str | None = None,
        *,
        valid_at: TimeLike | None = None,
        as_of: TimeLike | None = None,
        at: Rev | None = None,
        verified_within: timedelta | None = None,
    ) -> list[Fact]:
        """The claims in force on ``subject`` at valid time ``valid_at``, as facts.

        One claim per predicate: the one with the latest ``valid_from`` not after
        ``valid_at``, unless its own ``valid_to`` has passed. Two claims are returned
        for one predicate only when they start together with different values and
        were kept on purpose (``on_claim_conflict="keep"``), or a merge left them
        contradicting each other. Each fact carries its node, the commit that
        recorded it and its effective interval.

        Args:
            subject: whose facts.
            predicate: one attribute, or None for all of the subject's.
            valid_at: the world time asked about (default: now, by the store's clock).
            as_of: read the branch as it was at this record time ("what did we believe").
            at: a revision to read instead of HEAD.
            verified_within: leave out facts last confirmed (written, or verified
                with :meth:`verify`) longer ago than this before ``as_of`` (else now).
                Each fact's ``confirmed_at`` says when, with or without it.
        """
        return self._history.facts(subject, predicate, valid_at, as_of, at, verified_within)

    def timeline(
        self, subject: str, predicate: str, *, as_of: TimeLike | None = None, at: Rev | None = None
    ) -> list[Fact]:
        """Every claim on one (subject, predicate), ordered by ``valid_from``.

        Each comes with the commit that recorded it, its effective interval and the
        claim it superseded in valid time.
        """
        return self._history.timeline(subject, predicate, as_of, at)

    def contradictions(
        self, *, at: Rev | None = None, ref: Rev | None = _UNSET, recorded: bool = False
    ) -> list[Contradiction]:
        """Open contradictions at ``at`` (default: HEAD): merged claims that disagree.

        A contradiction stays open while both claims are in the snapshot unchanged;
        an ordinary commit that corrects or removes either one resolves it.
        With ``recorded=True``, instead the contradictions the commit ``at`` itself
        recorded (a merge's; none for other commits), open or resolved since; one
        whose claim was erased since is left out, as it contradicts nothing.
        ``ref=`` is the old name of ``at=``.
        """
        return self._history.contradictions(_renamed("ref", "at", ref, at), recorded)

    # -- branches ------------------------------------------------------------

    @property
    def head(self) -> str:
        """The name of the current branch."""
        return self._branches.head()

    def branches(self) -> list[str]:
        """Names of the branches that have commits, sorted."""
        return self._branches.names()

    def tip(self, branch: str) -> str | None:
        """The id of the commit at ``branch``'s tip, read without reading the commit.

        A cheap check of whether a branch moved (objects never change, so what was
        read at one tip stays true while the tip stays). None when the branch does
        not exist or has no commits yet.

        Raises:
            InvalidInput: ``branch`` is not a valid branch name.
        """
        return self._branches.tip(branch)

    def branch_tips(self) -> list[tuple[str, Commit]]:
        """Each branch with the commit at its tip, sorted by name."""
        return self._branches.tips()

    def branch(
        self,
        name: str,
        *,
        at: Rev | None = None,
        orphan: bool = False,
        author: str = DEFAULT_AUTHOR,
        start: Rev | None = _UNSET,
    ) -> Commit | None:
        """Create branch ``name`` at revision ``at`` (default: HEAD); return the commit it starts at.

        From HEAD on a branch with no commits yet, the new branch has none either
        (as ``git switch -c`` does) and None is returned: the first commit on it
        starts it. An ``orphan`` branch has no commits whatever HEAD has (as
        ``git switch --orphan``): its first commit starts an unrelated history.
        ``start=`` is the old name of ``at=``.

        Raises:
            InvalidInput: a bad name, the branch exists, or ``orphan`` with ``at``.
            NotFound: ``at`` does not resolve.
        """
        return self._branches.create(name, _renamed("start", "at", start, at), author, orphan)

    def delete_branch(self, name: str, *, author: str = DEFAULT_AUTHOR) -> Commit | None:
        """Delete a branch; return the commit it pointed at (None: it had none). Its reflog stays.

        Raises:
            NotFound: no such branch.
            InvalidInput: it is the current branch.
        """
        return self._branches.delete(name, author)

    def switch(self, name: str) -> None:
        """Make ``name`` the current branch.

        Raises:
            NotFound: no such branch.
        """
        self._branches.switch(name)

    def reset(self, branch: str, to: Rev, *, author: str = DEFAULT_AUTHOR) -> Commit:
        """Move ``branch`` to revision ``to`` (reflogged, so as-of reads stay honest)."""
        return self._branches.reset(branch, to, author)

    def merge(
        self,
        source: Rev,
        *,
        into: str | None = None,
        resolutions: Mapping[str, Resolution] | None = None,
        strategy: MergeStrategy | None = None,
        message: str | None = None,
        author: str = DEFAULT_AUTHOR,
    ) -> MergeResult:
        """Merge revision ``source`` into branch ``into`` (default: the current branch).

        Fast-forwards when possible; otherwise merges three ways per id against the
        merge base (see :mod:`mnemosyne.history.merge` for the table). With conflicts
        and no resolutions nothing is written and ``commit`` is None: call again with
        ``resolutions`` ({id: "ours" | "theirs" | "base" | "delete" | Node}) or a
        ``strategy`` ("ours" | "theirs") for every conflict.

        Raises:
            MergeConflict: resolutions name ids not in conflict, or leave some unresolved.
            NotFound: ``source`` or ``into`` does not exist.
        """
        return self._branches.merge(source, into, resolutions, strategy, message, author)

    def is_ancestor(self, ancestor: Rev, descendant: Rev) -> bool:
        """Whether revision ``ancestor`` is reachable from ``descendant`` (or is it)."""
        return self._branches.is_ancestor(ancestor, descendant)

    def bisect(self, predicate: Callable[[Commit], bool], good: Rev, bad: Rev) -> Commit:
        """The first commit after ``good`` on ``bad``'s first-parent line where ``predicate`` holds.

        Binary search: about log2(n) evaluations of ``predicate`` for n commits
        between the two, found through skip pointers without walking them all.
        ``predicate`` receives a commit; read the memory there with ``at=commit``.

        Raises:
            InvalidInput: ``good`` is not a first-parent ancestor of ``bad``, the
                predicate is false at ``bad`` or already true at ``good``.
        """
        return self._branches.bisect(predicate, good, bad)

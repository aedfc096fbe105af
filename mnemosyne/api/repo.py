"""``Repo``: the Python API of one tenant of a store.

One class, composed: a ``Repo`` holds its parts as attributes, as dulwich's
``Repo`` holds its object store and refs, and each public method carries the
full signature and docstring and delegates to the part that owns the job:

- ``store``: the whole :class:`~mnemosyne.api.store.Store` it is a tenant of
  (settings, tenants, remotes' configuration, backups, compaction);
- ``_handle``: the tenant's backend, key scope and clock, and the one way to
  open a read or a write transaction (every part holds the same one);
- ``_history``: commits and every read of history;
- ``_claims``: claims and valid time (facts, timelines);
- ``_branches``: branches, merges and bisection;
- ``_recall``: embedders, search, context and the read log;
- ``_erasure`` and ``_maintenance``: forgetting, collection, fsck and reindexing;
- ``_remote_ops``: fetch, push, pull and a served transfer's answer
  (:class:`~mnemosyne.api._repo_remotes.RemoteOps`, over the remotes' porcelain).

Most groups are stated where their work is (ADR 63): the methods of remotes,
branches, snapshot reads, claims, search and context, erasure and upkeep are
their parts' own, made ``Repo``'s by :func:`~mnemosyne.api._delegates.delegate`
(signature and docstring included), and the opening class methods keep their signatures here and take
their docstrings from :mod:`mnemosyne.api._repo_opening`.
``help(Repo)`` shows every method as before.

Returns data (Structs and iterators) and raises the :mod:`mnemosyne.errors`
tree; never prints, never reads the environment, and takes its clock as a
parameter so record time is testable.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mnemosyne.api import _repo_opening, _tenant_binding
from mnemosyne.api._branch_service import BranchService
from mnemosyne.api._claims_service import ClaimsService
from mnemosyne.api._delegates import delegate, documented_by
from mnemosyne.api._erasure_service import ErasureService
from mnemosyne.api._handle import Clock, Handle, Resource, system_clock
from mnemosyne.api._history_service import HistoryService
from mnemosyne.api._maintenance_service import MaintenanceService
from mnemosyne.api._recall_service import RecallService
from mnemosyne.api._renamed_keywords import UNSET, renamed
from mnemosyne.api._repo_remotes import RemoteOps
from mnemosyne.api.locations import Location
from mnemosyne.api.store import Store
from mnemosyne.model.choices import ClaimPolicy
from mnemosyne.model.defaults import (
    DEFAULT_AUTHOR,
    DEFAULT_TENANT,
    GC_GRACE,
)
from mnemosyne.store.kv.lmdb_kv import DEFAULT_MAP_SIZE, DEFAULT_MAX_MAP_SIZE

if TYPE_CHECKING:
    from mnemosyne.history.revisions import Rev
    from mnemosyne.model.objects import Commit, Node
    from mnemosyne.model.reports import BucketOptions, GcReport
    from mnemosyne.model.results import (
        CommitResult,
        Contradiction,
        PendingRecall,
        Version,
    )
    from mnemosyne.model.times import TimeLike
    from mnemosyne.recall.embedders import Embedder
    from mnemosyne.store.kv.base import KV


class Repo(Resource):
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
        """Use :meth:`open`, :meth:`init`, :meth:`in_memory` or :meth:`clone` instead."""
        self.store = store
        self._owned = owned
        self._handle = handle
        self._history = HistoryService(handle)
        self._claims = ClaimsService(handle)
        self._branches = BranchService(handle)
        self._recall = RecallService(handle, store.index_location)
        self._erasure = ErasureService(handle, store.compact)
        self._maintenance = MaintenanceService(handle, store.index_location)
        self._remote_ops = RemoteOps(store, handle)

    # -- opening: the work and the docstrings are api/_repo_opening.py's ------
    # (the signatures stay here, since they return a Repo; D102: documented_by gives the docstring)

    @classmethod
    @documented_by(_repo_opening.init)
    def init(  # noqa: D102
        cls,
        path: Location,
        *,
        clock: Clock = system_clock,
        map_size: int = DEFAULT_MAP_SIZE,
        max_map_size: int = DEFAULT_MAX_MAP_SIZE,
        sync: bool = True,
        embedder: Embedder | str | None = None,
        index_cache: str | os.PathLike[str] | None = None,
    ) -> Repo:
        return _repo_opening.init(
            cls,
            path,
            clock=clock,
            map_size=map_size,
            max_map_size=max_map_size,
            sync=sync,
            embedder=embedder,
            index_cache=index_cache,
        )

    @classmethod
    @documented_by(_repo_opening.open)
    def open(  # noqa: D102
        cls,
        path: Location | Store,
        *,
        tenant: str = DEFAULT_TENANT,
        create: bool = False,
        readonly: bool | Literal["auto"] = False,
        clock: Clock = system_clock,
        map_size: int = DEFAULT_MAP_SIZE,
        max_map_size: int = DEFAULT_MAX_MAP_SIZE,
        sync: bool = True,
        embedder: Embedder | str | None = None,
        index_cache: str | os.PathLike[str] | None = None,
    ) -> Repo:
        return _repo_opening.open(
            cls,
            path,
            tenant=tenant,
            create=create,
            readonly=readonly,
            clock=clock,
            map_size=map_size,
            max_map_size=max_map_size,
            sync=sync,
            embedder=embedder,
            index_cache=index_cache,
        )

    @classmethod
    @documented_by(_repo_opening.in_memory)
    def in_memory(cls, *, clock: Clock = system_clock, embedder: Embedder | str | None = None) -> Repo:  # noqa: D102
        return _repo_opening.in_memory(cls, clock=clock, embedder=embedder)

    @classmethod
    @documented_by(_repo_opening.clone)
    def clone(  # noqa: D102
        cls,
        source: Location | Store,
        path: Location,
        *,
        tenant: str | None = None,
        all_tenants: bool = False,
        clock: Clock = system_clock,
        author: str = DEFAULT_AUTHOR,
        token: str | None = None,
        token_file: Location | None = None,
        bucket: BucketOptions | None = None,
    ) -> Repo:
        return _repo_opening.clone(
            cls,
            source,
            path,
            tenant=tenant,
            all_tenants=all_tenants,
            clock=clock,
            author=author,
            token=token,
            token_file=token_file,
            bucket=bucket,
        )

    def close(self) -> None:
        """Release the handle; a handle that opened its store closes the store too."""
        self._recall.forget_vectors()  # and the saved index files it maps
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

    @property
    def dropped(self) -> bool:
        """Whether this handle's tenant was dropped (or dropped and made again) since it opened.

        Such a handle refuses every read and write with ``NotFound``: a process that
        keeps handles (a server) opens the tenant again.
        """
        return _tenant_binding.dropped(self.store, self._handle)

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
        """The commit a revision names (see docs/python-api.md, "Revisions and times").

        Raises:
            NotFound: nothing by that name (HEAD on a branch with no commits yet too).
        """
        return self._history.resolve(rev, as_of)

    get = delegate(HistoryService.get, via="_history")

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
        after: str | None = None,
    ) -> Iterator[Node]:
        """The nodes of a snapshot (default: HEAD), ordered by id, optionally under ``prefix``.

        Expired nodes are left out unless ``include_expired``; erased ones always.
        ``allowed_for``, ``max_sensitivity`` and ``verified_within`` leave out what
        they leave out of :meth:`search`. ``after`` starts past an id (the last one
        of the previous page), reading from there rather than from the start.
        """
        return self._history.nodes(
            at, as_of, prefix, include_expired, allowed_for, max_sensitivity, verified_within, after
        )

    ids = delegate(HistoryService.ids, via="_history")

    histories = delegate(HistoryService.histories, via="_history")

    def log(
        self,
        *,
        at: Rev | None = None,
        node: str | None = None,
        limit: int | None = None,
        as_of: TimeLike | None = None,
        ref: Rev | None = UNSET,
    ) -> Iterator[Commit]:
        """Commits reachable from ``at`` (default: HEAD), newest first, streaming.

        With ``node``, only the commits that changed that id (through the change
        index, without reading the others). ``ref=`` is the old name of ``at=``.
        """
        return self._history.log(renamed("ref", "at", ref, at), node, limit, as_of)

    def history(
        self, id: str, *, at: Rev | None = None, ref: Rev | None = UNSET, limit: int | None = None
    ) -> list[Version]:
        """Every version of ``id`` in ``at``'s history (default: HEAD), newest first.

        Each version has its status (``current``, ``superseded``, ``deleted``,
        ``expired``, ``redacted``), the commit that wrote it and the one that ended
        it; an erased one has its redaction record. ``ref=`` is the old name of ``at=``.
        With ``limit``, only the newest ``limit`` versions, read without the older ones.
        """
        return self._history.history(id, renamed("ref", "at", ref, at), limit)

    blame = delegate(HistoryService.blame, via="_history")

    diff = delegate(HistoryService.diff, via="_history")

    # -- claims and valid time -----------------------------------------------

    facts = delegate(ClaimsService.facts, via="_claims")

    timeline = delegate(ClaimsService.timeline, via="_claims")

    timeline_history = delegate(ClaimsService.timeline_history, via="_claims")

    def contradictions(
        self, *, at: Rev | None = None, ref: Rev | None = UNSET, recorded: bool = False
    ) -> list[Contradiction]:
        """Open contradictions at ``at`` (default: HEAD): merged claims that disagree.

        A contradiction stays open while both claims are in the snapshot unchanged;
        an ordinary commit that corrects or removes either one resolves it.
        With ``recorded=True``, instead the contradictions the commit ``at`` itself
        recorded (a merge's; none for other commits), open or resolved since; one
        whose claim was erased since is left out, as it contradicts nothing.
        ``ref=`` is the old name of ``at=``.
        """
        return self._history.contradictions(renamed("ref", "at", ref, at), recorded)

    # -- branches: the methods of BranchService (api/_branch_service.py), docstrings included --

    @property
    def head(self) -> str:
        """The name of the current branch."""
        return self._branches.head()

    branches = delegate(BranchService.branches, via="_branches")
    tip = delegate(BranchService.tip, via="_branches")
    freshness = delegate(BranchService.freshness, via="_branches")
    branch_tips = delegate(BranchService.branch_tips, via="_branches")
    thread_branch = delegate(BranchService.thread_branch, via="_branches")
    thread = delegate(BranchService.thread, via="_branches")
    threads = delegate(BranchService.threads, via="_branches")
    branch = delegate(BranchService.branch, via="_branches")
    delete_branch = delegate(BranchService.delete_branch, via="_branches")
    switch = delegate(BranchService.switch, via="_branches")
    reset = delegate(BranchService.reset, via="_branches")
    merge = delegate(BranchService.merge, via="_branches")
    is_ancestor = delegate(BranchService.is_ancestor, via="_branches")
    bisect = delegate(BranchService.bisect, via="_branches")

    # -- recall --------------------------------------------------------------

    def use_embedder(self, embedder: Embedder | str | None) -> None:
        """Use ``embedder`` for this handle.

        An ``Embedder``, a name (``hash``, ``hash-DIM``, ``minilm``,
        ``minilm-sentences``, ``none``), or None for no semantic search. Without a
        call, the store's ``embedder`` setting decides.
        """
        self._recall.use(embedder)

    def embedder(self) -> Embedder | None:
        """The embedder this handle uses (loaded on first use from the store's setting)."""
        return self._recall.embedder()

    def config(self, key: str, value: str | None = None) -> str:
        """Read a store setting, or change it when ``value`` is given (see :meth:`Store.config`)."""
        found = self.store.config(key, value)
        if value is not None and key == "embedder":
            self._recall.settings_changed()
        return found

    search = delegate(RecallService.search, via="_recall")

    context = delegate(RecallService.context, via="_recall")

    def pending_recall(self) -> PendingRecall:
        """What the next search or context does before it answers, and how much of it.

        Commits only queue what they write; the first search after (on a writable
        handle) indexes it and embeds new contents with this handle's embedder. After
        a bulk load that can take minutes with a real model: a face can say so first,
        and show progress with the search's ``progress=``. A read-only handle's
        searches do none of it (the counts say what a writable one would do).
        """
        return self._recall.pending()

    reads = delegate(RecallService.reads, via="_recall")

    def reindex_recall(
        self, *, vectors: bool = False, progress: Callable[[int, int], None] | None = None
    ) -> int:
        """Rebuild the recall indexes from the stored node versions.

        Args:
            vectors: also drop and recompute every embedding of the current model.
            progress: called with (done, total) as versions are indexed.

        Returns:
            How many node versions were indexed.
        """
        return self._recall.reindex(vectors, progress)

    # -- erasure and collection ----------------------------------------------

    redactions = delegate(ErasureService.redactions, via="_erasure")

    erasures = delegate(ErasureService.erasures, via="_erasure")

    forget = delegate(ErasureService.forget, via="_erasure")

    forget_expired = delegate(ErasureService.forget_expired, via="_erasure")

    def gc(
        self,
        grace: timedelta = GC_GRACE,
        compact: bool = False,
        expire_reflog: timedelta | None = None,
    ) -> GcReport:
        """Remove objects unreachable from every ref and retained reflog entry.

        An object goes only after it has been unreachable for ``grace`` (the first
        collection that finds it starts its clock; ``timedelta(0)`` removes at once).
        Reflogs are kept forever unless ``expire_reflog`` prunes entries older than
        that (as-of reads before the horizon then give ``NotFound``).

        Args:
            grace: how long an object must stay unreachable before it is removed.
            compact: afterwards rewrite the store file from its live records only, so
                erased bytes leave the disk; needs the store to itself (no other
                handle in this process, no other process).
            expire_reflog: prune reflog entries older than this.

        Raises:
            InvalidInput: ``compact`` while another handle or process has the store open.
        """
        report = self._erasure.gc(grace, compact, expire_reflog)
        if compact:
            self._recall.forget_vectors()  # let go of index files compaction replaced
        return report

    # -- maintenance ---------------------------------------------------------

    fsck = delegate(MaintenanceService.fsck, via="_maintenance")

    reindex = delegate(MaintenanceService.reindex, via="_maintenance")

    def tenants(self) -> list[str]:
        """Names of the store's tenants, sorted."""
        return self.store.tenants()

    def drop_tenant(self, name: str) -> int:
        """Delete a whole tenant (see :meth:`Store.drop_tenant`); not this handle's own.

        Raises:
            InvalidInput: it is this handle's tenant, or the default tenant.
            NotFound: no such tenant.
        """
        return _tenant_binding.drop_other_tenant(self.store, self._handle, name)

    # -- remotes: the methods of RemoteOps (api/_repo_remotes.py), docstrings included --

    fetch = delegate(RemoteOps.fetch, via="_remote_ops")
    push = delegate(RemoteOps.push, via="_remote_ops")
    pull = delegate(RemoteOps.pull, via="_remote_ops")
    remote_branches = delegate(RemoteOps.remote_branches, via="_remote_ops")
    answer_transfer = delegate(RemoteOps.answer_transfer, via="_remote_ops")

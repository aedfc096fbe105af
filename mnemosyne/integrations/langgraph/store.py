"""LangGraph's long-term memory store on a Mnemosyne repo: every batch of writes is a commit.

An item is one node: its id encodes the namespace and key (see
:mod:`~mnemosyne.integrations.langgraph.namespaces`), its content is the item's
value, and its meta keeps the namespace, key and TTL. So an agent's long-term
memory gets what the rest of Mnemosyne has: history of every item, reads as of
any time, provenance from the LangGraph run that wrote it, branches, and
erasure for real (``delete(..., erase=True)``). Each commit's message names the
items it wrote (``langgraph store: put ("users", "mira") / prefs``).
See ADR 18 for the decisions.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import msgspec
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

from mnemosyne import (
    Commit,
    History,
    InvalidInput,
    Node,
    NotFound,
    Provenance,
    Redacted,
    RefConflict,
    with_retry,
)
from mnemosyne.integrations.langgraph.adapters import IndexEmbedder, run_provenance
from mnemosyne.integrations.langgraph.items import (
    ItemMeta,
    item_meta,
    meta_of,
)
from mnemosyne.integrations.langgraph.namespaces import (
    ROOT,
    describe,
    describe_namespace,
    id_prefix,
    matches,
    node_id,
)
from mnemosyne.integrations.langgraph.opening import OwnsItsRepo
from mnemosyne.integrations.langgraph.repo_protocol import ItemRepo
from mnemosyne.integrations.langgraph.store_ops import check_op
from mnemosyne.integrations.langgraph.store_search import (
    ItemSearch,
    item_of,
    item_times,
    store_item,
)

AUTHOR = "langgraph"
"""The default author of the commits a store makes."""

ERASE_REASON = "erased on delete from the LangGraph store"
"""The reason an erasing delete keeps in its redaction records unless given one."""

LISTED = 20
"""How many of a batch's writes its commit message names, one a line, below its summary."""

# -- the store ----------------------------------------------------------------


class MnemosyneStore(OwnsItsRepo, BaseStore):
    """A LangGraph :class:`~langgraph.store.base.BaseStore` on a Mnemosyne repo.

    Each item is one node under ``langgraph-store/``; each batch's writes are one
    commit on the branch (atomic); reads in a batch see the branch as it was
    before the batch's writes. Beyond LangGraph's stores: :meth:`history`,
    ``get(..., as_of=...)`` and ``delete(..., erase=True)``.

    Example:
        >>> from mnemosyne import Repo
        >>> with Repo.in_memory() as repo:
        ...     store = MnemosyneStore(repo)
        ...     store.put(("users", "mira"), "lang", {"value": "de"})
        ...     store.get(("users", "mira"), "lang").value
        {'value': 'de'}
    """

    supports_ttl = True
    repo: ItemRepo

    def __init__(
        self,
        repo: ItemRepo,
        *,
        branch: str | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        author: str = AUTHOR,
        close_repo: bool = False,
        allowed_for: str | None = None,
        max_sensitivity: str | None = None,
        verified_within: timedelta | None = None,
        erase: bool = False,
    ) -> None:
        """Serve LangGraph from ``repo``.

        Args:
            repo: an open repo, or a served store's handle (``mnemosyne.connect(url, token=...)``);
                the store does not close it (unless :meth:`from_path` opened it).
            branch: the branch read and written (default: HEAD's, at each call).
            index: ``{"dims", "embed", "fields"}`` as LangGraph takes it: searches with
                a query then rank by meaning with these embeddings (the repo handle's
                embedder is set to them). Without it, the repo's own embedder, if any.
            ttl: LangGraph's ``TTLConfig``: ``default_ttl`` (minutes) and
                ``refresh_on_read``. Expired items are never returned; a sweep is not
                needed (``repo.forget_expired()`` erases their bytes, if wanted).
            author: the author of the commits the store makes.
            close_repo: whether :meth:`close` (and leaving a ``with`` block) closes ``repo``.
            allowed_for: every search returns only items that may serve this use
                (LangGraph's ``search`` takes no such argument): those whose value
                lists it under ``allowed_for``, and those with no list, unless the
                store setting ``recall.require_allowed_for`` is ``true``.
            max_sensitivity: every search returns only items at most this sensitive
                (the value's ``sensitivity``, on the scale ``recall.sensitivity_levels``;
                an item without one counts as ``recall.unlabeled_sensitivity``).
            verified_within: every search leaves out items last written or
                verified (``repo.verify``) longer ago than this.
            erase: every delete (``delete``, and a batch's ``PutOp`` with no value)
                also erases every version of the item (see :meth:`delete`), so a
                graph's own deletes forget for real.

        Raises:
            InvalidInput: ``repo`` is neither a Repo nor a served store, or ``index`` is
                malformed (or given for a served store, whose embeddings are the server's).
            NotFound: ``branch`` does not exist.
        """
        if not isinstance(repo, ItemRepo):
            raise InvalidInput(
                f"MnemosyneStore needs a mnemosyne.Repo or a served store (mnemosyne.connect), "
                f"not {type(repo).__name__}"
            )
        if branch is not None and branch not in repo.branches():
            raise NotFound(f"no branch {branch!r}: create it with repo.branch({branch!r})")
        if not isinstance(erase, bool):
            raise InvalidInput(f"erase must be True or False, not {erase!r}")
        self.repo = repo
        self.erase = erase
        self.branch = branch
        self.author = author
        self.index_config = index
        self.ttl_config = ttl
        self._embedder = IndexEmbedder(index) if index is not None else None
        if self._embedder is not None:
            repo.use_embedder(self._embedder)
        self.close_repo = close_repo
        self.scope: dict[str, Any] = {
            "allowed_for": allowed_for,
            "max_sensitivity": max_sensitivity,
            "verified_within": verified_within,
        }
        self.searching = ItemSearch(repo, self.scope, self._histories)
        # One commit of this store at a time: the async methods run in worker threads, and
        # many at once racing on one tip would spend their retries on each other.
        self._writing = threading.Lock()

    # -- batches --------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order; results match them one for one.

        Reads see the branch before the batch's writes. Puts and deletes are
        deduplicated per (namespace, key), the last one winning, and written as
        one commit; nothing is written if any op is invalid. Reads of items with a
        TTL and ``refresh_ttl`` push their expiry forward in a second commit.

        Raises:
            InvalidNamespaceError: a namespace LangGraph refuses.
            InvalidInput: any other malformed op (a value that is not JSON, …).
        """
        return self._run(ops, self.erase, None)

    def _run(self, ops: Iterable[Op], erase: bool, reason: str | None) -> list[Result]:
        """:meth:`batch`, erasing what it deletes when ``erase``."""
        ops = list(ops)
        for op in ops:
            check_op(op)
        # One run config per batch: every put in it carries the same provenance.
        provenance, commit_meta = run_provenance()
        writes: dict[tuple[tuple[str, ...], str], Node | str] = {}
        for op in ops:
            if isinstance(op, PutOp):
                writes[(op.namespace, op.key)] = (
                    self._node(op, provenance) if op.value is not None else node_id(op.namespace, op.key)
                )
        read: dict[str, Node] = {}
        results: list[Result] = []
        gets = [node_id(op.namespace, op.key) for op in ops if isinstance(op, GetOp)]
        others = [op for op in ops if isinstance(op, SearchOp | ListNamespacesOp)]
        # Reads see one snapshot: resolved first when several reads need it, else by the
        # one read itself, in its first round trip (``at`` is then the branch, by name).
        at: Commit | str | None = self.branch
        tip: Commit | None = None
        resolved = False
        found: dict[str, History] = {}
        if others and (gets or len(others) > 1):
            at = tip = self._tip()
            resolved = True
            found = self._histories(gets, tip) if gets and tip is not None else {}
        elif gets:
            found = self._histories(gets, self.branch)
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op, found, read))
            elif isinstance(op, SearchOp):
                results.append(
                    self.searching.search(tip, op, read) if resolved else self._search_at(op, read)
                )
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(at, resolved, op))
            else:
                results.append(None)
        if writes:
            self._write(writes, commit_meta, erase, tip)
            if erase:
                self._erase([nid for nid in writes.values() if isinstance(nid, str)], reason or ERASE_REASON)
        written = {value if isinstance(value, str) else value.id for value in writes.values()}
        self._refresh({nid: node for nid, node in read.items() if nid not in written})
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread (the run config goes with it, for provenance)."""
        return await asyncio.to_thread(self.batch, list(ops))

    def _node(self, op: PutOp, provenance: Provenance) -> Node:
        """The node a put writes (validated here, before anything is committed)."""
        assert op.value is not None
        value = dict(op.value)
        meta = ItemMeta(namespace=op.namespace, key=op.key, ttl=op.ttl)
        node = Node(
            id=node_id(op.namespace, op.key),
            content=value,
            provenance=provenance,
            meta=meta_of(meta, value),
            expires_at=None if op.ttl is None else self.repo.now() + timedelta(minutes=op.ttl),
        )
        if self._embedder is not None:
            self._embedder.note(value, op.index)
        return node

    def _tip(self) -> Commit | None:
        try:
            return self.repo.resolve(self.branch or "HEAD")
        except NotFound:  # a branch with no commits yet: an empty store
            return None

    def _histories(
        self, ids: list[str], at: Commit | str | None, limit: int | None = None, expired: bool = False
    ) -> dict[str, History]:
        """``repo.histories`` of ``ids`` at ``at`` (a branch's tip for a name or None); {} on no commits."""
        try:
            return self.repo.histories(ids, at=at, limit=limit, include_expired=expired)
        except NotFound:  # a branch with no commits yet
            return {}

    def _write(
        self,
        writes: Mapping[tuple[tuple[str, ...], str], Node | str],
        commit_meta: dict[str, Any],
        erase: bool,
        tip: Commit | None,
    ) -> None:
        """Commit a batch's puts and deletes; ``tip``, when the batch read one, is tried first."""
        puts = [(item, w) for item, w in writes.items() if isinstance(w, Node)]
        deletes = [(item, w) for item, w in writes.items() if isinstance(w, str)]
        known = [tip] if tip is not None else []

        def attempt() -> None:
            if not deletes:
                # Puts alone replace whatever is there: last writer wins, as in LangGraph's
                # SQL stores (an upsert), with no tip to read first and none to check.
                self.repo.commit(
                    put=[node for _, node in puts],
                    message=_message([("put", item) for item, _ in puts]),
                    author=self.author,
                    branch=self.branch,
                    meta=commit_meta or None,
                )
                return
            at = known.pop() if known else self._tip()
            # LangGraph deletes absent items silently; the repo refuses to remove an
            # absent id, so only the present are named, checked at the tip committed on.
            there = (
                self._histories([d for _, d in deletes], at, limit=0, expired=True) if at is not None else {}
            )
            present = [(item, d) for item, d in deletes if d in there and there[d].node is not None]
            if not puts and not present:
                return
            removing = "erase" if erase else "delete"
            said = [("put", item) for item, _ in puts] + [(removing, item) for item, _ in present]
            self.repo.commit(
                put=[node for _, node in puts],
                delete=[nid for _, nid in present],
                message=_message(said),
                author=self.author,
                branch=self.branch,
                parent=at,
                meta=commit_meta or None,
            )

        with self._writing:  # the retries are for other processes' commits
            with_retry(attempt)

    def _erase(self, ids: Sequence[str], reason: str) -> None:
        """Erase every version of each of ``ids`` (one never written has none to erase)."""
        for nid in ids:
            try:
                self.repo.forget(nid, reason, author=self.author)
            except NotFound:
                pass

    def _refresh(self, read: dict[str, Node]) -> None:
        """Push the expiry of items read with ``refresh_ttl`` forward, best effort."""
        if not read or self.repo.readonly:
            return

        def attempt() -> None:
            tip = self._tip()
            if tip is None:
                return
            now = self.repo.now()
            fresh: list[Node] = []
            said: list[tuple[str, tuple[tuple[str, ...], str]]] = []
            there = self._histories(list(read), tip, limit=0)
            for nid, old in read.items():
                meta = item_meta(old)
                current = there[nid].node if nid in there else None
                # Refresh only what is still the version read: never bring back an older value.
                if meta is None or meta.ttl is None or current is None or current.hash != old.hash:
                    continue
                fresh.append(
                    Node(
                        id=nid,
                        content=current.content,
                        provenance=current.provenance,
                        event_time=current.event_time,
                        meta=meta_of(msgspec.structs.replace(meta, refreshed=True), current.content),
                        expires_at=now + timedelta(minutes=meta.ttl),
                    )
                )
                said.append(("refresh ttl of", (meta.namespace, meta.key)))
            if fresh:
                self.repo.commit(
                    put=fresh,
                    message=_message(said),
                    author=self.author,
                    branch=self.branch,
                    parent=tip,
                )

        try:
            with self._writing:
                with_retry(attempt, attempts=3)
        except RefConflict:  # LangGraph's refresh is best effort; the value is untouched
            pass

    # -- reads ----------------------------------------------------------------

    def _get(self, op: GetOp, found: Mapping[str, History], read: dict[str, Node]) -> Item | None:
        known = found.get(node_id(op.namespace, op.key))
        node = known.node if known is not None else None
        meta = item_meta(node)
        if (
            known is None
            or node is None
            or meta is None
            or (meta.namespace, meta.key) != (tuple(op.namespace), op.key)
        ):
            return None
        if op.refresh_ttl and meta.ttl is not None:
            read[node.id] = node
        return store_item(node, meta, known.versions)

    def _search_at(self, op: SearchOp, read: dict[str, Node]) -> list[SearchItem]:
        """A search that is its batch's only read: the branch is resolved by its first read."""
        if self.searching.ranks(op):
            return self.searching.search(self._tip(), op, read)
        try:
            listing = self.repo.ids(at=self.branch, prefix=id_prefix(tuple(op.namespace_prefix)))
        except NotFound:  # a branch with no commits yet
            return []
        return self.searching.search(listing.commit, op, read, list(listing))

    def _namespaces(self, at: Commit | str | None, resolved: bool) -> set[tuple[str, ...]]:
        """The namespaces holding items at ``at``: a commit (None: no commits), else the branch so named."""
        if resolved and at is None:
            return set()
        namespaces: set[tuple[str, ...]] = set()
        try:
            for node in self.repo.nodes(at=at, prefix=ROOT + "/"):
                meta = item_of(node, ())
                if meta is not None:
                    namespaces.add(meta.namespace)
        except NotFound:  # a branch with no commits yet
            return set()
        return namespaces

    def _list_namespaces(
        self, at: Commit | str | None, resolved: bool, op: ListNamespacesOp
    ) -> list[tuple[str, ...]]:
        conditions = op.match_conditions or ()
        chosen = [
            ns
            for ns in self._namespaces(at, resolved)
            if all(matches(ns, c.match_type, c.path) for c in conditions)
        ]
        if op.max_depth is not None:
            chosen = [ns[: op.max_depth] for ns in chosen]
        return sorted(set(chosen))[op.offset : op.offset + op.limit]

    # -- beyond LangGraph's stores --------------------------------------------

    def get(
        self,
        namespace: tuple[str, ...],
        key: str,
        *,
        refresh_ttl: bool | None = None,
        as_of: datetime | str | None = None,
    ) -> Item | None:
        """The item ``key`` in ``namespace``, now or as the store believed at ``as_of``.

        Args:
            namespace: the item's namespace.
            key: the item's key.
            refresh_ttl: push the item's expiry forward (now only; default per ``ttl``).
            as_of: a record time (datetime or RFC 3339 text): the branch as its reflog
                says it stood then; expiry is judged at that time too. None before
                the branch existed.

        Raises:
            InvalidNamespaceError: a namespace LangGraph refuses.
            Redacted: the version there was erased.
        """
        if as_of is None:
            return super().get(namespace, key, refresh_ttl=refresh_ttl)
        validate_op_namespace(GetOp(namespace, key))
        nid = node_id(namespace, key)
        try:
            commit = self.repo.resolve(self.branch or "HEAD", as_of=as_of)
            node = self.repo.get(nid, at=self.branch, as_of=as_of)
        except Redacted:
            raise
        except NotFound:  # the branch did not exist yet: nothing was believed
            return None
        meta = item_meta(node)
        if node is None or meta is None or (meta.namespace, meta.key) != (tuple(namespace), key):
            return None
        return store_item(node, meta, self.repo.history(nid, at=commit))

    def delete(
        self, namespace: tuple[str, ...], key: str, *, erase: bool | None = None, reason: str | None = None
    ) -> None:
        """Delete an item; with ``erase``, erase every version of it for real.

        A plain delete ends the item on the branch; its earlier values stay in
        history (:meth:`history`, ``get(..., as_of=...)``). An erasing delete, for
        the user who asks to be forgotten, also deletes the bytes of every version
        of the item on every branch (``Repo.forget``): each leaves a redaction
        record (hash, time, author, ``reason``), reading one raises ``Redacted``, and
        ``repo.gc(compact=True)`` then leaves none of them in the store file. The
        item's namespace and key stay, as its id (in trees and in the message of
        the commit that deleted it): keep personal data in values.

        Args:
            namespace: the item's namespace.
            key: the item's key.
            erase: erase every version too; default: the store's ``erase`` setting.
            reason: why, kept in the redaction records (erasing only; default:
                :data:`ERASE_REASON`).

        Raises:
            InvalidNamespaceError: a namespace LangGraph refuses.
            InvalidInput: ``erase`` is not a bool, or ``reason`` is blank or given without erasing.
        """
        erasing = self.erase if erase is None else erase
        if not isinstance(erasing, bool):
            raise InvalidInput(f"erase must be True or False, not {erase!r}")
        if reason is not None:
            if not erasing:
                raise InvalidInput("a reason is kept only when erasing: pass erase=True with it")
            if not isinstance(reason, str) or not reason.strip():
                raise InvalidInput("give a reason for erasing: it is kept in the redaction records")
        self._run([PutOp(namespace, key, None)], erasing, reason)

    async def adelete(
        self, namespace: tuple[str, ...], key: str, *, erase: bool | None = None, reason: str | None = None
    ) -> None:
        """:meth:`delete` in a worker thread."""
        await asyncio.to_thread(self.delete, namespace, key, erase=erase, reason=reason)

    def history(self, namespace: tuple[str, ...], key: str) -> list[Item]:
        """Every value the item has had on the branch, newest first, as ``Item`` s.

        A TTL refresh is not a new value and is left out; an erased version too.
        ``created_at`` is when that life of the item began (a delete ends one),
        ``updated_at`` when that value was written.

        Raises:
            InvalidNamespaceError: a namespace LangGraph refuses.
        """
        validate_op_namespace(GetOp(namespace, key))
        tip = self._tip()
        if tip is None:
            return []
        versions = self.repo.history(node_id(namespace, key), at=tip)
        items: list[Item] = []
        for index, version in enumerate(versions):
            meta = item_meta(version.node)
            if version.node is None or meta is None or meta.refreshed:
                continue
            if (meta.namespace, meta.key) != (tuple(namespace), key):
                continue
            created, _ = item_times(versions[index:], version.hash)
            items.append(
                Item(
                    value=version.node.content,
                    key=key,
                    namespace=meta.namespace,
                    created_at=created,
                    updated_at=version.commit.record_time,
                )
            )
        return items


def _message(said: Sequence[tuple[str, tuple[tuple[str, ...], str]]]) -> str:
    """A commit's message naming what it wrote: ``(verb, (namespace, key))`` each.

    One item: ``langgraph store: put ("users", "mira") / prefs``. More: a first
    line that counts them (and names their namespace when they share one), then
    one line each, the first :data:`LISTED` of them.
    """
    if len(said) == 1:
        verb, (namespace, key) = said[0]
        return f"langgraph store: {verb} {describe(namespace, key)}"
    counts = Counter(verb for verb, _ in said)
    first = "langgraph store: " + ", ".join(f"{verb} {count}" for verb, count in counts.items())
    spaces = {namespace for _, (namespace, _) in said}
    if len(spaces) == 1:
        first += " in " + describe_namespace(next(iter(spaces)))
    lines = [f"{verb} {describe(namespace, key)}" for verb, (namespace, key) in said[:LISTED]]
    if len(said) > LISTED:
        lines.append(f"and {len(said) - LISTED} more")
    return first + "\n\n" + "\n".join(lines)

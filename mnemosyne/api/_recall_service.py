"""Recall: search, context, the read log, embedders and reindexing (see :class:`Repo`).

The recall modules (numpy, and onnxruntime for the built-in embedder) load
when something first searches, not when the store opens: a command that only
reads history never pays for them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import msgspec

from mnemosyne.api._handle import Handle
from mnemosyne.errors import InvalidInput, StorageFull
from mnemosyne.history.revisions import Rev
from mnemosyne.index.view import View
from mnemosyne.model.choices import KINDS, SEARCH_MODES, SearchMode
from mnemosyne.model.defaults import CONTEXT_BUDGET, CONTEXT_K, SEARCH_K
from mnemosyne.model.results import Context, Hit, PendingRecall, ReadRecord
from mnemosyne.model.times import TimeLike, as_time
from mnemosyne.model.validation import check_scope
from mnemosyne.recall.setting_values import approximate_from, embedder_named
from mnemosyne.store import settings
from mnemosyne.store.kv.base import ReadTxn

if TYPE_CHECKING:
    from mnemosyne.recall.embedders import Embedder
    from mnemosyne.recall.index_location import IndexLocation
    from mnemosyne.recall.matrix import VectorCache
    from mnemosyne.recall.search import Filters

_FROM_SETTINGS = "settings"


class Scope(msgspec.Struct, frozen=True, kw_only=True):
    """The use, sensitivity and freshness a search or context is scoped to (see :meth:`Repo.search`)."""

    allowed_for: str | None = None
    max_sensitivity: str | None = None
    verified_within: timedelta | None = None

    def __post_init__(self) -> None:
        check_scope(self.allowed_for, self.max_sensitivity, self.verified_within)


class RecallService:
    """Recall over one tenant: its embedder and the per-handle memory of vectors and names."""

    def __init__(self, handle: Handle, location: IndexLocation | None = None) -> None:
        self._handle = handle
        self._embedder: Embedder | str | None = _FROM_SETTINGS
        # The setting the embedder was loaded from (None: given by use_embedder). Another
        # process (another server over the same store) may change it: a writable handle
        # reads it again in the snapshot each search opens first (see _prepare).
        self._setting: str | None = None
        self._cache: VectorCache | None = None
        self._location = location

    def use(self, embedder: Embedder | str | None) -> None:
        """The work of :meth:`Repo.use_embedder`."""
        self._embedder = embedder_named(embedder) if isinstance(embedder, str) else embedder
        self._setting = None

    def settings_changed(self) -> None:
        """Reload the embedder from the store's setting at next use."""
        self._embedder = _FROM_SETTINGS
        self._setting = None

    def embedder(self) -> Embedder | None:
        """The work of :meth:`Repo.embedder`."""
        if isinstance(self._embedder, str):
            with self._handle.kv.read() as txn:
                self._follow_setting(txn)
        assert not isinstance(self._embedder, str)
        return self._embedder

    def _follow_setting(self, txn: ReadTxn) -> None:
        """Load the embedder the store's setting names, when it decides and names another one now."""
        if self._embedder is not _FROM_SETTINGS and self._setting is None:
            return  # the handle's own choice (use_embedder)
        name = settings.get(txn, "embedder")
        if name != self._setting or isinstance(self._embedder, str):
            self._embedder, self._setting = embedder_named(name), name

    def _vectors(self) -> VectorCache:
        if self._cache is None:
            from mnemosyne.recall.matrix import VectorCache

            self._cache = VectorCache(self._location)
        return self._cache

    def forget_vectors(self) -> None:
        """Drop what the handle holds of vectors (and any saved index it maps)."""
        if self._cache is not None:
            self._cache.forget()

    def _prepare(self) -> bool:
        """Before a search: follow the embedder setting, and say whether the recall index lags.

        A writable handle reads both in one snapshot, which it opened anyway: a
        setting changed by another process is followed from the next search on,
        at no cost of its own. A read-only handle neither catches up nor reads
        the setting again (it loaded it at its first search).
        """
        from mnemosyne.recall.recall_index import RecallIndex

        handle = self._handle
        if handle.readonly:
            self.embedder()
            return False
        with handle.read() as view:
            self._follow_setting(view.txn)
            return RecallIndex(handle.scope).needs_catch_up(view.txn, self.embedder())

    def _catch_up(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Index queued versions and embed new contents (writable handles; see :meth:`_prepare`)."""
        from mnemosyne.recall.recall_index import catch_up

        handle = self._handle
        embedder = self.embedder()
        try:
            handle.write(lambda view: catch_up(view, embedder, progress))
        except StorageFull:
            pass  # a full disk: search what is indexed and queued, as a read-only handle does

    def search(
        self,
        query: str,
        *,
        k: int = SEARCH_K,
        at: Rev | None = None,
        as_of: TimeLike | None = None,
        prefix: str | None = None,
        valid_at: TimeLike | None = None,
        kind: str | None = None,
        meta: dict[str, Any] | None = None,
        mode: SearchMode = "hybrid",
        run_id: str | None = None,
        allowed_for: str | None = None,
        max_sensitivity: str | None = None,
        verified_within: timedelta | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> list[Hit]:
        """Recall memories by words and meaning, from one snapshot only.

        Hybrid by default: BM25 over the text and the words of the id, and cosine
        similarity of embeddings (when an embedder is set), each scaled over what it
        read, then weighed with what else each candidate shows (its numbered
        neighbours, how well its session matches, whether it names a time when the
        question asks when, the speaker the question names) by a fitted logistic
        model whose probability is the hit's score (``docs/recall.md``).
        Filters apply before ranking, so a hit is always the version current
        in the snapshot read (default: HEAD; ``at``/``as_of`` as for ``get``):
        never a deleted, superseded, expired or erased one. The answer is the exact
        top ``k`` of the memories that pass every filter. Each hit's
        ``confirmed_at`` says when its version was last confirmed.

        Args:
            query: what to look for.
            k: how many hits at most.
            at: a revision to search instead of HEAD.
            as_of: search the branch as it was at this record time.
            prefix: only ids under this namespace.
            valid_at: claims must be in force at this valid time (notes pass).
            kind: only ``note`` or only ``claim`` nodes.
            meta: exact matches on meta keys.
            mode: ``hybrid``, ``lexical`` or ``semantic`` (which needs an embedder).
            run_id: record the versions returned in the read log under this id.
            allowed_for: the use the memories are for: a memory whose
                ``meta["allowed_for"]`` lists uses is returned only when this is one
                of them; one without the list is returned too, unless the store
                setting ``recall.require_allowed_for`` is ``true``.
            max_sensitivity: the most sensitive level to return, on the store's
                scale ``recall.sensitivity_levels`` (``public``, ``internal``,
                ``personal``, ``restricted``); a memory's level is
                ``meta["sensitivity"]``, ``recall.unlabeled_sensitivity``
                (``internal``) when it has none, the most sensitive when it is off
                the scale.
            verified_within: leave out memories last confirmed (written, or
                verified with :meth:`verify`) longer ago than this before ``as_of``
                (else now).
            progress: called with (done, total) after each batch while the search
                first indexes what was written since the last one (a writable
                handle does; :meth:`pending_recall` says how much that is).

        Raises:
            InvalidInput: a bad argument; ``max_sensitivity`` not on the scale.
        """
        scope = Scope(
            allowed_for=allowed_for, max_sensitivity=max_sensitivity, verified_within=verified_within
        )
        from mnemosyne.recall import search as recall_search

        _check_query(query, k)
        if mode not in SEARCH_MODES:
            raise InvalidInput(f"mode must be one of {', '.join(SEARCH_MODES)}")
        if kind is not None and kind not in KINDS:
            raise InvalidInput(f"kind must be one of {', '.join(KINDS)}")
        lagging = self._prepare()
        if mode == "semantic" and self.embedder() is None:
            raise InvalidInput(
                "semantic search needs an embedder: set the store's 'embedder' setting "
                "(hash, minilm, minilm-sentences) or call use_embedder"
            )
        self._check_run_id(run_id)
        if lagging:
            self._catch_up(progress)
        embedder = self.embedder() if mode != "lexical" else None
        with self._handle.read() as view:
            filters = self._filters(view, at, as_of, prefix, valid_at, kind, meta, scope)
            if filters is None:
                return []
            hits = recall_search.search(
                view, self._vectors(), embedder, query, k, filters, mode, approximate_from=_threshold(view)
            )
        if run_id is not None:
            self._record_read(run_id, "search", query, [(h.id, h.hash) for h in hits])
        return hits

    def context(
        self,
        query: str,
        budget_tokens: int = CONTEXT_BUDGET,
        *,
        k: int = CONTEXT_K,
        at: Rev | None = None,
        as_of: TimeLike | None = None,
        prefix: str | None = None,
        valid_at: TimeLike | None = None,
        run_id: str | None = None,
        allowed_for: str | None = None,
        max_sensitivity: str | None = None,
        verified_within: timedelta | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> Context:
        """The smallest cited context for ``query`` that fits ``budget_tokens``.

        The best memories (as ranked by :meth:`search`, hybrid) that fit, with claims
        no longer in force last, each with its id and hash; tokens are estimated as
        one per four characters. Hits and claim checks come from one snapshot.
        ``Context.render()`` gives the text to put in a prompt. ``allowed_for``,
        ``max_sensitivity``, ``verified_within`` and ``progress`` are as for
        :meth:`search`.
        """
        scope = Scope(
            allowed_for=allowed_for, max_sensitivity=max_sensitivity, verified_within=verified_within
        )
        from mnemosyne.recall import search as recall_search

        if not isinstance(budget_tokens, int) or isinstance(budget_tokens, bool) or budget_tokens < 1:
            raise InvalidInput("budget_tokens must be a positive integer")
        _check_query(query, k)
        self._check_run_id(run_id)
        if self._prepare():
            self._catch_up(progress)
        embedder = self.embedder()
        with self._handle.read() as view:
            filters = self._filters(view, at, as_of, prefix, valid_at, None, None, scope)
            if filters is None:
                return Context(query=query, budget_tokens=budget_tokens, tokens=0, items=[])
            hits = recall_search.search(
                view, self._vectors(), embedder, query, k, filters, approximate_from=_threshold(view)
            )
            built = recall_search.assemble(view, hits, query, budget_tokens, filters)
        if run_id is not None:
            # Every memory shown, the one packed beside a short hit included, in the order shown.
            self._record_read(run_id, "context", query, [(item.id, item.hash) for item in built.items])
        return built

    def pending(self) -> PendingRecall:
        """The work of :meth:`Repo.pending_recall`."""
        from mnemosyne.recall.recall_index import RecallIndex

        embedder = self.embedder()
        with self._handle.read() as view:
            return RecallIndex(self._handle.scope).pending(view, embedder)

    def reads(self, run_id: str) -> list[ReadRecord]:
        """What searches and contexts recorded under ``run_id`` returned, oldest first."""
        from mnemosyne.recall.reads import ReadLog

        _check_run_id_text(run_id, _LONGEST_STORED_RUN_ID)
        with self._handle.read() as view:
            return ReadLog(self._handle.scope).reads(view.txn, run_id)

    def reindex(self, vectors: bool, progress: Callable[[int, int], None] | None) -> int:
        """The work of :meth:`Repo.reindex_recall`."""
        from mnemosyne.recall.rebuild import rebuild

        embedder = self.embedder()
        if vectors and embedder is None:
            raise InvalidInput("recomputing vectors needs an embedder: set the store's 'embedder' setting")
        return self._handle.write(lambda view: rebuild(view, embedder, vectors, progress))

    def _filters(
        self,
        view: View,
        at: Rev | None,
        as_of: TimeLike | None,
        prefix: str | None,
        valid_at: TimeLike | None,
        kind: str | None,
        meta: dict[str, Any] | None,
        scope: Scope,
    ) -> Filters | None:
        from mnemosyne.recall.scope import scoping
        from mnemosyne.recall.search import Filters

        when = as_time(as_of, "as_of")
        world = as_time(valid_at, "valid_at")
        if prefix is not None and not isinstance(prefix, str):
            raise InvalidInput(f"prefix must be a string, not {type(prefix).__name__}")
        if meta is not None and not isinstance(meta, dict):
            raise InvalidInput("meta must be a map of keys to values")
        handle = self._handle
        tip = handle.tip(view, at, when)
        if tip is None:
            return None
        now = handle.judged_at(when)
        return Filters(
            root=view.commit(tip).tree,
            now=now,
            prefix=prefix,
            kind=kind,
            meta=meta,
            valid_at=world,
            claim_root=view.graph.entry(view.txn, tip).claims,
            tip=tip,
            verified_since=now - scope.verified_within if scope.verified_within is not None else None,
            scope=scoping(view.txn, scope.allowed_for, scope.max_sensitivity),
        )

    def _check_run_id(self, run_id: str | None) -> None:
        if run_id is None:
            return
        _check_run_id_text(run_id)
        if self._handle.readonly:
            # Silently not recording would leave a gap in an audit trail.
            raise InvalidInput(
                "a read-only handle cannot record reads: open the store writable or drop run_id"
            )

    def _record_read(self, run_id: str, kind: str, query: str, shown: list[tuple[str, str]]) -> None:
        from mnemosyne.recall.reads import ReadLog

        handle = self._handle
        record = ReadRecord(
            run_id=run_id,
            time=handle.now(),
            kind=kind,
            query=query,
            ids=[node_id for node_id, _ in shown],
            hashes=[node_hash for _, node_hash in shown],
        )
        handle.write(lambda view: ReadLog(handle.scope).record(view.txn, record))


def _threshold(view: View) -> int | None:
    """The store's ``recall.approximate_from``, as read in this snapshot."""
    return approximate_from(settings.get(view.txn, "recall.approximate_from"))


MAX_RUN_ID_BYTES = 256
"""Longest run id a search records under, in bytes of UTF-8 (it is part of a storage key)."""

_LONGEST_STORED_RUN_ID = 498
"""Longest run id earlier versions could record (LMDB's 511-byte keys): still listed."""


def _check_run_id_text(run_id: object, limit: int = MAX_RUN_ID_BYTES) -> None:
    if not isinstance(run_id, str) or not run_id or "\x00" in run_id:
        raise InvalidInput("run_id must be non-empty text without NUL")
    try:
        size = len(run_id.encode())
    except UnicodeEncodeError:
        raise InvalidInput("run_id must be valid Unicode text (it has a lone surrogate)") from None
    if size > limit:
        raise InvalidInput(f"run_id is {size} bytes of UTF-8; at most {limit}")


def _check_query(query: object, k: object) -> None:
    if not isinstance(query, str):
        raise InvalidInput("the query must be text")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise InvalidInput("k must be a positive integer")

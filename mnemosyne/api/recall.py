"""Recall methods of ``Repo``: search, context, the read log, embedders and settings."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from mnemosyne.api.handle import RepoCore, aware
from mnemosyne.errors import InvalidInput
from mnemosyne.index.view import View, WriteView
from mnemosyne.recall import index as recall_index
from mnemosyne.recall import search as recall_search
from mnemosyne.recall.embedders import Embedder, embedder_named
from mnemosyne.recall.rebuild import rebuild as recall_rebuild
from mnemosyne.recall.search import Context, Hit, ReadRecord
from mnemosyne.recall.search import Mode as SearchMode
from mnemosyne.store import settings as recall_config


class RecallMethods(RepoCore):
    """What ``Repo`` offers for recall (see :mod:`mnemosyne.recall`)."""

    # -- recall ------------------------------------------------------------------

    def use_embedder(self, embedder: Embedder | str | None) -> None:
        """Use ``embedder`` for this handle.

        An ``Embedder``, a name (``hash``, ``hash-DIM``, ``minilm``, ``none``), or
        None for no semantic search. Without a call, the store's ``embedder``
        setting decides (default ``none``).
        """
        self._embedder = embedder_named(embedder) if isinstance(embedder, str) else embedder

    def embedder(self) -> Embedder | None:
        """The embedder this handle uses (loaded on first use from the store's setting)."""
        if isinstance(self._embedder, str):
            with self._kv.read() as txn:
                name = recall_config.get(txn, "embedder")
            self._embedder = embedder_named(name)
        return self._embedder

    def config(self, key: str, value: str | None = None) -> str:
        """Read a store setting, or change it when ``value`` is given (e.g. ``embedder``)."""
        if value is not None:
            recall_config.set_value(self._kv, key, value)
            if key == "embedder":
                self._embedder = "config"
        with self._kv.read() as txn:
            return recall_config.get(txn, key)

    def _catch_up(self) -> None:
        """Index queued versions and embed new contents before a search (writable handles)."""
        if self.readonly:
            return
        embedder = self.embedder()
        with self._view() as view:
            if not recall_index.needs_catch_up(view.txn, self._stores.scope, embedder):
                return
        self._write(lambda view: recall_index.catch_up(view, embedder))

    def search(
        self,
        query: str,
        k: int = 10,
        at: str | None = None,
        as_of: datetime | None = None,
        prefix: str | None = None,
        valid_at: datetime | None = None,
        kind: str | None = None,
        meta: dict[str, Any] | None = None,
        *,
        mode: SearchMode = "hybrid",
        run_id: str | None = None,
    ) -> list[Hit]:
        """Recall memories by words and meaning, from one snapshot only.

        Hybrid by default: BM25 over text (and string values of JSON content) fused
        by reciprocal rank with cosine similarity of embeddings (when an embedder is
        set). Filters apply before ranking, so a hit is always the version current in
        the snapshot read (default: HEAD; ``at``/``as_of`` as for ``get``): never a
        deleted, superseded, expired or erased one.

        Args:
            query: what to look for.
            k: how many hits at most.
            at: a revision to search instead of HEAD.
            as_of: search the branch as it was at this record time.
            prefix: only ids under this namespace.
            valid_at: claims must be in force at this valid time (notes pass).
            kind: only ``note`` or only ``claim`` nodes.
            meta: exact matches on meta keys.
            mode: ``hybrid``, ``lexical`` or ``semantic``.
            run_id: record the versions returned in the read log under this id.
        """
        _check_query(query, k)
        if mode not in ("hybrid", "lexical", "semantic"):
            raise InvalidInput("mode must be hybrid, lexical or semantic")
        self._catch_up()
        embedder = self.embedder() if mode != "lexical" else None
        with self._view() as view:
            filters = self._filters(view, at, as_of, prefix, valid_at, kind, meta)
            if filters is None:
                return []
            hits = recall_search.search(view, self._vectors, embedder, query, k, filters, mode)
        if run_id is not None:
            self._record_read(run_id, "search", query, hits)
        return hits

    def context(
        self,
        query: str,
        budget_tokens: int = 1000,
        *,
        k: int = 50,
        at: str | None = None,
        as_of: datetime | None = None,
        prefix: str | None = None,
        valid_at: datetime | None = None,
        run_id: str | None = None,
    ) -> Context:
        """The smallest cited context for ``query`` that fits ``budget_tokens``.

        The best memories (as ranked by :meth:`search`, hybrid) that fit, with claims
        no longer in force last, each with its id and hash; tokens are estimated as
        one per four characters. Hits and claim checks come from one snapshot.
        ``Context.render()`` gives the text to put in a prompt.
        """
        if not isinstance(budget_tokens, int) or isinstance(budget_tokens, bool) or budget_tokens < 1:
            raise InvalidInput("budget_tokens must be a positive integer")
        _check_query(query, k)
        self._catch_up()
        embedder = self.embedder()
        with self._view() as view:
            filters = self._filters(view, at, as_of, prefix, valid_at, None, None)
            if filters is None:
                return Context(query=query, budget_tokens=budget_tokens, tokens=0, items=[])
            hits = recall_search.search(view, self._vectors, embedder, query, k, filters)
            built = recall_search.assemble(view, hits, query, budget_tokens, filters)
        if run_id is not None:
            chosen = {item.hash for item in built.items}
            self._record_read(run_id, "context", query, [h for h in hits if h.hash in chosen])
        return built

    def reads(self, run_id: str) -> list[ReadRecord]:
        """What searches and contexts recorded under ``run_id`` returned, oldest first."""
        with self._view() as view:
            return recall_search.reads(view.txn, self._stores.scope, run_id)

    def _filters(
        self,
        view: View,
        at: str | None,
        as_of: datetime | None,
        prefix: str | None,
        valid_at: datetime | None,
        kind: str | None,
        meta: dict[str, Any] | None,
    ) -> recall_search.Filters | None:
        tip = self._tip(view, at, as_of)
        if tip is None:
            return None
        now = self._judged_at(as_of)
        return recall_search.Filters(
            root=view.commit(tip).tree,
            now=now,
            prefix=prefix,
            kind=kind,
            meta=meta,
            valid_at=aware(valid_at, "valid_at") if valid_at is not None else None,
            claim_root=view.graph.entry(view.txn, tip).claims,
        )

    def _record_read(self, run_id: str, kind: str, query: str, hits: list[Hit]) -> None:
        if self.readonly:
            return  # a read-only handle never writes, not even the read log
        if not isinstance(run_id, str) or not run_id or "\x00" in run_id:
            raise InvalidInput("run_id must be non-empty text")
        record = ReadRecord(
            run_id=run_id,
            time=self._now(),
            kind=kind,
            query=query,
            ids=[h.id for h in hits],
            hashes=[h.hash for h in hits],
        )
        self._kv.transact(lambda txn: recall_search.record_read(txn, self._stores.scope, record))

    def reindex_recall(
        self, vectors: bool = False, progress: Callable[[int, int], None] | None = None
    ) -> int:
        """Rebuild the recall indexes from the stored node versions.

        Args:
            vectors: also drop and recompute every embedding of the current model.
            progress: called with (done, total) as versions are indexed.

        Returns:
            How many node versions were indexed.
        """
        embedder = self.embedder()

        def work(view: WriteView) -> int:
            return recall_rebuild(view, embedder, vectors, progress)

        return self._write(work)


def _check_query(query: object, k: object) -> None:
    if not isinstance(query, str):
        raise InvalidInput("the query must be text")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise InvalidInput("k must be a positive integer")

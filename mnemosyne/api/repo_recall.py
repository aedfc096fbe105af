"""The recall part of :class:`~mnemosyne.api.repo.Repo`: embedders, search and context.

A mixin of ``Repo``'s methods that recall memories; the work is done by
:mod:`mnemosyne.api.recall`, imported when first used.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from mnemosyne.api.handle import Handle
from mnemosyne.model.choices import SearchMode
from mnemosyne.model.defaults import CONTEXT_BUDGET, CONTEXT_K, SEARCH_K

if TYPE_CHECKING:
    from mnemosyne.api.recall import Recall
    from mnemosyne.api.store import Store
    from mnemosyne.history.revisions import Rev
    from mnemosyne.model.results import Context, Hit, ReadRecord
    from mnemosyne.model.times import TimeLike
    from mnemosyne.recall.embedders import Embedder


class RecallMethods:
    """``Repo``'s methods for recall (see :class:`~mnemosyne.api.repo.Repo`)."""

    store: Store
    _handle: Handle

    @functools.cached_property
    def _recall(self) -> Recall:
        from mnemosyne.api.recall import Recall

        return Recall(self._handle)

    # -- recall --------------------------------------------------------------

    def use_embedder(self, embedder: Embedder | str | None) -> None:
        """Use ``embedder`` for this handle.

        An ``Embedder``, a name (``hash``, ``hash-DIM``, ``minilm``, ``none``), or
        None for no semantic search. Without a call, the store's ``embedder``
        setting decides.
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
    ) -> list[Hit]:
        """Recall memories by words and meaning, from one snapshot only.

        Hybrid by default: BM25 over the text and the words of the id, fused by
        reciprocal rank with cosine similarity of embeddings (when an embedder is
        set). Filters apply before ranking, so a hit is always the version current
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

        Raises:
            InvalidInput: a bad argument; ``max_sensitivity`` not on the scale.
        """
        from mnemosyne.api.recall import Scope

        return self._recall.search(
            query,
            k=k,
            at=at,
            as_of=as_of,
            prefix=prefix,
            valid_at=valid_at,
            kind=kind,
            meta=meta,
            mode=mode,
            run_id=run_id,
            scope=Scope(
                allowed_for=allowed_for, max_sensitivity=max_sensitivity, verified_within=verified_within
            ),
        )

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
    ) -> Context:
        """The smallest cited context for ``query`` that fits ``budget_tokens``.

        The best memories (as ranked by :meth:`search`, hybrid) that fit, with claims
        no longer in force last, each with its id and hash; tokens are estimated as
        one per four characters. Hits and claim checks come from one snapshot.
        ``Context.render()`` gives the text to put in a prompt. ``allowed_for``,
        ``max_sensitivity`` and ``verified_within`` filter as for :meth:`search`.
        """
        from mnemosyne.api.recall import Scope

        return self._recall.context(
            query,
            budget_tokens=budget_tokens,
            k=k,
            at=at,
            as_of=as_of,
            prefix=prefix,
            valid_at=valid_at,
            run_id=run_id,
            scope=Scope(
                allowed_for=allowed_for, max_sensitivity=max_sensitivity, verified_within=verified_within
            ),
        )

    def reads(self, run_id: str) -> list[ReadRecord]:
        """What searches and contexts recorded under ``run_id`` returned, oldest first."""
        return self._recall.reads(run_id)

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

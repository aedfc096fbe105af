"""Hybrid search, context assembly and the read audit log.

Filters (snapshot, namespace prefix, kind, meta, claims in force, expiry, use,
sensitivity, last confirmation) decide which versions may be returned; each
ranking is walked best first until enough accepted versions are found, so the
answer is the exact top-k of the filtered set. The lexical and semantic rankings
are scaled to one range (:mod:`mnemosyne.recall.fusion`) and ordered by a logistic
model over what each candidate shows (:mod:`mnemosyne.recall.ranker`).
"""

from __future__ import annotations

import bisect
import math
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any

import msgspec
import msgspec.structs

from mnemosyne.errors import NotFound
from mnemosyne.index import claims
from mnemosyne.index.confirmed import confirmed_at
from mnemosyne.index.view import View
from mnemosyne.model.choices import SearchMode
from mnemosyne.model.objects import Claim, Node
from mnemosyne.model.results import Context, ContextItem, Hit
from mnemosyne.recall import ranker
from mnemosyne.recall.bm25 import lexical as postings_lexical
from mnemosyne.recall.embedders import Embedder
from mnemosyne.recall.fusion import Fused, beside, scaled
from mnemosyne.recall.matrix import VectorCache
from mnemosyne.recall.postings import Accept, expiry
from mnemosyne.recall.recall_index import RecallIndex
from mnemosyne.recall.scope import Scoping, permitted
from mnemosyne.recall.semantic import semantic as semantic_search
from mnemosyne.recall.text import text_of, words

CHARS_PER_TOKEN = 4
"""Token estimate for context budgets: one token per 4 characters, rounded up."""


def estimate_tokens(text: str) -> int:
    """The token estimate used for budgets."""
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


class Filters(msgspec.Struct, frozen=True, kw_only=True):
    """Which versions a search may return, besides being current in the snapshot."""

    root: bytes
    now: datetime
    prefix: str | None = None
    kind: str | None = None
    meta: dict[str, Any] | None = None
    valid_at: datetime | None = None
    claim_root: bytes = b""
    tip: bytes = b""
    """The commit searched (whose history says when each version was last confirmed)."""
    verified_since: datetime | None = None
    """Leave out versions last confirmed (written or verified) before this."""
    scope: Scoping = Scoping()
    """The use and sensitivity asked for (see :mod:`mnemosyne.recall.scope`)."""


def acceptor(
    view: View,
    filters: Filters,
    loaded: dict[bytes, Node],
    strict: bool = False,
    confirmed: dict[bytes, datetime | None] | None = None,
    listed: bool = False,
) -> Accept:
    """The snapshot check every candidate passes before it can be returned.

    The index gives each candidate's expiry, so a version is read (into
    ``loaded``) only for the filters that look inside it (kind, meta, claims in
    force) or when ``strict``; the hits are read once ranked. A valid-time filter
    with at most a kind besides reads no node: a version's raw bytes give its kind
    and a claim's attribute and times (:class:`mnemosyne.index.claims.InForce`). When a freshness
    filter looks up when a version was last confirmed, the answer goes into
    ``confirmed``, so a hit need not look it up again.

    ``listed``: the candidates were listed from the snapshot's tree (a
    namespace's members), so whether each is the snapshot's version is not
    looked up again.
    """
    now = expiry(filters.now)
    scoped = filters.scope.active
    read = strict or filters.kind is not None or bool(filters.meta) or filters.valid_at is not None or scoped
    # Valid time (and kind) alone: judged from a version's raw bytes, no node decoded.
    force = (
        claims.InForce(view, filters.claim_root, filters.valid_at, filters.now)
        if filters.valid_at is not None and not (strict or filters.meta or scoped)
        else None
    )
    judged: dict[bytes, bool] = {}  # both rankings often propose the same version

    def accept(node_id: str, oid: bytes, expires: int) -> bool:
        if filters.prefix and not node_id.startswith(filters.prefix):
            return False
        known = judged.get(oid)
        if known is None:
            known = judged[oid] = check(node_id, oid, expires)
        return known

    def check(node_id: str, oid: bytes, expires: int) -> bool:
        if expires <= now:
            return False
        if force is not None:
            return weigh(node_id, oid, force)
        if not listed and view.tree.get(filters.root, node_id) != oid:
            return False  # deleted, superseded, or never in this snapshot
        if not fresh(node_id, oid):
            return False  # one scan of the change index: cheaper than reading the version
        if not read:
            return True
        try:
            node = view.node(oid)
        except NotFound:
            return False  # erased
        if filters.kind is not None and node.kind != filters.kind:
            return False
        if filters.meta and any((node.meta or {}).get(k) != v for k, v in filters.meta.items()):
            return False
        if filters.valid_at is not None and isinstance(node.content, Claim):
            c = node.content
            in_force = claims.in_force(
                view, filters.claim_root, c.subject, c.predicate, filters.valid_at, filters.now
            )
            if all(n.hash != node.hash for n in in_force):
                return False
        if scoped and not permitted(node.meta, filters.scope):
            return False
        loaded[oid] = node
        return True

    def weigh(node_id: str, oid: bytes, force: claims.InForce) -> bool:
        head = claims.head_of(view, oid)
        if head is None:
            return False  # erased
        if filters.kind is not None and head.kind != filters.kind:
            return False
        # Whether it holds first: one seek per attribute, for every version of a timeline.
        if head.claim is not None and not force.holds(head.claim):
            return False
        if not listed and view.tree.get(filters.root, node_id) != oid:
            return False  # deleted, superseded, or never in this snapshot
        return fresh(node_id, oid)

    def fresh(node_id: str, oid: bytes) -> bool:
        if filters.verified_since is None:
            return True
        when = confirmed_at(view, node_id, oid, filters.tip)
        if confirmed is not None:
            confirmed[oid] = when
        return when is not None and when >= filters.verified_since

    return accept


def count_under(view: View, root: bytes, prefix: str, cap: int) -> int:
    """How many ids of the tree at ``root`` start with ``prefix``; past ``cap``, some count above it.

    Counts chunk by chunk (a leaf's share is a difference of two bisections), so
    a namespace too large to score directly is found out without listing it.
    """
    last = prefix[-1]
    end = prefix[:-1] + chr(ord(last) + 1) if ord(last) < sys.maxunicode else None
    return _count(view, root, prefix, end, cap)


def _count(view: View, oid: bytes, low: str, high: str | None, cap: int) -> int:
    chunk = view.chunk(oid)
    keys = chunk.keys
    if chunk.level == 0:
        return (bisect.bisect_left(keys, high) if high is not None else len(keys)) - bisect.bisect_left(
            keys, low
        )
    total = 0
    # A child holds the keys after its left neighbour's last key, up to its own.
    for i in range(bisect.bisect_left(keys, low), len(keys)):
        total += _count(view, chunk.values[i], low, high, cap - total)
        if total > cap or (high is not None and keys[i] >= high):
            break
    return total


def search(
    view: View,
    cache: VectorCache,
    embedder: Embedder | None,
    query: str,
    k: int,
    filters: Filters,
    mode: SearchMode = "hybrid",
    strict: bool = False,
    approximate_from: int | None = None,
) -> list[Hit]:
    """Rank the snapshot's memories for ``query``; see the module docstring.

    ``strict`` reads every candidate while ranking (see :func:`acceptor`); a
    search falls back to it should the index name a version that is gone.
    ``approximate_from`` is passed to :func:`mnemosyne.recall.semantic.semantic`.
    """
    recall = RecallIndex(view.stores.scope)
    recall.check_format(view.txn)
    loaded: dict[bytes, Node] = {}
    confirmed: dict[bytes, datetime | None] = {}
    accept = acceptor(view, filters, loaded, strict, confirmed)
    depth = max(4 * k, 50)
    names = cache.names(view.txn, recall.postings)
    ranked = mode in ("hybrid", "lexical")
    prefix = filters.prefix
    # A namespace filter screens a batch of candidates at once, before any is looked up.
    screen = (lambda docs: names.under(docs, prefix)) if prefix else None
    lexical = (
        postings_lexical(
            view,
            recall.postings,
            query,
            accept,
            depth,
            names.number,
            screen=screen,
            unstemmed=recall.unstemmed(view.txn),
        )
        if ranked
        else []
    )

    def namespace(cap: int) -> list[tuple[str, bytes]] | None:
        if not filters.prefix or count_under(view, filters.root, filters.prefix, cap) > cap:
            return None
        return list(view.tree.items(filters.root, prefix=filters.prefix))

    semantic = (
        semantic_search(
            view,
            recall.postings,
            cache,
            embedder,
            query,
            accept,
            depth,
            namespace,
            names.versions,
            approximate_from,
            (filters.root, filters.prefix) if filters.prefix else None,
            acceptor(view, filters, loaded, strict, confirmed, listed=True),
            (lambda hashes: names.contents_under(hashes, prefix)) if prefix else None,
        )
        if embedder is not None and mode in ("hybrid", "semantic")
        else []
    )
    if mode == "hybrid":
        best = ranker.rank(scaled(lexical, semantic), depth, _node(view, loaded), query, k)[:k]
    else:  # one ranking: its own scores
        lexical_mode = mode == "lexical"
        best = [
            Fused(oid, node_id, score, rank if lexical_mode else None, None if lexical_mode else rank)
            for rank, (oid, node_id, score) in enumerate((lexical if lexical_mode else semantic)[:k], 1)
        ]
    hits: list[Hit] = []
    for fused in best:
        oid, node_id = fused.oid, fused.id
        node = loaded.get(oid)
        if node is None:
            try:
                node = view.node(oid)
            except NotFound:
                return search(view, cache, embedder, query, k, filters, mode, True, approximate_from)
        if oid not in confirmed:
            # One scan of the change index per hit (the freshness filter has looked up its
            # candidates already): staleness is shown whether or not it is filtered on.
            confirmed[oid] = confirmed_at(view, node_id, oid, filters.tip) if filters.tip else None
        hits.append(
            Hit(
                id=node_id,
                hash=oid.hex(),
                node=node,
                score=fused.score,
                lexical_rank=fused.lexical_rank,
                semantic_rank=fused.semantic_rank,
                confirmed_at=confirmed[oid],
            )
        )
    return hits


def _node(view: View, loaded: dict[bytes, Node]) -> Callable[[bytes], Node | None]:
    """A candidate's node, read (and kept in ``loaded``) if not yet; None if it is gone."""

    def node(oid: bytes) -> Node | None:
        held = loaded.get(oid)
        if held is None:
            try:
                held = loaded[oid] = view.node(oid)
            except NotFound:
                return None  # gone since it was ranked: the walk below searches again strictly
        return held

    return node


FRAGMENT_WORDS = 12
"""A hit of fewer words than this is packed with the memory before it, when that fits (a reply
such as "Yes, last May!" says little without what it answers)."""


def assemble(view: View, hits: list[Hit], query: str, budget: int, filters: Filters) -> Context:
    """Fit the best hits into ``budget`` tokens; claims no longer in force go last.

    Each item carries its memory's event time; a note shorter than
    :data:`FRAGMENT_WORDS` words brings the memory before it (by the number its
    id ends in, see :mod:`mnemosyne.recall.fusion`), placed just above it, if
    that memory passes the same filters and both fit.
    """

    def in_force(node: Node) -> bool:
        if not isinstance(node.content, Claim):
            return False
        c = node.content
        when = filters.valid_at or filters.now
        found = claims.in_force(view, filters.claim_root, c.subject, c.predicate, when, filters.now)
        return any(n.hash == node.hash for n in found)

    force = {hit.hash: in_force(hit.node) for hit in hits}
    ranked = sorted(
        hits, key=lambda hit: (isinstance(hit.node.content, Claim) and not force[hit.hash], -hit.score)
    )
    accept = acceptor(view, filters, {}, strict=True)
    packed = {hit.hash for hit in hits}
    items: list[ContextItem] = []
    used = 0
    for hit in ranked:
        text = text_of(hit.node)
        item = ContextItem(
            id=hit.id,
            hash=hit.hash,
            text=text,
            tokens=0,
            score=hit.score,
            claim_in_force=force[hit.hash],
            confirmed_at=hit.confirmed_at,
            event_time=hit.node.event_time,
        )
        cost = estimate_tokens(item.cited())
        if used + cost > budget:
            continue
        # A claim says all it means (subject, predicate, value); a short note may be a reply.
        fragment = hit.node.kind == "note" and len(words(text)) < FRAGMENT_WORDS
        before = _before(view, filters, accept, hit, packed) if fragment else None
        if before is not None:
            extra = estimate_tokens(before.cited())
            if used + cost + extra <= budget:
                packed.add(before.hash)
                items.append(msgspec.structs.replace(before, tokens=extra))
                used += extra
        used += cost
        items.append(msgspec.structs.replace(item, tokens=cost))
    return Context(query=query, budget_tokens=budget, tokens=used, items=items)


def _before(view: View, filters: Filters, accept: Accept, hit: Hit, packed: set[str]) -> ContextItem | None:
    """The memory before ``hit`` as a context item, if the search could return it and it is not packed."""
    held = ((node_id, view.tree.get(filters.root, node_id)) for node_id in beside(hit.id, -1))
    node_id, oid = next(((i, o) for i, o in held if o is not None), ("", None))
    if oid is None or oid.hex() in packed:
        return None
    try:
        node = view.node(oid)
    except NotFound:
        return None  # erased
    if not accept(node_id, oid, expiry(node.expires_at)):
        return None
    return ContextItem(
        id=node_id,
        hash=oid.hex(),
        text=text_of(node),
        tokens=0,
        score=0.0,
        event_time=node.event_time,
        context_for=hit.id,
    )

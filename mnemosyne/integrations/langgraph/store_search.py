"""How :class:`~mnemosyne.integrations.langgraph.store.MnemosyneStore` searches, and makes items of nodes.

A search without a query lists ids from the tree and reads one page, in
(namespace, key) order; with a query or a scope it reads every item under the
namespace and ranks them (ADR 35). :class:`ItemSearch` is the part of the store
that does it; the functions below make LangGraph items of nodes, with their
times from the history.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from langgraph.store.base import Item, SearchItem, SearchOp

from mnemosyne import Commit, History, Node, Version
from mnemosyne.integrations.langgraph.items import ItemMeta, item_meta
from mnemosyne.integrations.langgraph.namespaces import decode_id, id_prefix, node_id, passes, search_order
from mnemosyne.integrations.langgraph.repo_protocol import ItemRepo

Found = tuple[Node, ItemMeta, list[Version] | None]
"""A node of a search's page, its item's meta, and its history when read with it."""

Histories = Callable[..., dict[str, History]]
"""``(ids, at, limit=None, expired=False)`` → the store's ``repo.histories`` of ``ids`` ({} on no commits)."""


class ItemSearch:
    """The searches of one store: its repo, its scope, and how it reads histories."""

    def __init__(self, repo: ItemRepo, scope: dict[str, Any], histories: Histories) -> None:
        self.repo = repo
        self.scope = scope
        self._histories = histories

    def ranks(self, op: SearchOp) -> bool:
        """Whether a search reads every item (to rank them by its query, or to scope them)."""
        return bool(op.query) or any(value is not None for value in self.scope.values())

    def search(
        self, tip: Commit | None, op: SearchOp, read: dict[str, Node], ids: list[str] | None = None
    ) -> list[SearchItem]:
        """A search of the snapshot of ``tip`` (``ids``: the ids under its namespace there, listed)."""
        if tip is None or not op.limit:
            return []
        prefix = tuple(op.namespace_prefix)
        if self.ranks(op):
            page, scores = self._ranked(tip, op, prefix)
        else:
            page, scores = self._in_order(tip, op, prefix, ids), {}
        # Times for the page alone, read at once (those read with their node already have them).
        missing = [node.id for node, _, versions in page if versions is None]
        more = self._histories(missing, tip) if missing else {}
        items: list[SearchItem] = []
        for node, meta, versions in page:
            if op.refresh_ttl and meta.ttl is not None:
                read[node.id] = node
            kept = versions if versions is not None else more[node.id].versions
            item = store_item(node, meta, kept, scores.get(node.id), search=True)
            assert isinstance(item, SearchItem)
            items.append(item)
        return items

    def _in_order(
        self, tip: Commit, op: SearchOp, prefix: tuple[str, ...], ids: list[str] | None
    ) -> list[Found]:
        """The page of a search without a query, in (namespace, key) order, reading only what it needs.

        The ids come from the tree alone; the nodes are read in order, a batch at a
        time, until the page is full: a namespace of any size costs a few reads.
        """
        under = id_prefix(prefix)
        if ids is None:
            ids = list(self.repo.ids(at=tip, prefix=under))
        ordered, digested = search_order(ids, under)
        if digested:
            ordered = self._placed(ordered, digested, tip)
        wanted = op.offset + op.limit
        passed: list[Found] = []
        start, size, limit = 0, wanted, None
        while start < len(ordered) and len(passed) < wanted:
            batch = ordered[start : start + size]
            # The first batch is usually the page: its histories come with it. Past it
            # (filters, expired items), nodes alone, and the page's times after.
            found = self._histories(batch, tip, limit=limit)
            for nid in batch:
                node = found[nid].node
                meta = item_of(node, prefix)
                if node is not None and meta is not None and passes(node.content, op.filter):
                    passed.append((node, meta, found[nid].versions if limit is None else None))
            start += size
            size, limit = max(2 * size, 64), 0
        return passed[op.offset : wanted]

    def _placed(self, ordered: list[str], digested: list[str], tip: Commit) -> list[str]:
        """All ids in search order: those too long to be read as a namespace and key, placed by their meta."""
        keyed: list[tuple[tuple[tuple[str, ...], str], str]] = []
        for nid in ordered:
            decoded = decode_id(nid)
            assert decoded is not None  # readable, as search_order sorted out
            keyed.append((decoded, nid))
        found = self._histories(digested, tip, limit=0, expired=True)
        for nid in digested:
            meta = item_meta(found[nid].node)
            if meta is not None:
                keyed.append(((meta.namespace, meta.key), nid))
        keyed.sort(key=lambda entry: entry[0])
        return [nid for _, nid in keyed]

    def _ranked(
        self, tip: Commit, op: SearchOp, prefix: tuple[str, ...]
    ) -> tuple[list[Found], dict[str, float]]:
        """The page of a search with a query or a scope: every item read, ranked by the query."""
        id_under = id_prefix(prefix)
        found: list[Found] = []
        for node in self.repo.nodes(at=tip, prefix=id_under, **self.scope):
            meta = item_of(node, prefix)
            if meta is not None and passes(node.content, op.filter):
                found.append((node, meta, None))
        found.sort(key=lambda entry: (entry[1].namespace, entry[1].key))
        scores: dict[str, float] = {}
        if op.query and found:
            hits = self.repo.search(op.query, k=len(found), at=tip, prefix=id_under, **self.scope)
            scores = {hit.id: hit.score for hit in hits}
            # Ranked first, best first; what recall did not rank keeps the stable order after.
            found.sort(key=lambda entry: -scores.get(entry[0].id, -math.inf))
        return found[op.offset : op.offset + op.limit], scores


def removed_after(version: Version) -> bool:
    """Whether the id was removed after this version (rather than replaced)."""
    return version.ended_by is not None and version.superseded_by is None


def item_of(node: Node | None, prefix: tuple[str, ...]) -> ItemMeta | None:
    """The :class:`ItemMeta` of ``node`` if it is an item under namespace ``prefix``, else None.

    An item's meta names it and its id is that name's: a node under
    ``langgraph-store/`` whose meta names another item (not written by a store)
    is none, as ``get`` of either name would not find it either.
    """
    meta = item_meta(node)
    if meta is None or node is None or meta.namespace[: len(prefix)] != prefix:
        return None
    return meta if node.id == node_id(meta.namespace, meta.key) else None


def store_item(
    node: Node, meta: ItemMeta, versions: Sequence[Version], score: float | None = None, search: bool = False
) -> Item:
    """The LangGraph item of ``node``, its times from ``versions`` (its history, newest first)."""
    created, updated = item_times(versions, node.hash)
    if search:
        return SearchItem(meta.namespace, meta.key, node.content, created, updated, score)
    return Item(
        value=node.content, key=meta.key, namespace=meta.namespace, created_at=created, updated_at=updated
    )


def item_times(versions: Sequence[Version], current: str) -> tuple[datetime, datetime]:
    """``created_at`` and ``updated_at`` of the version ``current`` among ``versions`` (newest first).

    Created: the first version of the item's present life, which began after it
    was last removed or had expired before it was written again. Updated: the
    newest version of that life up to ``current`` that was not a TTL refresh.
    """
    start = next((i for i, v in enumerate(versions) if v.hash == current), 0)
    life = versions[start:]
    updated: datetime | None = None
    created = life[0].commit.record_time if life else datetime.min
    for index, version in enumerate(life):
        meta = item_meta(version.node)
        if updated is None and not (meta is not None and meta.refreshed):
            updated = version.commit.record_time
        created = version.commit.record_time
        older = life[index + 1] if index + 1 < len(life) else None
        if older is None or removed_after(older):
            break
        expiry = older.node.expires_at if older.node is not None else None
        if expiry is not None and expiry <= version.commit.record_time:
            break
    return created, updated if updated is not None else created

"""fsck for the recall indexes: every record must decode, and their keys must match live content.

Vectors themselves are not recomputed (that would cost model time): a vector is
right when some stored version has its content. Damage a search would trip
over (a record that does not decode) is reported here first.
"""

from __future__ import annotations

import numpy as np

from mnemosyne.errors import CorruptObject, NotFound
from mnemosyne.index.view import View
from mnemosyne.recall.postings import rows_of
from mnemosyne.recall.recall_index import RecallIndex
from mnemosyne.recall.text import content_hash
from mnemosyne.recall.vectors import parse_block

_REINDEX = "run 'mnemo reindex'"


def check(view: View, stored: set[bytes] | None = None) -> list[str]:
    """Problems of one tenant's recall indexes, one line each.

    ``stored``: the id of every object the tenant stores, when the caller has
    listed them (``fsck`` has): versions are looked up there rather than in the
    store, one by one (on PostgreSQL a round trip each).
    """
    recall = RecallIndex(view.stores.scope)
    try:
        # Postings of a layout lacking only id words are rebuilt at the next search: not a problem.
        if not recall.vectors_current(view.txn):
            return [f"the search index was written by an older version; {_REINDEX}"]
        return _check(view, recall, stored)
    except CorruptObject as exc:
        return [f"{exc}"]


def _check(view: View, recall: RecallIndex, stored: set[bytes] | None) -> list[str]:
    txn = view.txn
    postings = recall.postings
    problems: list[str] = []

    def readable(oid: bytes) -> bool:
        # Presence is enough here: the object check re-hashes every stored object.
        return oid in stored if stored is not None else view.objects.contains(txn, oid)

    postings.stats(txn)  # decodes, or reports the damage
    documents: set[bytes] = set()
    for oid, _ in postings.every_document(txn):  # decodes each, or reports the damage
        documents.add(oid)
        if len(oid) != 32:
            problems.append(f"the search index has a document record of a malformed hash; {_REINDEX}")
        elif not readable(oid):
            problems.append(f"the search index names version {oid.hex()[:12]}, which is erased or missing")
    numbers: list[int] = []
    for number, (oid, _, _) in postings.every_number(txn):
        numbers.append(number)
        if oid not in documents:
            problems.append(f"document {number} names version {oid.hex()[:12]}, which is not indexed")
    known = np.zeros(max(numbers, default=-1) + 2, dtype=bool)  # the last slot: beyond them all
    known[numbers] = True
    strays = 0
    for _, value in postings.every_segment(txn):
        named = np.minimum(rows_of(value)[:, 0], len(known) - 1)
        strays += int(np.count_nonzero(~known[named]))
    if strays:
        problems.append(f"{strays} postings name documents that are not indexed; {_REINDEX}")
    contents: set[bytes] = set()
    for chash, versions in postings.every_content(txn):
        for oid, _, _ in versions:
            if readable(oid):
                contents.add(chash)
            else:
                problems.append(f"the content map names version {oid.hex()[:12]}, which is erased or missing")
    if not recall.vectors.any(txn):
        return problems  # no vectors: nothing below could be wrong
    for oid in recall.queue.queued(txn):
        try:
            contents.add(content_hash(view.node(oid)))
        except (NotFound, CorruptObject):
            continue  # dropped at the next catch-up; a corrupt object is reported apart
    for model, dim in recall.vectors.model_dims(txn):
        if not dim.isdigit():
            problems.append(f"the dimension of model {model} is damaged; run 'mnemo reindex --vectors'")
            continue
        mapped = set(recall.vectors.vector_hashes(txn, model))
        problems.extend(
            f"a {model} vector is kept for content no stored version has" for c in mapped if c not in contents
        )
        in_blocks = [chash for data in recall.vectors.blocks(txn, model) for chash in parse_block(data)[0]]
        if any(chash not in mapped for chash in in_blocks if chash != bytes(32)):
            problems.append(f"a {model} vector block keeps a vector its map no longer names")
    return problems

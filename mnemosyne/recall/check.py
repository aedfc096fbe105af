"""fsck for the recall indexes: their keys must match live content.

Vectors themselves are not recomputed (that would cost model time): a vector is
right when some stored version has its content.
"""

from __future__ import annotations

import numpy as np

from mnemosyne.errors import CorruptObject, NotFound
from mnemosyne.index.recall_queue import RecallQueue
from mnemosyne.index.view import View
from mnemosyne.recall import postings
from mnemosyne.recall import vectors as vector_store
from mnemosyne.recall.index import format_current
from mnemosyne.recall.text import content_hash
from mnemosyne.store.kv.base import Space


def check(view: View) -> list[str]:
    """Problems of one tenant's recall indexes, one line each."""
    txn = view.txn
    scope = view.stores.scope
    if not format_current(txn, scope):
        return ["the search index was written by an older version; run 'mnemo reindex'"]
    problems: list[str] = []
    contents: set[bytes] = set()

    def readable(oid: bytes) -> bool:
        # Presence is enough here: the object check re-hashes every stored object.
        return txn.get(Space.OBJECTS, scope + oid) is not None

    prefix = scope + postings.DOC
    for key, _ in txn.scan(Space.RECALL, prefix):
        oid = key[len(prefix) :]
        if not readable(oid):
            problems.append(f"the search index names version {oid.hex()[:12]}, which is erased or missing")
    prefix = scope + postings.NUMBER
    numbers: list[int] = []
    for key, value in txn.scan(Space.RECALL, prefix):
        numbers.append(int.from_bytes(key[len(prefix) :], "big"))
        if postings.document(txn, scope, value[:32]) is None:
            problems.append(
                f"document {numbers[-1]} names version {value[:32].hex()[:12]}, which is not indexed"
            )
    known = np.zeros(max(numbers, default=-1) + 2, dtype=bool)  # the last slot: beyond them all
    known[numbers] = True
    prefix = scope + postings.TERM
    strays = 0
    for _, value in txn.scan(Space.RECALL, prefix):
        named = np.minimum(np.frombuffer(value, dtype="<u4")[::3], len(known) - 1)
        strays += int(np.count_nonzero(~known[named]))
    if strays:
        problems.append(f"{strays} postings name documents that are not indexed; run 'mnemo reindex'")
    for chash, versions in postings.every_content(txn, scope):
        for oid, _, _ in versions:
            if readable(oid):
                contents.add(chash)
            else:
                problems.append(f"the content map names version {oid.hex()[:12]}, which is erased or missing")
    if next(iter(txn.scan(Space.VECTORS, scope)), None) is None:
        return problems  # no vectors: nothing below could be wrong
    for oid in RecallQueue(scope).queued(txn):
        try:
            contents.add(content_hash(view.node(oid)))
        except (NotFound, CorruptObject):
            continue  # dropped at the next catch-up; a corrupt object is reported apart
    for model in vector_store.models(txn, scope):
        mapped = set(vector_store.vector_hashes(txn, scope, model))
        problems.extend(
            f"a {model} vector is kept for content no stored version has" for c in mapped if c not in contents
        )
        if any(chash not in mapped for chash in vector_store.block_hashes(txn, scope, model)):
            problems.append(f"a {model} vector block keeps a vector its map no longer names")
    return problems

"""fsck for the recall indexes: their keys must match live content.

Vectors themselves are not recomputed (that would cost model time): a vector is
right when some stored version has its content.
"""

from __future__ import annotations

from mnemosyne.errors import CorruptObject, NotFound
from mnemosyne.kv.base import Space
from mnemosyne.recall.text import content_hash
from mnemosyne.view import View


def check(view: View) -> list[str]:
    """Problems of one tenant's recall indexes, one line each."""
    txn = view.txn
    scope = view.stores.scope
    problems: list[str] = []
    contents: set[bytes] = set()

    def readable(oid: bytes) -> bool:
        # Presence is enough here: the object check re-hashes every stored object.
        return txn.get(Space.OBJECTS, scope + oid) is not None

    for key, _ in txn.scan(Space.RECALL, scope + b"d"):
        oid = key[len(scope) + 1 :]
        if not readable(oid):
            problems.append(f"the search index names version {oid.hex()[:12]}, which is erased or missing")
    prefix = scope + b"c"
    for key, _ in txn.scan(Space.RECALL, prefix):
        chash, oid = key[len(prefix) : len(prefix) + 32], key[len(prefix) + 32 :]
        if readable(oid):
            contents.add(chash)
        else:
            problems.append(f"the content map names version {oid.hex()[:12]}, which is erased or missing")
    if next(iter(txn.scan(Space.VECTORS, scope)), None) is None:
        return problems  # no vectors: nothing below could be wrong
    for key, _ in txn.scan(Space.RECALL, scope + b"q"):
        oid = key[len(scope) + 1 :]
        try:
            contents.add(content_hash(view.node(oid)))
        except (NotFound, CorruptObject):
            continue  # dropped at the next catch-up; a corrupt object is reported apart
    for key, _ in txn.scan(Space.VECTORS, scope):
        rest = key[len(scope) :]
        model, separator, chash = rest.partition(b"\x00")
        if separator and len(chash) == 32 and b"\x01" not in model and chash not in contents:
            problems.append(
                f"a {model.decode(errors='replace')} vector is kept for content no stored version has"
            )
    return problems

"""Where a store's approximate index is saved (see ADR 32).

Apart from :mod:`mnemosyne.recall.index_files` (numpy, the file formats): every
handle opening a store names its index's place, and a command that never
searches should not load numpy to do so.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

DIRECTORY = "recall-index"
"""The index directory inside a store directory."""


class IndexLocation(msgspec.Struct, frozen=True):
    """Where a store's approximate index is saved, and what a handle may do there.

    Attributes:
        directory: the index directory.
        writable: whether this handle writes files there (a read-only handle
            inside a store directory only reads them).
        outside: a cache outside the store (given with ``index_cache``): no
            compaction of the store reaches it for sure, so a file there that
            holds a dropped row is rewritten by the next handle that reads the drop.
        tag: what names the store in the files' names ("" inside a store directory).
    """

    directory: str
    writable: bool
    outside: bool = False
    tag: str = ""

    @classmethod
    def inside(cls, store: Path, writable: bool) -> IndexLocation:
        """The index directory of a store directory."""
        return cls(directory=str(store / DIRECTORY), writable=writable)

    @classmethod
    def cache(cls, directory: Path, store: str) -> IndexLocation:
        """A cache directory shared by stores: files are named for the store (``store``: its location)."""
        import hashlib  # OpenSSL's hashes load in milliseconds: not for every process that opens a store

        tag = hashlib.blake2b(store.encode(), digest_size=6).hexdigest() + "-"
        return cls(directory=str(directory), writable=True, outside=True, tag=tag)

    def name(self, scope: bytes, model: str) -> str:
        """The files' common name for one tenant's model."""
        import hashlib

        digest = hashlib.blake2b(model.encode(), digest_size=8).hexdigest()
        return f"{self.tag}{scope.hex()}-{digest}"

    def path(self, name: str) -> Path:
        """A file of the index directory."""
        return Path(self.directory) / name

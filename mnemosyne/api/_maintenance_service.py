"""Maintenance of one tenant: checking and rebuilding its indexes (see :class:`Repo`).

The checker and the rebuilder are imported by the call that runs them, so
opening a ``Repo`` does not load them.
"""

from __future__ import annotations

import msgspec

from mnemosyne.api._handle import Handle
from mnemosyne.index.view import WriteView
from mnemosyne.model.reports import FsckReport, Problem
from mnemosyne.recall.index_location import IndexLocation


class MaintenanceService:
    """``fsck`` and ``reindex`` for one tenant."""

    def __init__(self, handle: Handle, index_location: IndexLocation | None) -> None:
        self._handle = handle
        self._index_location = index_location

    def fsck(self, *, repair: bool = False) -> FsckReport:
        """Re-hash every object; check refs, reflogs, commits, trees and every derived index.

        With ``repair``, when the only problems are derived indexes out of date,
        rebuild them and check again (``reindexed`` says how many entries).

        Returns:
            A report; ``ok`` is False when anything is wrong, and ``problems`` says what.
        """
        from mnemosyne.store.kv.apart import apart  # pickle and a fork: loaded when fsck runs

        report = apart(self._handle.kv, lambda _: self._check())
        if repair and report.problems and all(p.kind == "index" for p in report.problems):
            from mnemosyne.admin.fsck import fsck

            written = self.reindex()
            self._drop_damaged_index_files()
            with self._handle.read() as view:
                report = msgspec.structs.replace(fsck(view), reindexed=written, repaired=report.problems)
        return report

    def _check(self) -> FsckReport:
        from mnemosyne.admin.fsck import fsck

        with self._handle.read() as view:
            report = fsck(view)
        location = self._index_location
        if location is None:
            return report
        from mnemosyne.recall.index_files import damaged_files  # numpy: loaded when fsck runs

        damaged = damaged_files(location, self._handle.scope)
        if not damaged:
            return report
        found = [Problem(kind="index", object=None, message=line) for line in damaged]
        return msgspec.structs.replace(report, ok=False, problems=[*report.problems, *found])

    def _drop_damaged_index_files(self) -> None:
        """Delete a tenant's saved index when a file of it fails its checksum: the next search rebuilds it."""
        location = self._index_location
        if location is None or not location.writable:
            return
        from mnemosyne.recall import index_files

        scope = self._handle.scope
        if index_files.damaged_files(location, scope):
            index_files.remove(location, scope)

    def reindex(self) -> int:
        """Rebuild the derived indexes (commit graph, change and claim indexes) from the commits.

        Queues every stored version for the recall indexes too (the next search
        rebuilds their postings).

        Returns:
            The number of index entries written.
        """
        from mnemosyne.index.build import reindex
        from mnemosyne.recall.recall_index import RecallIndex

        handle = self._handle

        def work(view: WriteView) -> int:
            written = reindex(view)
            RecallIndex(handle.scope).requeue(view)  # the search postings are derived too
            return written

        return handle.write(work)

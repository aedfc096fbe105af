"""Maintenance of one tenant: checking and rebuilding its indexes (see :class:`Repo`)."""

from __future__ import annotations

import msgspec

from mnemosyne.admin.fsck import fsck
from mnemosyne.api._handle import Handle
from mnemosyne.index.build import reindex
from mnemosyne.index.view import WriteView
from mnemosyne.model.reports import FsckReport
from mnemosyne.store.kv.apart import apart


class MaintenanceService:
    """``fsck`` and ``reindex`` for one tenant."""

    def __init__(self, handle: Handle) -> None:
        self._handle = handle

    def fsck(self, repair: bool) -> FsckReport:
        """The work of :meth:`Repo.fsck`."""
        report = apart(self._handle.kv, lambda _: self._check())
        if repair and report.problems and all(p.kind == "index" for p in report.problems):
            written = self.reindex()
            with self._handle.read() as view:
                report = msgspec.structs.replace(fsck(view), reindexed=written, repaired=report.problems)
        return report

    def _check(self) -> FsckReport:
        with self._handle.read() as view:
            return fsck(view)

    def reindex(self) -> int:
        """The work of :meth:`Repo.reindex`: the commit graph, change and claim indexes, then recall."""
        from mnemosyne.recall.recall_index import RecallIndex

        handle = self._handle

        def work(view: WriteView) -> int:
            written = reindex(view)
            RecallIndex(handle.scope).requeue(view)  # the search postings are derived too
            return written

        return handle.write(work)

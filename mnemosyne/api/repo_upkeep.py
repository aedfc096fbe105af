"""The upkeep part of :class:`~mnemosyne.api.repo.Repo`: erasure, collection and maintenance.

A mixin of ``Repo``'s methods that erase, collect, check and rebuild; the work
is done by :mod:`mnemosyne.api.erasure` and :mod:`mnemosyne.api.maintenance`,
imported when first used.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING

from mnemosyne.api.handle import Handle
from mnemosyne.errors import InvalidInput
from mnemosyne.model.defaults import DEFAULT_AUTHOR, EXPIRED_REASON, GC_GRACE
from mnemosyne.store import tenancy

if TYPE_CHECKING:
    from mnemosyne.api.erasure import Erasure
    from mnemosyne.api.maintenance import Maintenance
    from mnemosyne.api.store import Store
    from mnemosyne.model.objects import Redaction
    from mnemosyne.model.reports import ForgetReport, FsckReport, GcReport


class UpkeepMethods:
    """``Repo``'s methods for erasure and maintenance (see :class:`~mnemosyne.api.repo.Repo`)."""

    store: Store
    _handle: Handle

    if TYPE_CHECKING:

        @property
        def tenant(self) -> str:
            """The tenant this handle is bound to (the ``Repo``'s)."""
            ...

    @functools.cached_property
    def _erasure(self) -> Erasure:
        from mnemosyne.api.erasure import Erasure

        return Erasure(self._handle, self.store.compact)

    @functools.cached_property
    def _maintenance(self) -> Maintenance:
        from mnemosyne.api.maintenance import Maintenance

        return Maintenance(self._handle)

    # -- erasure and collection ----------------------------------------------

    def redactions(self, hashes: Iterable[str]) -> dict[str, Redaction]:
        """The redaction records of those of ``hashes`` whose versions were erased, by hash.

        One snapshot answers for all: a cheap check, for a face that keeps what it
        read, that none of it has been erased since (erasure leaves the trees and
        tips as they were).

        Raises:
            InvalidInput: a hash that is not 64 hex digits.
        """
        return self._erasure.redactions(hashes)

    def forget(
        self, id: str, reason: str, *, author: str = DEFAULT_AUTHOR, version: str | None = None
    ) -> ForgetReport:
        """Erase for real: delete the bytes of every version of ``id`` (or of one version).

        Content, provenance and meta of each erased version leave the object store
        and the derived indexes; an append-only redaction record (hash, time, author,
        reason) takes its place. Trees and commits keep the hash, so history still
        verifies; reading an erased version raises ``Redacted``. The current branch
        drops the id in a normal commit when its version there was erased. Freed
        pages keep old bytes until ``gc(compact=True)`` rewrites the file.

        Args:
            id: the node id (ids are keys and stay; personal data belongs in content).
            reason: why, kept in the redaction record.
            author: who, kept in the redaction record.
            version: one version's hash (or a unique prefix of at least 4 hex
                characters) to erase just that one.

        Returns:
            The redaction records made now, the first records of versions erased
            before (``already_erased``), and the commit that dropped the id.

        Raises:
            NotFound: the id has no such version in this tenant.
            InvalidInput: no reason, or an ambiguous version prefix.
        """
        return self._erasure.forget(id, reason, author, version)

    def forget_expired(self, reason: str = EXPIRED_REASON, *, author: str = DEFAULT_AUTHOR) -> ForgetReport:
        """Erase every node version past its ``expires_at`` (judged by the store's clock)."""
        return self._erasure.forget_expired(reason, author)

    def gc(
        self,
        grace: timedelta = GC_GRACE,
        compact: bool = False,
        expire_reflog: timedelta | None = None,
    ) -> GcReport:
        """Remove objects unreachable from every ref and retained reflog entry.

        An object goes only after it has been unreachable for ``grace`` (the first
        collection that finds it starts its clock; ``timedelta(0)`` removes at once).
        Reflogs are kept forever unless ``expire_reflog`` prunes entries older than
        that (as-of reads before the horizon then give ``NotFound``).

        Args:
            grace: how long an object must stay unreachable before it is removed.
            compact: afterwards rewrite the store file from its live records only, so
                erased bytes leave the disk; needs the store to itself (no other
                handle in this process, no other process).
            expire_reflog: prune reflog entries older than this.

        Raises:
            InvalidInput: ``compact`` while another handle or process has the store open.
        """
        return self._erasure.gc(grace, compact, expire_reflog)

    # -- maintenance ---------------------------------------------------------

    def fsck(self, *, repair: bool = False) -> FsckReport:
        """Re-hash every object; check refs, reflogs, commits, trees and every derived index.

        With ``repair``, when the only problems are derived indexes out of date,
        rebuild them and check again (``reindexed`` says how many entries).

        Returns:
            A report; ``ok`` is False when anything is wrong, and ``problems`` says what.
        """
        return self._maintenance.fsck(repair)

    def reindex(self) -> int:
        """Rebuild the derived indexes (commit graph, change and claim indexes) from the commits.

        Queues every stored version for the recall indexes too (the next search
        rebuilds their postings).

        Returns:
            The number of index entries written.
        """
        return self._maintenance.reindex()

    def tenants(self) -> list[str]:
        """Names of the store's tenants, sorted."""
        return self.store.tenants()

    def drop_tenant(self, name: str) -> int:
        """Delete a whole tenant (see :meth:`Store.drop_tenant`); not this handle's own.

        Raises:
            InvalidInput: it is this handle's tenant, or the default tenant.
            NotFound: no such tenant.
        """
        tenancy.check_tenant_name(name)
        if name == self.tenant:
            raise InvalidInput(f"cannot drop tenant {name!r} from a handle bound to it")
        return self.store.drop_tenant(name)

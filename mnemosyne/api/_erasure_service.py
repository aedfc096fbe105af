"""Erasure and garbage collection (see :class:`Repo` and ADR 9).

The erasure and collection code is imported by the call that runs it: opening a
``Repo`` to read does not load it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import timedelta

import msgspec

from mnemosyne.api._handle import Handle
from mnemosyne.errors import InvalidInput
from mnemosyne.model.defaults import DEFAULT_AUTHOR, EXPIRED_REASON
from mnemosyne.model.objects import Redaction
from mnemosyne.model.reports import CompactReport, ForgetReport, GcReport
from mnemosyne.model.validation import check_id, is_full_hash


class ErasureService:
    """Forgetting and collection for one tenant (see :class:`Repo` for each call)."""

    def __init__(self, handle: Handle, compact: Callable[[], CompactReport]) -> None:
        self._handle = handle
        self._compact = compact

    def forget(
        self,
        id: str | Iterable[str],
        reason: str,
        *,
        author: str = DEFAULT_AUTHOR,
        version: str | None = None,
    ) -> ForgetReport:
        """Erase for real: delete the bytes of every version of ``id`` (or of one version).

        Content, provenance and meta of each erased version leave the object store
        and the derived indexes; an append-only redaction record (hash, time, author,
        reason) takes its place. Trees and commits keep the hash, so history still
        verifies; reading an erased version raises ``Redacted``. The current branch
        drops the id in a normal commit when its version there was erased. Freed
        pages keep old bytes until ``gc(compact=True)`` rewrites the file.

        Args:
            id: the node id (ids are keys and stay; personal data belongs in content),
                or several (a list, or any iterable such as :meth:`ids`): erased
                together in one transaction (all or nothing; an id with no versions
                erases none) and dropped in one commit.
            reason: why, kept in the redaction record.
            author: who, kept in the redaction record.
            version: one version's hash (or a unique prefix of at least 4 hex
                characters) to erase just that one (of a single id).

        Returns:
            The redaction records made now, the first records of versions erased
            before (``already_erased``), and the commit that dropped the ids.

        Raises:
            NotFound: an id has no such version in this tenant (nothing is erased).
            InvalidInput: no id, no reason, ``version`` with several ids, or an
                ambiguous version prefix.
        """
        ids = id
        if isinstance(ids, str):
            wanted = [ids]
        elif isinstance(ids, Iterable) and not isinstance(ids, bytes | bytearray | Mapping):
            wanted = list(ids)
        else:
            raise InvalidInput(f"id must be an id or ids (a list or iterable), not {type(ids).__name__}")
        if not wanted:
            raise InvalidInput("name at least one id to forget")
        for node_id in wanted:
            check_id(node_id)
        if version is not None and len(wanted) != 1:
            raise InvalidInput("version erases one version of one id: give exactly one id with it")
        _check_reason(reason)
        if not isinstance(author, str):
            raise InvalidInput("author must be a string")
        if version is not None and not isinstance(version, str):
            raise InvalidInput("version must be a hash (hex text)")
        distinct = list(dict.fromkeys(wanted))  # an id named twice is erased once
        from mnemosyne.admin import erase

        handle = self._handle
        return handle.write(
            lambda view: erase.forget(view, distinct, version, reason=reason, author=author, now=handle.now())
        )

    def redactions(self, hashes: Iterable[str]) -> dict[str, Redaction]:
        """The redaction records of those of ``hashes`` whose versions were erased, by hash.

        One snapshot answers for all: a cheap check, for a face that keeps what it
        read, that none of it has been erased since (erasure leaves the trees and
        tips as they were).

        Raises:
            InvalidInput: a hash that is not 64 hex digits.
        """
        wanted = list(hashes) if not isinstance(hashes, str) else [hashes]
        for value in wanted:
            if not is_full_hash(value):
                raise InvalidInput(f"{value!r} is not a version's hash (64 hex digits)")
        found: dict[str, Redaction] = {}
        with self._handle.read() as view:
            for value in wanted:
                record = view.objects.redaction(view.txn, bytes.fromhex(value))  # either case
                if record is not None:
                    found[value] = record
        return found

    def erasures(self) -> int:
        """A count that grows with every erasure in this tenant: one read, whatever it keeps.

        Every version :meth:`forget` (or ``forget_expired``) erases adds one, and so
        does every redaction record a restore or a remote brings; nothing takes
        any away. A face that keeps what it read notes the count when it reads and
        serves what it kept while both the count and :meth:`tip` are unchanged: a
        cheaper check than :meth:`redactions` of everything kept, as erasure leaves
        trees and tips as they were. A store made before the count existed starts
        it at 0.
        """
        with self._handle.read() as view:
            return view.objects.erasures(view.txn)

    def forget_expired(self, reason: str = EXPIRED_REASON, *, author: str = DEFAULT_AUTHOR) -> ForgetReport:
        """Erase every node version past its ``expires_at`` (judged by the store's clock)."""
        _check_reason(reason)
        from mnemosyne.admin import erase

        handle = self._handle
        return handle.write(
            lambda view: erase.forget_expired(view, reason=reason, author=author, now=handle.now())
        )

    def gc(self, grace: timedelta, compact: bool, expire_reflog: timedelta | None) -> GcReport:
        """The work of :meth:`Repo.gc`."""
        for name, value in (("grace", grace), ("expire_reflog", expire_reflog)):
            if value is not None and (not isinstance(value, timedelta) or value < timedelta(0)):
                raise InvalidInput(f"{name} must be a non-negative timedelta")
        from mnemosyne.admin.gc import collect

        handle = self._handle
        if compact:
            handle.kv.check_compact()  # a refusal before collecting, not after: one outcome
        report = handle.write(
            lambda view: collect(view, grace=grace, now=handle.now(), expire_reflog=expire_reflog)
        )
        if compact:
            done = self._compact()
            report = msgspec.structs.replace(
                report,
                compacted=True,
                file_bytes_before=done.file_bytes_before,
                file_bytes_after=done.file_bytes_after,
            )
        return report


def _check_reason(reason: object) -> None:
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidInput("give a reason for erasing: it is kept in the redaction record")

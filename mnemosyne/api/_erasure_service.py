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
from mnemosyne.model.objects import Redaction
from mnemosyne.model.reports import CompactReport, ForgetReport, GcReport
from mnemosyne.model.validation import check_id, is_full_hash


class ErasureService:
    """Forgetting and collection for one tenant (see :class:`Repo` for each call)."""

    def __init__(self, handle: Handle, compact: Callable[[], CompactReport]) -> None:
        self._handle = handle
        self._compact = compact

    def forget(self, ids: str | Iterable[str], reason: str, author: str, version: str | None) -> ForgetReport:
        """The work of :meth:`Repo.forget`."""
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
        """The work of :meth:`Repo.redactions`."""
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
        """The work of :meth:`Repo.erasures`."""
        with self._handle.read() as view:
            return view.objects.erasures(view.txn)

    def forget_expired(self, reason: str, author: str) -> ForgetReport:
        """The work of :meth:`Repo.forget_expired`."""
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

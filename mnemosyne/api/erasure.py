"""Forgetting methods of ``Repo``: erasure and garbage collection (see ADR 9)."""

from __future__ import annotations

from datetime import datetime, timedelta

import msgspec

from mnemosyne.admin import erase as erasure
from mnemosyne.admin.gc import GcReport, collect
from mnemosyne.api.handle import RepoCore
from mnemosyne.errors import InvalidInput, NotFound
from mnemosyne.history.commits import apply_commit
from mnemosyne.index.view import WriteView
from mnemosyne.model.objects import Redaction
from mnemosyne.model.validation import check_id
from mnemosyne.store.kv.lmdb_kv import LmdbKV
from mnemosyne.store.refs import BRANCH_PREFIX


class ForgettingMethods(RepoCore):
    """What ``Repo`` offers for erasure and garbage collection."""

    # -- forgetting --------------------------------------------------------------

    def forget(
        self, id: str, reason: str, author: str = "unknown", version: str | None = None
    ) -> list[Redaction]:
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
            One redaction record per version erased now (versions erased before keep
            their first record).

        Raises:
            NotFound: the id has no such version in this tenant.
            InvalidInput: no reason, or an ambiguous version prefix.
        """
        check_id(id)
        if not isinstance(reason, str) or not reason.strip():
            raise InvalidInput("give a reason for erasing: it is kept in the redaction record")

        def work(view: WriteView) -> list[Redaction]:
            versions = erasure.versions_of(view, id)
            if version is not None:
                versions = [v for v in versions if v.hex().startswith(version.lower())]
                if len(version) < 4 or len(versions) > 1:
                    raise InvalidInput(f"version {version!r} is ambiguous; give more hex characters")
            if not versions:
                raise NotFound(f"{id} has no {'such version' if version else 'versions'} in this store")
            now = self._now()
            records, had_claim = erasure.erase(view, id, versions, author=author, reason=reason, now=now)
            self._drop_erased(view, {id: set(versions)}, author, f"forget {id}: {reason}", now)
            if had_claim:
                erasure.refresh_claim_index(view)
            return records

        return self._write(work)

    def forget_expired(self, reason: str = "expired", author: str = "unknown") -> list[Redaction]:
        """Erase every node version past its ``expires_at`` (judged by the store's clock)."""

        def work(view: WriteView) -> list[Redaction]:
            now = self._now()
            found = erasure.expired_versions(view, now)
            records: list[Redaction] = []
            any_claim = False
            for node_id, hashes in found.items():
                erased, had_claim = erasure.erase(
                    view, node_id, hashes, author=author, reason=reason, now=now
                )
                records.extend(erased)
                any_claim = any_claim or had_claim
            self._drop_erased(
                view, {k: set(v) for k, v in found.items()}, author, f"forget expired: {reason}", now
            )
            if any_claim:
                erasure.refresh_claim_index(view)
            return records

        return self._write(work)

    def _drop_erased(
        self, view: WriteView, erased: dict[str, set[bytes]], author: str, message: str, now: datetime
    ) -> None:
        branch = view.refs.head_branch(view.txn)
        tip = view.refs.read(view.txn, BRANCH_PREFIX + branch)
        if tip is None:
            return
        root = view.commit(tip).tree
        gone = sorted(i for i, hashes in erased.items() if view.tree.get(root, i) in hashes)
        if gone:
            apply_commit(
                view,
                branch=branch,
                parent=None,
                nodes=[],
                removals=gone,
                author=author,
                message=message,
                meta=None,
                allow_empty=False,
                on_claim_conflict="refuse",
                now=now,
            )

    def gc(
        self,
        grace: timedelta = timedelta(days=14),
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
            compact: afterwards rewrite the store file without free pages, so erased
                bytes leave the disk; needs the store to itself (no other handle in
                this process, no other process).
            expire_reflog: prune reflog entries older than this.

        Raises:
            InvalidInput: ``compact`` while another handle or process has the store open.
        """
        report = self._write(
            lambda view: collect(view, grace=grace, now=self._now(), expire_reflog=expire_reflog)
        )
        if compact and isinstance(self._kv, LmdbKV):
            before, after = self._kv.compact()
            report = msgspec.structs.replace(
                report, compacted=True, file_bytes_before=before, file_bytes_after=after
            )
        return report

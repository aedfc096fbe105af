"""What maintenance returns: erasure, collection, checking, compaction, backup, remotes."""

from __future__ import annotations

from typing import Literal

import msgspec

from mnemosyne.model.objects import Commit, Redaction
from mnemosyne.model.results import MergeResult

ProblemKind = Literal["corrupt", "missing", "index"]


class ForgetReport(msgspec.Struct, frozen=True, kw_only=True):
    """What :meth:`Repo.forget` erased.

    Attributes:
        redactions: one record per version erased by this call.
        already_erased: the first records of versions erased before (they stand:
            records are append-only).
        commit: the commit that dropped the id from the current branch, or None
            when the branch did not hold an erased version.
    """

    redactions: list[Redaction]
    already_erased: list[Redaction] = []
    commit: Commit | None = None


class GcReport(msgspec.Struct, frozen=True, kw_only=True):
    """What a collection did.

    Attributes:
        objects_removed: objects deleted (unreachable for longer than the grace period).
        bytes_removed: their stored size.
        commits_removed: how many of them were commits.
        pending: unreachable objects kept until their grace period ends.
        reflog_entries_removed: reflog entries pruned by ``expire_reflog``.
        compacted: whether the store file was rewritten without free pages.
        file_bytes_before: the store file's size before compaction (when compacted).
        file_bytes_after: its size after.
    """

    objects_removed: int
    bytes_removed: int
    commits_removed: int
    pending: int
    reflog_entries_removed: int
    compacted: bool = False
    file_bytes_before: int | None = None
    file_bytes_after: int | None = None


class CompactReport(msgspec.Struct, frozen=True, kw_only=True):
    """What :meth:`Store.compact` did.

    Attributes:
        file_bytes_before: the store file's size before.
        file_bytes_after: its size after (live records only).
    """

    file_bytes_before: int
    file_bytes_after: int


class Problem(msgspec.Struct, frozen=True, kw_only=True):
    """One thing fsck found wrong.

    Attributes:
        kind: ``corrupt`` (bytes do not match the hash or do not decode, or the
            store file itself is damaged), ``missing`` (something points at an
            object that is not stored), ``index`` (a derived index disagrees with
            the objects).
        object: hex id of the object concerned, when there is one.
        message: one line for people.
    """

    kind: ProblemKind
    object: str | None
    message: str


class FsckReport(msgspec.Struct, frozen=True, kw_only=True):
    """The result of :meth:`Repo.fsck`.

    Attributes:
        ok: True when no problem was found.
        problems: what was found.
        objects: how many objects were re-hashed.
        commits: how many reachable commits were checked.
        reindexed: index entries rewritten by a repair (None: no repair ran).
        repaired: the problems a repair fixed (``problems`` is what is left).
    """

    ok: bool
    problems: list[Problem]
    objects: int
    commits: int
    reindexed: int | None = None
    repaired: list[Problem] = []


class TenantCounts(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How many records of each kind one tenant has in an export.

    Attributes:
        name: the tenant.
        objects: stored objects (nodes, tree chunks, commits, contradiction records).
        refs: refs, ``HEAD`` included.
        reflog: reflog entries, of every ref (deleted branches' too).
        redactions: redaction records of erased versions.
    """

    name: str
    objects: int = 0
    refs: int = 0
    reflog: int = 0
    redactions: int = 0


class ExportReport(msgspec.Struct, frozen=True, kw_only=True):
    """What an export wrote.

    Attributes:
        tenants: the counts of each tenant exported, in name order.
        size: bytes written.
        digest: hex blake3 digest of the file up to its end record (as stored in it).
    """

    tenants: list[TenantCounts]
    size: int
    digest: str


class ImportReport(msgspec.Struct, frozen=True, kw_only=True):
    """What an import restored, and the ``fsck`` of the result.

    Attributes:
        tenants: the counts of each tenant imported, in name order.
        size: bytes read.
        digest: hex blake3 digest of the export (as stored in its end record).
        fsck: each imported tenant's fsck report.
        ok: True when every tenant's fsck found no problem.
    """

    tenants: list[TenantCounts]
    size: int
    digest: str
    fsck: dict[str, FsckReport]
    ok: bool


class BucketOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How to reach an object-storage bucket (``s3://BUCKET/PREFIX``): never its credentials.

    Each one left None is found as the AWS SDK finds it (``AWS_ENDPOINT_URL``,
    ``AWS_REGION``, ``AWS_PROFILE``, the shared configuration files); the
    credentials always are (``AWS_ACCESS_KEY_ID`` and ``AWS_SECRET_ACCESS_KEY``,
    a profile, a role), and are never kept.

    Attributes:
        endpoint_url: the S3-compatible server (``https://minio.example:9000``);
            None: AWS's own.
        region: the bucket's region.
        profile: the named profile of the shared AWS configuration files to use.
    """

    endpoint_url: str | None = None
    region: str | None = None
    profile: str | None = None


class Remote(msgspec.Struct, frozen=True, kw_only=True):
    """A remote: another store this one fetches from and pushes to.

    Attributes:
        name: its name here (``origin``, …).
        location: where it is, as :meth:`Store.open` takes it: a directory path or a URL
            (shown without its password; the configuration keeps the URL as given), or
            the URL of a served store (``http://…``).
        token_file: for a served store, the file its token is read from (None: the
            token is passed to each call, or ``MNEMO_TOKEN`` on the command line).
        bucket: for a bucket (``s3://BUCKET/PREFIX``), how it is reached (None: as
            the AWS SDK finds it).
    """

    name: str
    location: str
    token_file: str | None = None
    bucket: BucketOptions | None = None


class RefUpdate(msgspec.Struct, frozen=True, kw_only=True):
    """One ref a fetch or push moved.

    Attributes:
        ref: the ref moved: ``REMOTE/BRANCH`` (a remote-tracking ref, by a fetch)
            or ``BRANCH`` (the remote's branch, by a push).
        old: the commit it pointed at before (None: it is new).
        new: the commit it points at now (None: deleted, its branch gone from the remote).
        forced: the move was not a fast-forward (commits left its history).
    """

    ref: str
    old: str | None
    new: str | None
    forced: bool = False


class TenantSync(msgspec.Struct, frozen=True, kw_only=True):
    """What a fetch or push did for one tenant.

    Attributes:
        tenant: the tenant (the same name on both sides).
        commits: commits the receiving side did not have, now indexed there.
        objects: objects written there (nodes, tree chunks, commits, contradiction records).
        bytes: their stored size.
        redactions: redaction records received (their versions' bytes erased there).
        refs: the refs moved, in name order (empty: already up to date).
    """

    tenant: str
    commits: int
    objects: int
    bytes: int
    redactions: int
    refs: list[RefUpdate]


class SyncReport(msgspec.Struct, frozen=True, kw_only=True):
    """What :meth:`Repo.fetch` or :meth:`Repo.push` did.

    Attributes:
        kind: ``fetch`` or ``push``.
        remote: the remote's name.
        location: where it is (a URL without its password).
        tenants: one entry per tenant transferred.
    """

    kind: Literal["fetch", "push"]
    remote: str
    location: str
    tenants: list[TenantSync]


class PullReport(msgspec.Struct, frozen=True, kw_only=True):
    """What :meth:`Repo.pull` did: a fetch, then a merge of the remote-tracking branch.

    Attributes:
        fetch: the fetch.
        merge: the merge into the current branch (``merge.conflicts`` non-empty:
            nothing was merged; the fetch stands).
    """

    fetch: SyncReport
    merge: MergeResult

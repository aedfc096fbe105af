"""Mnemosyne: a content-addressed version-control store for AI-agent memory.

Every memory is an immutable, hashed :class:`Node`; every change is a
:class:`Commit` with a record time; history can be logged, blamed, diffed,
branched and read as of any moment. :class:`Store` is a whole store,
:class:`Repo` one tenant of it.

``import mnemosyne`` loads the errors and the data model only. The rest is
imported when first used: :class:`Repo`, :class:`Store` and the other parts
that open a store (and the store's code), the recall and backup parts
(numpy, the embedders), and the client of a served store (:func:`connect`,
httpx). ``from mnemosyne import Repo`` works as it always has; a process that
never opens a store does not pay for loading one (see ADR 60).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mnemosyne.errors import (
    AccessDenied,
    ClaimConflict,
    CorruptObject,
    InvalidInput,
    MergeConflict,
    MnemoError,
    NotFound,
    Redacted,
    RefConflict,
    StorageFull,
)
from mnemosyne.model.choices import ClaimPolicy, MergeStrategy, SearchMode
from mnemosyne.model.ids import new_id
from mnemosyne.model.objects import Claim, Commit, Node, Provenance, Redaction
from mnemosyne.model.reports import (
    BucketOptions,
    CompactReport,
    ExportReport,
    ForgetReport,
    FsckReport,
    GcReport,
    ImportReport,
    Problem,
    PullReport,
    RefUpdate,
    Remote,
    SyncReport,
    TenantCounts,
    TenantSync,
)
from mnemosyne.model.results import (
    Blame,
    BlameLine,
    Change,
    CommitResult,
    Conflict,
    Context,
    ContextItem,
    Contradiction,
    Diff,
    Fact,
    Freshness,
    History,
    Hit,
    MergeResult,
    PendingRecall,
    ReadRecord,
    TimelineChange,
    Version,
)
from mnemosyne.model.thread_names import Thread
from mnemosyne.model.times import parse_time
from mnemosyne.model.version import VERSION as __version__

if TYPE_CHECKING:
    from mnemosyne.api._handle import system_clock
    from mnemosyne.api.backup import export_store, import_store
    from mnemosyne.api.repo import Repo
    from mnemosyne.api.retry import with_retry
    from mnemosyne.api.store import Store
    from mnemosyne.integrations.client import connect
    from mnemosyne.model.jsonform import from_json, to_json
    from mnemosyne.recall.embedders import Embedder, HashEmbedder, default_embedder

_LAZY = {
    "Repo": "mnemosyne.api.repo",
    "Store": "mnemosyne.api.store",
    "system_clock": "mnemosyne.api._handle",
    "with_retry": "mnemosyne.api.retry",
    "connect": "mnemosyne.integrations.client",
    "to_json": "mnemosyne.model.jsonform",
    "from_json": "mnemosyne.model.jsonform",
    "export_store": "mnemosyne.api.backup",
    "import_store": "mnemosyne.api.backup",
    "Embedder": "mnemosyne.recall.embedders",
    "HashEmbedder": "mnemosyne.recall.embedders",
    "default_embedder": "mnemosyne.recall.embedders",
}


def __getattr__(name: str) -> Any:
    """The parts that load heavier modules (a store's code, numpy, httpx), imported on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mnemosyne' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """Every public name, the lazily imported ones included (for ``dir()`` and completion)."""
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "AccessDenied",
    "Blame",
    "BucketOptions",
    "BlameLine",
    "Change",
    "Claim",
    "ClaimConflict",
    "ClaimPolicy",
    "Commit",
    "CommitResult",
    "CompactReport",
    "Conflict",
    "Context",
    "ContextItem",
    "Contradiction",
    "CorruptObject",
    "Diff",
    "Embedder",
    "ExportReport",
    "Fact",
    "ForgetReport",
    "Freshness",
    "FsckReport",
    "GcReport",
    "HashEmbedder",
    "History",
    "Hit",
    "ImportReport",
    "InvalidInput",
    "MergeConflict",
    "MergeResult",
    "MergeStrategy",
    "MnemoError",
    "Node",
    "NotFound",
    "PendingRecall",
    "Problem",
    "Provenance",
    "PullReport",
    "ReadRecord",
    "Redacted",
    "Redaction",
    "RefConflict",
    "RefUpdate",
    "Remote",
    "Repo",
    "SearchMode",
    "StorageFull",
    "Store",
    "SyncReport",
    "TenantCounts",
    "TenantSync",
    "Thread",
    "TimelineChange",
    "Version",
    "__version__",
    "connect",
    "default_embedder",
    "export_store",
    "from_json",
    "import_store",
    "new_id",
    "parse_time",
    "system_clock",
    "to_json",
    "with_retry",
]

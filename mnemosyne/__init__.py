"""Mnemosyne: a content-addressed version-control store for AI-agent memory.

Every memory is an immutable, hashed :class:`Node`; every change is a
:class:`Commit` with a record time; history can be logged, blamed, diffed,
branched and read as of any moment.
"""

from mnemosyne.admin.backup import ExportReport, ImportReport, TenantCounts, export_store, import_store
from mnemosyne.admin.fsck import FsckReport, Problem
from mnemosyne.admin.gc import GcReport
from mnemosyne.api.repo import Repo, system_clock
from mnemosyne.api.retry import with_retry
from mnemosyne.errors import (
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
from mnemosyne.history.blame import Blame, BlameLine
from mnemosyne.history.branches import MergeResult
from mnemosyne.history.merge import Conflict, Contradiction
from mnemosyne.history.revisions import parse_time
from mnemosyne.model.ids import new_id
from mnemosyne.model.objects import Claim, Commit, Node, Provenance, Redaction
from mnemosyne.model.results import Change, Diff, Fact, Version
from mnemosyne.recall.embedders import Embedder, HashEmbedder, default_embedder
from mnemosyne.recall.search import Context, ContextItem, Hit, ReadRecord

__version__ = "0.1.0"

__all__ = [
    "Blame",
    "BlameLine",
    "Change",
    "Claim",
    "ClaimConflict",
    "Commit",
    "Conflict",
    "Context",
    "ContextItem",
    "Contradiction",
    "CorruptObject",
    "Diff",
    "Embedder",
    "ExportReport",
    "Fact",
    "FsckReport",
    "GcReport",
    "HashEmbedder",
    "Hit",
    "ImportReport",
    "InvalidInput",
    "MergeConflict",
    "MergeResult",
    "MnemoError",
    "Node",
    "NotFound",
    "Problem",
    "Provenance",
    "ReadRecord",
    "Redacted",
    "Redaction",
    "RefConflict",
    "Repo",
    "StorageFull",
    "TenantCounts",
    "Version",
    "__version__",
    "default_embedder",
    "export_store",
    "import_store",
    "new_id",
    "parse_time",
    "system_clock",
    "with_retry",
]

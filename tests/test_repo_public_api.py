"""Repo's public names keep their signatures and docstrings when its parts move (ADR 63).

``BEFORE_THE_SPLIT`` is every public name of ``Repo`` as it was while all of its
methods were written in ``api/repo.py``: its kind (a method, a class method, a
property) and each parameter as ``inspect.signature`` shows it (``*,`` marks a
keyword-only one). A method moved to a part and handed back to ``Repo`` must
still look the same to ``help()``, ``inspect`` and a caller.
"""

from __future__ import annotations

import hashlib
import inspect
import pydoc
import re

from mnemosyne import Repo


def _shape(name: str) -> tuple[str, list[str]]:
    attr = inspect.getattr_static(Repo, name)
    if isinstance(attr, property):
        return ("property", [])
    signature = inspect.signature(getattr(Repo, name))
    marks = {inspect.Parameter.KEYWORD_ONLY: "*, ", inspect.Parameter.POSITIONAL_ONLY: "/ "}
    params = [
        marks.get(p.kind, "") + re.sub(r" at 0x[0-9a-f]+", "", str(p)) for p in signature.parameters.values()
    ]
    return (type(attr).__name__, [*params, f"-> {signature.return_annotation}"])


BEFORE_THE_SPLIT = {
    "answer_transfer": (
        "function",
        ["self", "step: 'str'", "request: 'bytes'", "*, author: 'str' = 'unknown'", "-> bytes"],
    ),
    "bisect": (
        "function",
        ["self", "predicate: 'Callable[[Commit], bool]'", "good: 'Rev'", "bad: 'Rev'", "-> Commit"],
    ),
    "blame": ("function", ["self", "id: 'str'", "*, at: 'Rev | None' = None", "-> Blame"]),
    "branch": (
        "function",
        [
            "self",
            "name: 'str'",
            "*, at: 'Rev | None' = None",
            "*, orphan: 'bool' = False",
            "*, author: 'str' = 'unknown'",
            "*, start: 'Rev | None' = <object object>",
            "-> Commit | None",
        ],
    ),
    "branch_tips": ("function", ["self", "-> list[tuple[str, Commit]]"]),
    "branches": ("function", ["self", "-> list[str]"]),
    "clone": (
        "classmethod",
        [
            "source: 'Location | Store'",
            "path: 'Location'",
            "*, tenant: 'str | None' = None",
            "*, all_tenants: 'bool' = False",
            "*, clock: 'Clock' = <function system_clock>",
            "*, author: 'str' = 'unknown'",
            "*, token: 'str | None' = None",
            "*, token_file: 'Location | None' = None",
            "*, bucket: 'BucketOptions | None' = None",
            "-> Repo",
        ],
    ),
    "close": ("function", ["self", "-> None"]),
    "commit": (
        "function",
        [
            "self",
            "put: 'Iterable[Node]' = ()",
            "delete: 'Iterable[str]' = ()",
            "*, message: 'str' = ''",
            "*, author: 'str' = 'unknown'",
            "*, branch: 'str | None' = None",
            "*, parent: 'Rev | None' = None",
            "*, meta: 'dict[str, Any] | None' = None",
            "*, allow_empty: 'bool' = False",
            "*, on_claim_conflict: 'ClaimPolicy' = 'refuse'",
            "-> CommitResult",
        ],
    ),
    "config": ("function", ["self", "key: 'str'", "value: 'str | None' = None", "-> str"]),
    "context": (
        "function",
        [
            "self",
            "query: 'str'",
            "budget_tokens: 'int' = 1000",
            "*, k: 'int' = 50",
            "*, at: 'Rev | None' = None",
            "*, as_of: 'TimeLike | None' = None",
            "*, prefix: 'str | None' = None",
            "*, valid_at: 'TimeLike | None' = None",
            "*, run_id: 'str | None' = None",
            "*, allowed_for: 'str | None' = None",
            "*, max_sensitivity: 'str | None' = None",
            "*, verified_within: 'timedelta | None' = None",
            "*, progress: 'Callable[[int, int], None] | None' = None",
            "-> Context",
        ],
    ),
    "contradictions": (
        "function",
        [
            "self",
            "*, at: 'Rev | None' = None",
            "*, ref: 'Rev | None' = <object object>",
            "*, recorded: 'bool' = False",
            "-> list[Contradiction]",
        ],
    ),
    "delete_branch": (
        "function",
        ["self", "name: 'str'", "*, author: 'str' = 'unknown'", "-> Commit | None"],
    ),
    "diff": (
        "function",
        ["self", "a: 'Rev | None'", "b: 'Rev'", "*, as_of: 'TimeLike | None' = None", "-> Diff"],
    ),
    "drop_tenant": ("function", ["self", "name: 'str'", "-> int"]),
    "dropped": ("property", []),
    "embedder": ("function", ["self", "-> Embedder | None"]),
    "erasures": ("function", ["self", "-> int"]),
    "facts": (
        "function",
        [
            "self",
            "subject: 'str'",
            "predicate: 'str | None' = None",
            "*, valid_at: 'TimeLike | None' = None",
            "*, as_of: 'TimeLike | None' = None",
            "*, at: 'Rev | None' = None",
            "*, verified_within: 'timedelta | None' = None",
            "-> list[Fact]",
        ],
    ),
    "fetch": (
        "function",
        [
            "self",
            "remote: 'str' = 'origin'",
            "*, store: 'Store | None' = None",
            "*, all_tenants: 'bool' = False",
            "*, author: 'str' = 'unknown'",
            "*, token: 'str | None' = None",
            "*, token_file: 'Location | None' = None",
            "-> SyncReport",
        ],
    ),
    "forget": (
        "function",
        [
            "self",
            "id: 'str | Iterable[str]'",
            "reason: 'str'",
            "*, author: 'str' = 'unknown'",
            "*, version: 'str | None' = None",
            "-> ForgetReport",
        ],
    ),
    "forget_expired": (
        "function",
        ["self", "reason: 'str' = 'expired'", "*, author: 'str' = 'unknown'", "-> ForgetReport"],
    ),
    "freshness": ("function", ["self", "branch: 'str'", "-> Freshness"]),
    "fsck": ("function", ["self", "*, repair: 'bool' = False", "-> FsckReport"]),
    "gc": (
        "function",
        [
            "self",
            "grace: 'timedelta' = datetime.timedelta(days=14)",
            "compact: 'bool' = False",
            "expire_reflog: 'timedelta | None' = None",
            "-> GcReport",
        ],
    ),
    "get": (
        "function",
        [
            "self",
            "id: 'str'",
            "*, at: 'Rev | None' = None",
            "*, as_of: 'TimeLike | None' = None",
            "*, include_expired: 'bool' = False",
            "-> Node | None",
        ],
    ),
    "head": ("property", []),
    "histories": (
        "function",
        [
            "self",
            "ids: 'Iterable[str]'",
            "*, at: 'Rev | None' = None",
            "*, as_of: 'TimeLike | None' = None",
            "*, limit: 'int | None' = None",
            "*, include_expired: 'bool' = False",
            "-> dict[str, History]",
        ],
    ),
    "history": (
        "function",
        [
            "self",
            "id: 'str'",
            "*, at: 'Rev | None' = None",
            "*, ref: 'Rev | None' = <object object>",
            "*, limit: 'int | None' = None",
            "-> list[Version]",
        ],
    ),
    "ids": (
        "function",
        [
            "self",
            "*, at: 'Rev | None' = None",
            "*, as_of: 'TimeLike | None' = None",
            "*, prefix: 'str | None' = None",
            "-> Ids",
        ],
    ),
    "in_memory": (
        "classmethod",
        [
            "*, clock: 'Clock' = <function system_clock>",
            "*, embedder: 'Embedder | str | None' = None",
            "-> Repo",
        ],
    ),
    "init": (
        "classmethod",
        [
            "path: 'Location'",
            "*, clock: 'Clock' = <function system_clock>",
            "*, map_size: 'int' = 68719476736",
            "*, max_map_size: 'int' = 17592186044416",
            "*, sync: 'bool' = True",
            "*, embedder: 'Embedder | str | None' = None",
            "*, index_cache: 'str | os.PathLike[str] | None' = None",
            "-> Repo",
        ],
    ),
    "is_ancestor": ("function", ["self", "ancestor: 'Rev'", "descendant: 'Rev'", "-> bool"]),
    "kv": ("property", []),
    "log": (
        "function",
        [
            "self",
            "*, at: 'Rev | None' = None",
            "*, node: 'str | None' = None",
            "*, limit: 'int | None' = None",
            "*, as_of: 'TimeLike | None' = None",
            "*, ref: 'Rev | None' = <object object>",
            "-> Iterator[Commit]",
        ],
    ),
    "merge": (
        "function",
        [
            "self",
            "source: 'Rev'",
            "*, into: 'str | None' = None",
            "*, resolutions: 'Mapping[str, Resolution] | None' = None",
            "*, strategy: 'MergeStrategy | None' = None",
            "*, message: 'str | None' = None",
            "*, author: 'str' = 'unknown'",
            "*, allow_unrelated_histories: 'bool' = False",
            "-> MergeResult",
        ],
    ),
    "nodes": (
        "function",
        [
            "self",
            "*, at: 'Rev | None' = None",
            "*, as_of: 'TimeLike | None' = None",
            "*, prefix: 'str | None' = None",
            "*, include_expired: 'bool' = False",
            "*, allowed_for: 'str | None' = None",
            "*, max_sensitivity: 'str | None' = None",
            "*, verified_within: 'timedelta | None' = None",
            "*, after: 'str | None' = None",
            "-> Iterator[Node]",
        ],
    ),
    "now": ("function", ["self", "-> datetime"]),
    "open": (
        "classmethod",
        [
            "path: 'Location | Store'",
            "*, tenant: 'str' = 'default'",
            "*, create: 'bool' = False",
            "*, readonly: \"bool | Literal['auto']\" = False",
            "*, clock: 'Clock' = <function system_clock>",
            "*, map_size: 'int' = 68719476736",
            "*, max_map_size: 'int' = 17592186044416",
            "*, sync: 'bool' = True",
            "*, embedder: 'Embedder | str | None' = None",
            "*, index_cache: 'str | os.PathLike[str] | None' = None",
            "-> Repo",
        ],
    ),
    "path": ("property", []),
    "pending_recall": ("function", ["self", "-> PendingRecall"]),
    "pull": (
        "function",
        [
            "self",
            "remote: 'str' = 'origin'",
            "branch: 'str | None' = None",
            "*, store: 'Store | None' = None",
            "*, resolutions: 'Mapping[str, Resolution] | None' = None",
            "*, strategy: 'MergeStrategy | None' = None",
            "*, message: 'str | None' = None",
            "*, author: 'str' = 'unknown'",
            "*, allow_unrelated_histories: 'bool' = False",
            "*, token: 'str | None' = None",
            "*, token_file: 'Location | None' = None",
            "-> PullReport",
        ],
    ),
    "push": (
        "function",
        [
            "self",
            "remote: 'str' = 'origin'",
            "branch: 'str | None' = None",
            "*, force: 'bool' = False",
            "*, store: 'Store | None' = None",
            "*, all_tenants: 'bool' = False",
            "*, author: 'str' = 'unknown'",
            "*, token: 'str | None' = None",
            "*, token_file: 'Location | None' = None",
            "-> SyncReport",
        ],
    ),
    "readonly": ("property", []),
    "reads": ("function", ["self", "run_id: 'str'", "-> list[ReadRecord]"]),
    "redactions": ("function", ["self", "hashes: 'Iterable[str]'", "-> dict[str, Redaction]"]),
    "reindex": ("function", ["self", "-> int"]),
    "reindex_recall": (
        "function",
        [
            "self",
            "*, vectors: 'bool' = False",
            "*, progress: 'Callable[[int, int], None] | None' = None",
            "-> int",
        ],
    ),
    "remote_branches": ("function", ["self", "remote: 'str | None' = None", "-> list[tuple[str, Commit]]"]),
    "reset": (
        "function",
        ["self", "branch: 'str'", "to: 'Rev'", "*, author: 'str' = 'unknown'", "-> Commit"],
    ),
    "resolve": (
        "function",
        ["self", "rev: 'Rev' = 'HEAD'", "*, as_of: 'TimeLike | None' = None", "-> Commit"],
    ),
    "revert": (
        "function",
        [
            "self",
            "commit: 'Rev'",
            "*, author: 'str' = 'unknown'",
            "*, message: 'str | None' = None",
            "-> CommitResult",
        ],
    ),
    "search": (
        "function",
        [
            "self",
            "query: 'str'",
            "*, k: 'int' = 10",
            "*, at: 'Rev | None' = None",
            "*, as_of: 'TimeLike | None' = None",
            "*, prefix: 'str | None' = None",
            "*, valid_at: 'TimeLike | None' = None",
            "*, kind: 'str | None' = None",
            "*, meta: 'dict[str, Any] | None' = None",
            "*, mode: 'SearchMode' = 'hybrid'",
            "*, run_id: 'str | None' = None",
            "*, allowed_for: 'str | None' = None",
            "*, max_sensitivity: 'str | None' = None",
            "*, verified_within: 'timedelta | None' = None",
            "*, progress: 'Callable[[int, int], None] | None' = None",
            "-> list[Hit]",
        ],
    ),
    "switch": ("function", ["self", "name: 'str'", "-> None"]),
    "tenant": ("property", []),
    "tenants": ("function", ["self", "-> list[str]"]),
    "thread": ("function", ["self", "thread_id: 'str'", "-> Thread"]),
    "thread_branch": ("function", ["self", "thread_id: 'str'", "-> str"]),
    "threads": ("function", ["self", "-> list[Thread]"]),
    "timeline": (
        "function",
        [
            "self",
            "subject: 'str'",
            "predicate: 'str'",
            "*, as_of: 'TimeLike | None' = None",
            "*, at: 'Rev | None' = None",
            "-> list[Fact]",
        ],
    ),
    "timeline_history": (
        "function",
        [
            "self",
            "subject: 'str'",
            "predicate: 'str'",
            "*, as_of: 'TimeLike | None' = None",
            "*, at: 'Rev | None' = None",
            "*, limit: 'int | None' = None",
            "-> list[TimelineChange]",
        ],
    ),
    "tip": ("function", ["self", "branch: 'str'", "-> str | None"]),
    "use_embedder": ("function", ["self", "embedder: 'Embedder | str | None'", "-> None"]),
    "verify": (
        "function",
        [
            "self",
            "*ids: 'str'",
            "*, by: 'str | None' = None",
            "*, note: 'str | None' = None",
            "*, branch: 'str | None' = None",
            "-> Commit",
        ],
    ),
}

MOVED_DOCSTRINGS = {
    # Digests of the text as it stands; "open" since listing minilm-sentences among its embedder names.
    "answer_transfer": "0d44eef786e8dc45",
    "clone": "bccb02283942d8b1",  # since a bucket (s3://BUCKET/PREFIX) may be cloned
    "fetch": "6f6966bc8d0b7ac7",
    "in_memory": "949cfe5d06ce701a",
    "init": "0b7635cf07f17afb",
    "open": "741f043d8d0ca14e",
    "pull": "b8744329d2615585",
    "push": "d02ce8dbedc32f08",
    "remote_branches": "43fd0a1752b81f7f",
    # The branch group, moved onto BranchService (its texts checked equal to Repo's before).
    "branches": "390213cde5685714",
    "tip": "c167bd575189d4f4",
    "freshness": "319286c6f6b67a96",
    "branch_tips": "ddfd58a524a80662",
    "thread_branch": "ac183bb4767a5b8f",
    "thread": "5b8ab38a2530a30c",
    "threads": "44778e994c4a778c",
    "branch": "aec2191d21ac2713",
    "delete_branch": "a9d1fb5c9079e892",
    "switch": "8665184bf5c84da4",
    "reset": "d59bceb994adcbd9",
    "merge": "efd06fa7c222eead",
    "is_ancestor": "eeee0a718e4a7950",
    "bisect": "1816fa4924fd2b84",
    # Recall, erasure and maintenance, moved onto RecallService, ErasureService and MaintenanceService.
    "search": "4d454b6c3f8af21a",  # its ranking described anew (ADR 81)
    "context": "ed3eca6f18c35ea6",
    "reads": "314a74148bfe92e0",
    "forget": "748594d1e180b18c",
    "forget_expired": "d9dce4f4fb513ca9",
    "redactions": "bde560ce3767280f",
    "erasures": "576867b8924ee4bb",
    "fsck": "4a8250a2383f9adf",
    "reindex": "b096f5921d450853",
    # Snapshot reads onto HistoryService; claims and valid time onto ClaimsService.
    "get": "eee3f7fd2cc92792",
    "ids": "a040b6349e00da6d",
    "histories": "aea38a0e7928b652",
    "blame": "9fb580b73b033ad1",
    "diff": "a27d4599b2871ca5",
    "facts": "154f862f815784dd",
    "timeline": "136c0aba1a8bc8a1",
    "timeline_history": "be6eb4a087ad09b0",
}
"""The first 16 hex digits of the SHA-256 of ``inspect.getdoc`` of each moved method, before the split."""


def test_every_public_name_of_repo_keeps_its_kind_and_signature() -> None:
    now = {name: _shape(name) for name in dir(Repo) if not name.startswith("_")}
    assert now == BEFORE_THE_SPLIT


def test_the_moved_methods_keep_their_docstrings() -> None:
    for name, digest in MOVED_DOCSTRINGS.items():
        doc = inspect.getdoc(getattr(Repo, name)) or ""
        assert hashlib.sha256(doc.encode()).hexdigest()[:16] == digest, name


def test_help_shows_the_moved_methods_as_repos_own() -> None:
    text = pydoc.render_doc(Repo, renderer=pydoc.plaintext)
    for name in MOVED_DOCSTRINGS:
        assert re.search(rf"^ \|  {name}\(", text, re.M), name
    first_line = (inspect.getdoc(Repo.push) or "").splitlines()[0]
    assert first_line in text


def test_a_moved_method_called_on_the_class_takes_the_repo() -> None:
    with Repo.in_memory() as repo:
        assert Repo.remote_branches(repo) == repo.remote_branches() == []

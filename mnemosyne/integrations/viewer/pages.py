"""What each page shows, gathered from the public API into plain values for its template.

No decisions about memory are made here: statuses, blame, diffs, timelines and
contradictions are the library's answers; this module only asks for them
(bounded, so a page stays fast on a large store) and arranges them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from mnemosyne import (
    Blame,
    Claim,
    Commit,
    Contradiction,
    Fact,
    NotFound,
    Repo,
    TimelineChange,
    Version,
    parse_time,
)

from . import charts, diffs

MAX_CHANGES = 400
"""Changes shown on a commit page; the rest are counted (a bulk import may change 100,000 ids)."""
MAX_VERSIONS = 200
"""Versions a memory page lists (the newest); the rest are counted."""
MAX_EPOCHS = 200
"""Rows a bitemporal chart draws: the latest commits that changed the timeline."""


@dataclass(frozen=True)
class Where:
    """The tenant and branch a page reads, and the query to keep in its links."""

    repo: Repo
    tenant: str
    branch: str
    head: str
    keep: dict[str, str]


# -- the log ------------------------------------------------------------------------------


@dataclass
class LogRow:
    """One commit of the log with the graph beside it and the branches whose tip it is."""

    commit: Commit
    graph: charts.GraphRow
    tips: list[str]


@dataclass
class LogPage:
    """One page of the log, and where the next one starts."""

    rows: list[LogRow]
    start: str | None
    skip: int
    next_query: dict[str, Any] | None
    graph_width: int
    row_height: int = charts.ROW_HEIGHT


def log_page(where: Where, start: str | None, skip: int, size: int) -> LogPage:
    """A page of ``size`` commits from ``start`` (default: the branch's tip) after ``skip``.

    The log streams, so a page reads only the commits up to its end. The next
    page starts from the one commit every unread commit descends from, when
    there is one (always, in merge-free history): it costs as little as the
    first. Otherwise (merges in flight) it skips what this page read.
    """
    repo = where.repo
    if start is not None:
        repo.resolve(start)  # an unknown commit is NotFound
    stream = repo.log(at=start or where.branch, limit=skip + size + 1)
    read: set[str] = set()
    parents: set[str] = set()
    page: list[Commit] = []
    more = False
    for n, commit in enumerate(stream):
        if n >= skip + size:
            more = True
            break
        read.add(commit.id)
        parents.update(commit.parents)
        if n >= skip:
            page.append(commit)
    next_query: dict[str, Any] | None = None
    if more:
        frontier = parents - read
        if len(frontier) == 1:
            next_query = {"from": frontier.pop()}
        else:
            next_query = {"from": start, "skip": skip + size}
    tips: dict[str, list[str]] = {}
    for name, tip in repo.branch_tips():
        tips.setdefault(tip.id, []).append(name)
    drawn = charts.graph(page)
    rows = [LogRow(c, g, tips.get(c.id, [])) for c, g in zip(page, drawn, strict=True)]
    width = max((g.width for g in drawn), default=charts.LANE_WIDTH)
    return LogPage(rows, start, skip, next_query, width)


# -- a commit -----------------------------------------------------------------------------


@dataclass
class CommitPage:
    """A commit, its diff against its first parent, and the contradictions it recorded."""

    commit: Commit
    changes: list[diffs.ChangeView]
    counts: dict[str, int]
    hidden: int
    contradictions: list[Contradiction]
    meta: list[tuple[str, str]]


def commit_page(where: Where, rev: str) -> CommitPage:
    """The commit ``rev`` names (a full or short id, or any revision)."""
    repo = where.repo
    commit = repo.resolve(rev)
    diff = repo.diff(commit.parents[0] if commit.parents else None, commit.id)
    marked: list[tuple[Literal["added", "removed", "modified"], Any]] = [
        *(("added", c) for c in diff.added),
        *(("removed", c) for c in diff.removed),
        *(("modified", c) for c in diff.modified),
    ]
    marked.sort(key=lambda pair: pair[1].id)
    shown = [diffs.view(change, mark) for mark, change in marked[:MAX_CHANGES]]
    counts = {"added": len(diff.added), "removed": len(diff.removed), "modified": len(diff.modified)}
    found = repo.contradictions(at=commit.id, recorded=True) if len(commit.parents) > 1 else []
    meta = [(key, diffs.compact(value)) for key, value in sorted((commit.meta or {}).items())]
    return CommitPage(commit, shown, counts, max(len(marked) - MAX_CHANGES, 0), found, meta)


# -- a memory -----------------------------------------------------------------------------


@dataclass
class NodePage:
    """A memory: its current version (if any), blame, and every version in history."""

    id: str
    current: Version | None
    content: str | None
    blame: Blame | None
    versions: list[Version]
    claim: Claim | None
    hidden: int = 0  # 1 when older versions than those shown exist
    meta: list[tuple[str, str]] = field(default_factory=list)
    provenance: list[tuple[str, str]] = field(default_factory=list)


def node_page(where: Where, node_id: str) -> NodePage:
    """The memory ``node_id`` on the branch; NotFound when the branch's history never had it."""
    repo = where.repo
    # One more than are shown: whether older ones exist, without reading them all.
    versions = repo.history(node_id, at=where.branch, limit=MAX_VERSIONS + 1)
    if not versions:
        raise NotFound(f"{node_id} is not in the history of {where.branch}")
    newest = versions[0]
    # The newest version is in the branch's snapshot unless it was deleted or replaced;
    # erased, it is in the snapshot still when nothing ended it.
    in_snapshot = newest.status in ("current", "expired") or (
        newest.status == "redacted" and newest.ended_by is None
    )
    current = newest if in_snapshot else None
    blame = repo.blame(node_id, at=where.branch) if current is not None else None
    node = current.node if current is not None else None
    page = NodePage(
        node_id,
        current,
        diffs.content_text(node) if node is not None else None,
        blame,
        versions[:MAX_VERSIONS],
        node.content if node is not None and isinstance(node.content, Claim) else None,
        int(len(versions) > MAX_VERSIONS),
    )
    if node is not None:
        page.meta = [(k, diffs.compact(v)) for k, v in sorted((node.meta or {}).items())]
        fields = ("agent_step", "observation", "tool_call", "source")
        page.provenance = [
            (name, str(getattr(node.provenance, name)))
            for name in fields
            if getattr(node.provenance, name) is not None
        ]
    return page


# -- a timeline ---------------------------------------------------------------------------


@dataclass
class FactsPage:
    """One (subject, predicate): its chart and its timeline as believed at ``as_of``."""

    subject: str
    predicate: str
    as_of: datetime | None
    as_of_text: str
    chart: charts.Chart
    timeline: list[Fact]
    contradicted: set[str]
    """Ids of the claims in ``timeline`` that are in an open contradiction there."""
    hidden: bool = False
    """Whether older changes than those drawn exist."""


MAX_VALUE = 200
"""Characters of a claim's value the chart's labels and tooltips show (the table shows it all)."""


def _value(fact: Fact) -> str:
    claim = fact.node.content
    text = diffs.compact(claim.value) if isinstance(claim, Claim) else ""
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "\u2026"


def facts_page(where: Where, subject: str, predicate: str, as_of_text: str | None) -> FactsPage:
    """The timeline of (subject, predicate) on the branch, at every commit that changed it.

    The rows are the library's answer (``Repo.timeline_history``): the commits
    of the branch's first-parent history where the claims on the attribute
    changed, a merge or a clone included, each with the timeline from then on.
    As of a time, the table is the newest of those rows on the branch as it
    stood then, and the chart shades that row.
    """
    repo = where.repo
    as_of = parse_time(as_of_text) if as_of_text else None
    changes = repo.timeline_history(subject, predicate, at=where.branch, limit=MAX_EPOCHS + 1)
    if not changes:
        raise NotFound(f"no claims on {subject} {predicate} in {where.branch}")
    hidden = len(changes) > MAX_EPOCHS
    changes = changes[-MAX_EPOCHS:]
    believed: TimelineChange | None = changes[-1]
    row = None
    if as_of is not None:
        try:
            then = repo.timeline_history(subject, predicate, at=where.branch, as_of=as_of, limit=1)
        except NotFound:  # the branch did not exist yet at as_of: nothing was believed
            then = []
        believed = then[0] if then else None
        rows = [change.commit.id for change in changes]
        if believed is not None and believed.commit.id in rows:
            row = rows.index(believed.commit.id)
    chart = charts.bitemporal(changes, _value, row)
    if believed is None:
        return FactsPage(subject, predicate, as_of, as_of_text or "", chart, [], set(), hidden)
    disputed = {node.id for record in believed.contradictions for node in record.claims}
    return FactsPage(subject, predicate, as_of, as_of_text or "", chart, believed.timeline, disputed, hidden)

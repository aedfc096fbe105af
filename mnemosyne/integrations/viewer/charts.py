"""The geometry of the viewer's two pictures: commit-graph lanes and the bitemporal chart.

Plain numbers only (columns, rows, pixel coordinates, CSS class names); the
templates draw them as inline SVG, escaped like everything else. Nothing here
reads the store: the pages hand over commits and timelines they already have.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from mnemosyne import Commit, Fact, TimelineChange

LANE_WIDTH = 14
"""Pixels between two lanes of the commit graph."""
ROW_HEIGHT = 28
"""Pixels per log row: the table's rows are this tall (``viewer.css``), so the row SVGs join."""
LANE_COLOURS = 6
"""Lane colours cycle through ``lane0`` … ``lane5`` in the stylesheet."""


@dataclass(frozen=True)
class Segment:
    """One straight line of an SVG picture, with its stylesheet class."""

    x1: float
    y1: float
    x2: float
    y2: float
    css: str


@dataclass
class GraphRow:
    """The commit graph beside one log row: the commit's dot and the lines through the row."""

    width: int
    x: float
    y: float
    css: str
    merge: bool
    lines: list[Segment] = field(default_factory=list)


def _x(column: int) -> float:
    return LANE_WIDTH / 2 + column * LANE_WIDTH


def _lane_css(column: int) -> str:
    return f"lane{column % LANE_COLOURS}"


def _slot(lanes: list[str | None], wanted: str, avoid: int = -1) -> int:
    """The column of ``wanted`` in ``lanes``; else the first free one (not ``avoid``), else a new one."""
    if wanted in lanes:
        return lanes.index(wanted)
    for i, held in enumerate(lanes):
        if held is None and i != avoid:
            lanes[i] = wanted
            return i
    lanes.append(wanted)
    return len(lanes) - 1


def graph(commits: Sequence[Commit]) -> list[GraphRow]:
    """Lanes for commits listed newest first, as ``git log --graph`` draws them.

    Each lane waits for one commit (the parent of a commit above it). A commit
    takes the lane that waits for it (lanes waiting for it too join it), hands
    that lane to its first parent and opens one for each other parent. Columns
    never shift, so a lane passing a row is a straight vertical line.
    """
    lanes: list[str | None] = []
    rows: list[GraphRow] = []
    mid, bottom = ROW_HEIGHT / 2, float(ROW_HEIGHT)
    for commit in commits:
        before = list(lanes)
        column = _slot(lanes, commit.id)
        row = GraphRow(0, _x(column), mid, _lane_css(column), len(commit.parents) > 1)
        for i, held in enumerate(before):
            if held is None:
                continue
            if held == commit.id:  # this lane (and any other waiting for it) ends in the dot
                row.lines.append(Segment(_x(i), 0, _x(column), mid, _lane_css(i)))
                lanes[i] = None
            else:
                row.lines.append(Segment(_x(i), 0, _x(i), bottom, _lane_css(i)))
        lanes[column] = None
        for n, parent in enumerate(commit.parents):
            if n == 0 and parent not in lanes:
                lanes[column] = parent
                target = column
            else:
                target = _slot(lanes, parent, avoid=column if n else -1)
            row.lines.append(Segment(_x(column), mid, _x(target), bottom, _lane_css(target)))
        while lanes and lanes[-1] is None:
            lanes.pop()
        used = max(len(before), len(lanes), column + 1)
        row.width = used * LANE_WIDTH
        rows.append(row)
    return rows


# -- the bitemporal chart ---------------------------------------------------------------

CHART_WIDTH = 900
CHART_LEFT = 200
"""Room on the left for the row labels: a record time to the second and a short commit id."""
CHART_RIGHT = 24
"""Room on the right for the arrow heads of open-ended bands."""
CHART_TOP = 28
"""Room above for the valid-time labels."""
ROW_PAD = 3
"""Pixels above and below the lanes of a row."""
LANE_HEIGHT = 28
"""Pixels per lane: a row has one lane per claim it must draw side by side (overlapping ones)."""
BAND_COLOURS = 8
LABEL_SIZE = 11
"""The band labels' font size in pixels (``viewer.css``)."""

# Advance widths in em of a bold sans-serif, rounded up from DejaVu Sans Bold (the
# widest usual fallback): a label is measured before it is drawn, never after.
_NARROW = frozenset("'ijl|I.,:;!` ")
_SLIM = frozenset('/fJ-()[]tr_"*')
_WIDE = frozenset("ABCDGHKNOQRUVXY#+=~$")
_WIDEST = frozenset("mwMW@%\u2026")


def _em(char: str) -> float:
    if char in _NARROW:
        return 0.38
    if char in _SLIM:
        return 0.55
    if char in _WIDEST:
        return 1.12
    if char in _WIDE:
        return 0.88
    return 0.74 if char.isascii() else 1.2


def text_width(text: str, size: float = LABEL_SIZE) -> float:
    """A generous estimate of the pixels ``text`` takes as a band label."""
    return size * sum(_em(char) for char in text)


def fit(text: str, room: float) -> str:
    """``text`` if it fits ``room`` pixels, else its longest prefix that fits with "…", else ""."""
    ellipsis = "\u2026"
    budget = room - text_width(ellipsis)
    used = 0.0
    cut = None  # where the prefix that fits with an ellipsis ends
    for n, char in enumerate(text):
        used += LABEL_SIZE * _em(char)
        if cut is None and used > budget:
            cut = n
        if used > room:  # past the room: measure no further, however long the text
            return text[:cut].rstrip() + ellipsis if cut is not None and cut >= 2 else ""
    return text


@dataclass(frozen=True)
class Band:
    """One rectangle of a claim's band: its effective valid interval, believed from one commit on."""

    x: float
    y: float
    width: float
    height: float
    open_ended: bool
    """Holds until further notice: drawn to the axis's end, with an arrow head (``arrow``)."""
    contradicted: bool
    """In a contradiction still open at that commit."""
    title: str
    """What a tooltip says: the claim, its value, its interval, who recorded it."""
    row: int
    """The row (0: the oldest commit drawn) it belongs to."""
    arrow: str = ""
    """The arrow head's polygon points, for an open-ended band."""


@dataclass(frozen=True)
class Label:
    """The text drawn inside a band, fitted to it (the band's title has it whole)."""

    x: float
    y: float
    text: str


@dataclass
class ClaimBand:
    """Every rectangle of one claim, its label and its colour class."""

    id: str
    value: str
    css: str
    rects: list[Band] = field(default_factory=list)
    label: Label | None = None


@dataclass(frozen=True)
class Tick:
    """One axis label at a pixel position."""

    at: float
    label: str
    anchor: str = "middle"
    """Where the label stands against its tick (SVG ``text-anchor``)."""


@dataclass(frozen=True)
class RowTick:
    """The label of one row: the commit it shows, when it was made, linked to it."""

    at: float
    label: str
    commit: str
    title: str


@dataclass
class Chart:
    """Valid time across (x), the branch's commits down (y): one band per claim."""

    width: int
    height: int
    left: int
    top: int
    right: float
    bands: list[ClaimBand]
    valid_ticks: list[Tick]
    record_ticks: list[RowTick]
    as_of: tuple[float, float] | None
    """The top and height of the row in force at the ``as_of`` asked about, if any."""
    contradicted: bool
    """Whether any band is drawn as in a contradiction (the caption explains the mark)."""


def _lanes(facts: Sequence[Fact]) -> tuple[list[int], int]:
    """A lane for each fact so that facts overlapping in valid time sit side by side."""
    ends: list[datetime | None] = []  # per lane, where its last fact ends (None: never)
    lanes: list[int] = []
    for fact in facts:
        free = [i for i, end in enumerate(ends) if end is not None and end <= fact.effective_from]
        lane = free[0] if free else len(ends)
        if not free:
            ends.append(None)
        ends[lane] = fact.effective_to
        lanes.append(lane)
    return lanes, max(len(ends), 1)


def _axis(changes: Sequence[TimelineChange]) -> tuple[datetime, datetime]:
    """The valid-time axis: the data's range, a margin, and room for open ends after it."""
    facts = [fact for change in changes for fact in change.timeline]
    starts = [fact.effective_from for fact in facts]
    ends = [fact.effective_to for fact in facts if fact.effective_to is not None]
    if not starts:
        when = changes[-1].commit.record_time
        return when - timedelta(hours=2), when + timedelta(days=1, hours=2)
    lo, hi = min(starts), max(starts + ends)
    if hi <= lo:
        hi = lo + timedelta(days=1)
    span = hi - lo
    # An open-ended claim runs past the data's last time by a quarter of its
    # span, and an arrow says it goes on. "Now" stays off the axis: claims a week
    # long fill the width however long ago that week was.
    tail = span / 4 if any(fact.effective_to is None for fact in facts) else span / 12
    return lo - span / 12, hi + tail


_STEPS = [
    *(timedelta(milliseconds=n) for n in (1, 2, 5, 10, 20, 50, 100, 200, 500)),
    *(timedelta(seconds=n) for n in (1, 2, 5, 10, 15, 30)),
    *(timedelta(minutes=n) for n in (1, 2, 5, 10, 15, 30)),
    *(timedelta(hours=n) for n in (1, 2, 3, 6, 12)),
    *(timedelta(days=n) for n in (1, 2, 7, 14, 30, 91, 182, 365)),
]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _valid_ticks(first: datetime, last: datetime) -> tuple[list[datetime], Callable[[datetime], str]]:
    """Round times across the axis, at most five steps apart, and how to label them.

    Whole days fall on midnight UTC, so a tick labelled with a date stands where
    that date begins; the label's precision is the step's, so no two read alike.
    """
    span = last - first
    step = next((s for s in _STEPS if span / s <= 5), None)
    if step is None:
        step = timedelta(days=365 * math.ceil(span / timedelta(days=365 * 5)))
    tick = _EPOCH + step * math.ceil((first - _EPOCH) / step)
    ticks = []
    while tick <= last:
        ticks.append(tick)
        tick += step
    if step >= timedelta(days=1):
        return ticks, lambda when: when.strftime("%Y-%m-%d")
    if step >= timedelta(minutes=1):
        return ticks, lambda when: when.strftime("%Y-%m-%d %H:%M")
    if step >= timedelta(seconds=1):
        return ticks, lambda when: when.strftime("%m-%d %H:%M:%S")
    return ticks, lambda when: when.strftime("%H:%M:%S.%f")[:-3]


def _row_label(commit: Commit) -> str:
    return f"{commit.record_time.strftime('%Y-%m-%d %H:%M:%S')}  {commit.id[:7]}"


def bitemporal(
    changes: Sequence[TimelineChange],
    describe: Callable[[Fact], str],
    as_of_row: int | None = None,
) -> Chart:
    """The chart of a timeline's history: a row per commit that changed it, a band per claim.

    Args:
        changes: the commits of the branch where the timeline changed, oldest
            first, each with the timeline from then on (``Repo.timeline_history``).
        describe: a claim's value as short text.
        as_of_row: the index of a row to shade (the one in force at an ``as_of``).
    """
    first, last = _axis(changes)
    right = CHART_WIDTH - CHART_RIGHT
    plot = right - CHART_LEFT

    def x(when: datetime) -> float:
        return round(CHART_LEFT + plot * ((when - first) / (last - first)), 2)

    order: dict[str, ClaimBand] = {}
    record_ticks: list[RowTick] = []
    contradicted_any = False
    marker = None
    top = CHART_TOP
    for row, change in enumerate(changes):
        lanes, count = _lanes(change.timeline)
        height = 2 * ROW_PAD + count * LANE_HEIGHT
        disputed = {node.id for record in change.contradictions for node in record.claims}
        for fact, lane in zip(change.timeline, lanes, strict=True):
            band = order.get(fact.id)
            if band is None:
                band = ClaimBand(fact.id, "", f"band{len(order) % BAND_COLOURS}")
                order[fact.id] = band
            band.value = describe(fact)
            start = x(fact.effective_from)
            end = x(fact.effective_to) if fact.effective_to is not None else right
            y = top + ROW_PAD + lane * LANE_HEIGHT + 1
            h = LANE_HEIGHT - 2
            contradicted = fact.id in disputed
            contradicted_any = contradicted_any or contradicted
            until = _when(fact.effective_to) if fact.effective_to is not None else "open"
            others = sorted(disputed - {fact.id}) if contradicted else []
            title = (
                f"{fact.id} = {band.value}\n{_when(fact.effective_from)} to {until}\n"
                f"recorded by {fact.commit.id[:7]} at {_when(fact.commit.record_time)}"
                + (f"\ncontradicts {', '.join(others)}" if others else "")
            )
            arrow = ""
            if fact.effective_to is None:
                arrow = f"{right},{y} {right + 10},{y + h / 2} {right},{y + h}"
            band.rects.append(
                Band(
                    start,
                    y,
                    max(end - start, 2.0),
                    h,
                    fact.effective_to is None,
                    contradicted,
                    title,
                    row,
                    arrow,
                )
            )
        record_ticks.append(
            RowTick(
                top + height / 2,
                _row_label(change.commit),
                change.commit.id,
                f"{change.commit.id}\n{change.commit.author}: {change.commit.message}",
            )
        )
        if row == as_of_row:
            marker = (float(top), float(height))
        top += height
    for band in order.values():
        last_rect = band.rects[-1]
        text = fit(band.value, last_rect.width - 10)
        if text:
            band.label = Label(last_rect.x + 5, last_rect.y + last_rect.height / 2 + 4, text)
    ticks, label = _valid_ticks(first, last)
    valid_ticks = []
    for when in ticks:
        text = label(when)
        # A label that would pass the picture's right edge ends at its tick instead.
        anchor = "end" if x(when) + text_width(text) / 2 > CHART_WIDTH - 2 else "middle"
        valid_ticks.append(Tick(x(when), text, anchor))
    return Chart(
        CHART_WIDTH,
        top + 8,
        CHART_LEFT,
        CHART_TOP,
        right,
        list(order.values()),
        valid_ticks,
        record_ticks,
        marker,
        contradicted_any,
    )


def _when(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M:%S")

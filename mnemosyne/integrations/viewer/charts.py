"""The geometry of the viewer's two pictures: commit-graph lanes and the bitemporal chart.

Plain numbers only (columns, rows, pixel coordinates, CSS class names); the
templates draw them as inline SVG, escaped like everything else. Nothing here
reads the store: the pages hand over commits and timelines they already have.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from mnemosyne import Commit, Fact

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

CHART_WIDTH = 760
CHART_LEFT = 150
"""Room on the left for the record-time labels."""
CHART_TOP = 28
"""Room above for the valid-time labels."""
BAND_COLOURS = 8


@dataclass(frozen=True)
class Band:
    """One rectangle of a claim's band: its effective valid interval, believed over a record interval."""

    x: float
    y: float
    width: float
    height: float
    open_ended: bool


@dataclass
class ClaimBand:
    """Every rectangle of one claim, its label and its colour class."""

    id: str
    value: str
    css: str
    rects: list[Band] = field(default_factory=list)


@dataclass(frozen=True)
class Tick:
    """One axis label at a pixel position."""

    at: float
    label: str


@dataclass
class Chart:
    """Valid time across (x), record time down (y): one band per claim."""

    width: int
    height: int
    left: int
    top: int
    bands: list[ClaimBand]
    valid_ticks: list[Tick]
    record_ticks: list[Tick]
    as_of_y: float | None
    """The top of the epoch row in force at the ``as_of`` asked about, if any."""
    row_height: int


Epoch = tuple[datetime, list[Fact]]
"""A record time, and the timeline as the branch stood from then on."""


def _span(lo: datetime, hi: datetime) -> tuple[datetime, datetime]:
    if hi <= lo:
        hi = lo + timedelta(days=1)
    pad = (hi - lo) / 12
    return lo - pad, hi + pad


def bitemporal(
    epochs: Sequence[Epoch], values: dict[str, str], as_of: datetime | None, row_height: int = 34
) -> Chart:
    """The chart of a timeline's history: each epoch a row band, each claim its effective intervals.

    Args:
        epochs: record times at which the timeline changed, oldest first, each with
            the timeline as believed from then until the next.
        values: how to label each claim id (its value, as compact text).
        as_of: a record time to mark with a line, if any.
        row_height: pixels per epoch.
    """
    starts = [f.effective_from for _, facts in epochs for f in facts]
    ends = [f.effective_to for _, facts in epochs for f in facts if f.effective_to is not None]
    # An open-ended claim holds until further notice: the axis runs at least to the
    # last record time, so such a band reaches "now" as the store last knew it.
    times = [*starts, *ends, epochs[-1][0]] if starts else [epoch for epoch, _ in epochs]
    lo, hi = _span(min(times), max(times))
    plot = CHART_WIDTH - CHART_LEFT - 10

    def x(when: datetime) -> float:
        return CHART_LEFT + plot * ((when - lo) / (hi - lo))

    order: dict[str, ClaimBand] = {}
    for row, (_, facts) in enumerate(epochs):
        top = CHART_TOP + row * row_height
        for fact in facts:
            band = order.get(fact.id)
            if band is None:
                band = ClaimBand(fact.id, values.get(fact.id, ""), f"band{len(order) % BAND_COLOURS}")
                order[fact.id] = band
            start = x(fact.effective_from)
            end = x(fact.effective_to) if fact.effective_to is not None else CHART_LEFT + plot
            width = max(end - start, 2.0)
            band.rects.append(Band(start, top + 3, width, row_height - 6, fact.effective_to is None))
    label = _day if hi - lo > timedelta(days=4) else _moment
    valid_ticks = [Tick(x(lo + (hi - lo) * (i / 4)), label(lo + (hi - lo) * (i / 4))) for i in range(1, 4)]
    record_ticks = [
        Tick(CHART_TOP + row * row_height + row_height / 2, _moment(when))
        for row, (when, _) in enumerate(epochs)
    ]
    marker = None
    if as_of is not None:
        passed = [row for row, (when, _) in enumerate(epochs) if when <= as_of]
        if passed:
            marker = float(CHART_TOP + passed[-1] * row_height)
    height = CHART_TOP + len(epochs) * row_height + 8
    return Chart(
        CHART_WIDTH,
        height,
        CHART_LEFT,
        CHART_TOP,
        list(order.values()),
        valid_ticks,
        record_ticks,
        marker,
        row_height,
    )


def _day(when: datetime) -> str:
    return when.strftime("%Y-%m-%d")


def _moment(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M")

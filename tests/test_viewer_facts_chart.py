"""The viewer's facts chart (issue 22): rows follow the branch's history, readable at real record times.

The store is written with the real clock, so its commits fall within a second or
two: a clone of a store with claims over a week, then a merge in the clone that
records a contradiction (Lisbon on one branch, Porto on the other, same
valid_from). In-process tests (Starlette's TestClient) read the SVG; browser tests
drive Debian's Chromium through Playwright against a real ``mnemo ui`` and
measure what is drawn.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support.components import unavailable
from support.viewer_server import chromium, serve

from mnemosyne import Claim, Node, Repo, TimelineChange

try:  # the 'ui' extra
    from starlette.testclient import TestClient

    from mnemosyne.integrations.viewer import build_app
except ImportError as missing:
    unavailable(f"the 'ui' extra is not installed ({missing})", module_level=True)

PORT = 8766
BASE = f"http://127.0.0.1:{PORT}"
CITY = "/facts/mira/city"


def claim(event: str, value: str, valid_from: datetime, valid_to: datetime | None = None) -> Node:
    content = Claim("mira", "city", value, valid_from=valid_from, valid_to=valid_to)
    return Node(id=f"claims/mira/city/{event}", kind="claim", content=content)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A clone (real clock) of a store with a week of claims; a merge in it records a contradiction."""
    tmp = tmp_path_factory.mktemp("facts-chart")
    with Repo.init(tmp / "origin.mnemo") as origin:
        # A week, a quarter of a year ago: far from "now", as a real store's claims are.
        day = origin.now().replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=90)
        origin.commit([claim("a", "Berlin", day)], message="Berlin")
        origin.commit([claim("b", "Hamburg", day + timedelta(days=2))], message="Hamburg")
        stay = claim(
            "c", "Munich, a long name for a short stay", day + timedelta(days=4), day + timedelta(days=5)
        )
        origin.commit([stay], message="Munich")
        cloned_from = origin.resolve("main").id
    with Repo.clone(tmp / "origin.mnemo", tmp / "clone.mnemo") as clone:
        cloned_at = clone.now()
        clone.branch("side")
        clone.commit([claim("d", "Lisbon", day + timedelta(days=7))], message="Lisbon")
        clone.commit([claim("e", "Porto", day + timedelta(days=7))], message="Porto", branch="side")
        merged = clone.merge("side")
        assert merged.commit is not None and merged.contradictions
        changes = clone.timeline_history("mira", "city")
    return {
        "path": tmp / "clone.mnemo",
        "origin": tmp / "origin.mnemo",
        "cloned_from": cloned_from,
        "cloned_at": cloned_at,
        "merge": merged.commit.id,
        "changes": changes,
    }


@pytest.fixture(scope="module")
def client(store: dict[str, Any]) -> Iterator[TestClient]:
    with Repo.open(store["path"], readonly=True) as repo:
        yield TestClient(build_app(repo, port=PORT), base_url=BASE)


def bands(html: str) -> dict[str, str]:
    """Each claim's SVG group, by claim id."""
    return dict(re.findall(r'<g class="band band\d" data-claim="([^"]+)">(.*?)</g>', html, re.S))


def rects_by_row(html: str) -> dict[int, list[str]]:
    """The claim of each rectangle drawn, by row (0: the oldest commit drawn)."""
    out: dict[int, list[str]] = {}
    for claim_id, group in bands(html).items():
        for row in re.findall(r'<rect [^>]*data-row="(\d+)"', group):
            out.setdefault(int(row), []).append(claim_id)
    return out


def in_force(change: TimelineChange) -> list[str]:
    return sorted(fact.id for fact in change.timeline)


# -- the page, in process -----------------------------------------------------------------


def test_a_clone_draws_every_claim_at_the_commits_of_the_branch_history(client, store):
    html = client.get(CITY).text
    changes: list[TimelineChange] = store["changes"]
    assert set(bands(html)) == {f"claims/mira/city/{e}" for e in "abcde"}
    drawn = rects_by_row(html)
    assert len(drawn) == len(changes) == 5  # the source's three commits, Lisbon, the merge
    for row, change in enumerate(changes):
        assert sorted(drawn[row]) == in_force(change)  # one band per claim in force there
    commits = re.findall(r'<a class="row" href="/commit/([0-9a-f]{64})"', html)
    assert commits == [change.commit.id for change in changes]
    assert commits[2] == store["cloned_from"]


def test_a_fresh_clone_draws_the_source_commits(store, tmp_path):
    with Repo.clone(store["origin"], tmp_path / "fresh.mnemo") as fresh:
        html = TestClient(build_app(fresh, port=PORT), base_url=BASE).get(CITY).text
        changes = fresh.timeline_history("mira", "city")
    assert [c.commit.id for c in changes] == [c.commit.id for c in store["changes"][:3]]
    assert set(bands(html)) == {f"claims/mira/city/{e}" for e in "abc"}  # none, when drawn by record time
    drawn = rects_by_row(html)
    assert [sorted(drawn[row]) for row in range(3)] == [in_force(change) for change in changes]
    ticks = re.findall(r'<text class="tick valid"[^>]*>([^<]+)</text>', html)
    assert len(set(ticks)) == len(ticks)


def test_row_labels_differ_even_when_commits_share_a_minute(client, store):
    html = client.get(CITY).text
    labels = re.findall(r'<a class="row"[^>]*><title>[^<]*</title><text [^>]*>([^<]+)</text>', html)
    assert len(labels) == 5 and len(set(labels)) == 5
    for label, change in zip(labels, store["changes"], strict=True):
        assert change.commit.id[:7] in label and change.commit.record_time.strftime("%H:%M:%S") in label
    ticks = re.findall(r'<text class="tick valid"[^>]*>([^<]+)</text>', html)
    assert len(ticks) >= 3 and len(set(ticks)) == len(ticks)


def test_the_merged_contradiction_draws_both_claims_marked(client, store):
    html = client.get(CITY).text
    groups = bands(html)
    merge_row = len(store["changes"]) - 1
    for event in "de":
        marked = re.findall(
            r'<rect [^>]*data-row="(\d+)" class="open contradicted"', groups[f"claims/mira/city/{event}"]
        )
        assert marked == [str(merge_row)], event
    assert "contradicted" not in groups["claims/mira/city/a"]
    table = html.split('<table class="facts">', 1)[1]
    assert table.count('class="status contradicted"') == 2
    assert "a red outline" in html  # the caption explains the mark


def test_open_ends_stop_near_the_data_with_an_arrow_and_labels_fit_their_bands(client, store):
    html = client.get(CITY).text
    groups = bands(html)
    # Berlin held two days: a band of a fair width, not a sliver beside "now".
    first = re.search(
        r'<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)"[^>]*data-row="1"', groups["claims/mira/city/a"]
    )
    assert first is not None and float(first.group(2)) > 80
    open_ended = sum(fact.effective_to is None for change in store["changes"] for fact in change.timeline)
    assert html.count('<polygon class="arrow"') == html.count('class="open') == open_ended == 5
    for claim_id, group in groups.items():
        label = re.search(r'<text class="band-label" x="([\d.]+)" y="[\d.]+">([^<]*)</text>', group)
        last = re.findall(r'<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)"', group)[-1]
        if claim_id.endswith("/c"):  # the long value is cut short; its title keeps it whole
            assert label is not None and label.group(2).endswith("\u2026")
            assert "Munich, a long name for a short stay</title>" in group
        assert label is None or float(label.group(1)) + 5 <= float(last[0]) + float(last[1])


def test_as_of_before_the_clone_believed_nothing_and_the_box_looks_empty(client, store):
    before = (store["cloned_at"] - timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    then = client.get(CITY, params={"as_of": before}).text
    assert "No claims were believed then" in then and 'class="as-of-row"' not in then
    assert re.findall(r'data-claim="([^"]+)"', then)  # the chart still shows the history
    now = client.get(CITY).text
    (box,) = re.findall(r'<input type="text" name="as_of"[^>]*>', now)
    assert 'value=""' in box
    placeholder = re.search(r'placeholder="([^"]*)"', box)
    assert placeholder is not None and placeholder.group(1).startswith("empty")


def test_as_of_marks_the_row_the_branch_stood_at(tmp_path: Path):
    with Repo.init(tmp_path / "s.mnemo") as repo:
        day = repo.now().replace(hour=0, minute=0, second=0, microsecond=0)
        repo.commit([claim("a", "Berlin", day)], message="a")
        middle = repo.now()
        repo.commit([claim("b", "Lisbon", day + timedelta(days=1))], message="b")
        web = TestClient(build_app(repo, port=PORT), base_url=BASE)
        html = web.get(CITY, params={"as_of": middle.isoformat()}).text
    shaded = re.search(r'<rect class="as-of-row" x="0" y="([\d.]+)" width="\d+" height="([\d.]+)"', html)
    assert shaded is not None
    top, height = float(shaded.group(1)), float(shaded.group(2))
    rows = {
        (row, top <= float(y) < top + height)
        for y, row in re.findall(r'<rect x="[\d.]+" y="([\d.]+)" [^>]*data-row="(\d+)"', html)
    }
    assert rows == {("0", True), ("1", False)}  # the row of the first commit, where the branch stood
    assert html.split('<table class="facts">', 1)[1].count("<tr>") == 2  # the header and Berlin


def test_claims_kept_side_by_side_share_a_row_in_lanes_unmarked(tmp_path: Path):
    with Repo.init(tmp_path / "s.mnemo") as repo:
        day = repo.now().replace(hour=0, minute=0, second=0, microsecond=0)
        repo.commit([claim("a", "Berlin", day)], message="a")
        repo.commit([claim("b", "Bern", day)], message="b", on_claim_conflict="keep")
        html = TestClient(build_app(repo, port=PORT), base_url=BASE).get(CITY).text
    last = re.findall(
        r'<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)"[^>]*data-row="1"', html
    )
    assert len(last) == 2
    (x1, y1, w1, h1), (x2, y2, w2, _) = sorted(
        (float(a), float(b), float(c), float(d)) for a, b, c, d in last
    )
    assert (x1, w1) == (x2, w2) and y1 + h1 <= y2  # one interval, two lanes, not on top of each other
    assert "contradicted" not in html  # kept on purpose: no merge recorded a contradiction


# -- in a real browser --------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from chromium()


@pytest.fixture(scope="module")
def served(store: dict[str, Any]) -> Iterator[str]:
    process, url = serve(store["path"])
    try:
        assert url.startswith("http://127.0.0.1:"), url
        yield url.rstrip("/")
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)


@pytest.fixture
def page(browser: Any, served: str) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    opened = context.new_page()
    yield opened
    context.close()


MEASURE = """() => {
    const svg = document.querySelector("svg.bitemporal");
    const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    const all = (selector) => Array.from(svg.querySelectorAll(selector));
    return {
        svg: box(svg),
        rects: all("g.band rect").map((e) => ({
            row: Number(e.dataset.row), claim: e.parentNode.dataset.claim, box: box(e),
            contradicted: e.classList.contains("contradicted"), stroke: getComputedStyle(e).stroke,
        })),
        labels: all("text.band-label").map((e) => ({claim: e.parentNode.dataset.claim, box: box(e)})),
        rows: all("a.row text").map((e) => ({text: e.textContent, box: box(e)})),
        ticks: all("text.tick.valid").map((e) => ({text: e.textContent, box: box(e)})),
        texts: all("text").map(box),
    };
}"""


def overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def inside(inner: list[float], outer: list[float]) -> bool:
    slack = 0.5
    return (
        inner[0] >= outer[0] - slack
        and inner[1] >= outer[1] - slack
        and inner[2] <= outer[2] + slack
        and inner[3] <= outer[3] + slack
    )


def apart(boxes: list[list[float]]) -> bool:
    return all(not overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


@pytest.mark.slow
def test_browser_chart_of_a_clone_and_a_merged_contradiction(page, served, store):
    page.goto(served + CITY)
    drawn = page.evaluate(MEASURE)
    changes: list[TimelineChange] = store["changes"]
    # One band per claim in force in every row, the merge's two contradicting claims included.
    for row, change in enumerate(changes):
        rects = [r for r in drawn["rects"] if r["row"] == row]
        assert sorted(r["claim"] for r in rects) == in_force(change), row
        assert apart([r["box"] for r in rects]), row
        assert all(r["box"][2] - r["box"][0] >= 2 and r["box"][3] - r["box"][1] > 10 for r in rects)
    marked = [r for r in drawn["rects"] if r["contradicted"]]
    assert sorted(r["claim"] for r in marked) == ["claims/mira/city/d", "claims/mira/city/e"]
    assert {r["row"] for r in marked} == {len(changes) - 1}
    assert {r["stroke"] for r in marked} == {"rgb(209, 26, 42)"}
    # No label is wider than its band, and no two labels overlap.
    assert len(drawn["labels"]) == 5
    for label in drawn["labels"]:
        own = [r["box"] for r in drawn["rects"] if r["claim"] == label["claim"]]
        assert any(inside(label["box"], rect) for rect in own), label
    for group in ("labels", "rows", "ticks"):
        assert apart([item["box"] for item in drawn[group]]), group
        texts = [item.get("text") for item in drawn[group]]
        assert group == "labels" or len(set(texts)) == len(texts), texts
    assert len(drawn["rows"]) == len(changes) and len(drawn["ticks"]) >= 3
    assert all(inside(box, drawn["svg"]) for box in drawn["texts"])
    # The empty as-of box looks empty: no value, a grey italic hint.
    box = page.get_by_label("as of (record time)")
    assert box.input_value() == ""
    text, hint, style = box.evaluate(
        """e => [getComputedStyle(e).color, getComputedStyle(e, '::placeholder').color,
                 getComputedStyle(e, '::placeholder').fontStyle]"""
    )
    assert style == "italic" and hint != text
    # A row's label opens its commit: the merge, with the contradiction it recorded.
    page.locator(f'a.row[data-commit="{store["merge"]}"]').click()
    assert page.locator("h1").inner_text().startswith("Commit ")
    assert "Contradictions this merge recorded" in page.locator("main").inner_text()

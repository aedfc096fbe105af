"""mnemo ui: the read-only browser viewer.

In-process tests (Starlette's TestClient) check routing, escaping, the guards
(403, 405), 404s and pagination; browser tests drive Debian's Chromium through
Playwright against a real ``mnemo ui`` process on the demo's store, and check
what a person sees. Without a browser they skip, or fail when env CI is set.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import signal
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.components import need_module, unavailable
from support.viewer_server import serve as _serve

from mnemosyne import Claim, Node, Provenance, Repo, Store

try:  # the 'ui' extra
    from starlette.testclient import TestClient

    from mnemosyne.integrations.viewer import build_app
except ImportError as missing:
    unavailable(f"the 'ui' extra is not installed ({missing})", module_level=True)

ROOT = Path(__file__).resolve().parent.parent
PORT = 8765
BASE = f"http://127.0.0.1:{PORT}"
PASSPORT_NUMBER = "C01X00T47"  # the demo's erased bytes: on no page, ever
HOSTILE = "<script>window.pwned = 1</script><b>bold</b>"
TRIP = "users/mira/notes/trip"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


class Clock:
    def __init__(self, now: str) -> None:
        self.now = at(now)

    def __call__(self) -> datetime:
        return self.now


def _demo() -> Any:
    spec = importlib.util.spec_from_file_location("mnemo_demo", ROOT / "examples" / "demo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _passport_claims(path: Path) -> dict[str, str]:
    """The valid-time story of docs/time-and-claims.md, tenant acme: e1, e2 replacing it, late letter e0."""
    clock = Clock("2026-06-01T09:30")

    def claim(event: str, value: str, valid_from: str, source: str) -> Node:
        return Node(
            id=f"acme/mira/passport_deadline/{event}",
            kind="claim",
            content=Claim("mira", "passport_deadline", value, valid_from=at(valid_from)),
            provenance=Provenance(observation=event, source=source),
        )

    with Repo.open(path, tenant="acme", create=True, clock=clock) as repo:
        c1 = repo.commit(
            put=[claim("e1", "2026-07-15", "2026-06-01T09:00", "chat")], message="e1", author="agent-7"
        )
        clock.now = at("2026-06-03T10:30")
        c2 = repo.commit(
            put=[claim("e2", "2026-06-30", "2026-06-03T10:00", "consulate email")],
            message="e2: the consulate moved it to June 30",
            author="agent-7",
        )
        clock.now = at("2026-06-05T12:00")
        repo.commit(
            put=[claim("e0", "2026-08-01", "2026-05-30T08:00", "letter")],
            message="e0: a letter dated May 30, delivered late",
            author="agent-7",
        )
        return {"c1": c1.id, "c2": c2.id}


def _lab(path: Path) -> dict[str, str]:
    """Tenant lab: hostile text everywhere, a JSON edit, a merge that records a contradiction."""
    clock = Clock("2026-07-01T10:00")
    with Repo.open(path, tenant="lab", create=True, clock=clock) as repo:

        def tick() -> None:
            clock.now = clock.now.replace(minute=clock.now.minute + 1)

        repo.commit(
            put=[
                Node(id="x/html", content=HOSTILE, meta={"note": "<img src=x onerror=alert(1)>"}),
                Node(id="x/prefs", content={"lang": "de", "tz": "Europe/Berlin"}),
                Node(id="x/odd id?#%", content="odd"),
                Node(id="x/secret", content="s3cr3t-<bytes>"),
            ],
            message="<i>hostile</i> message",
            author="<b>mallory</b>",
        )
        tick()
        prefs = repo.commit(
            put=[Node(id="x/prefs", content={"lang": "fr", "tz": "Europe/Berlin", "units": "metric"})],
            message="prefs",
            author="agent",
        )
        tick()
        repo.branch("side", author="agent")
        city = "claims/mira/city"
        berlin = Claim("mira", "city", "Berlin", at("2026-06-01"))
        lisbon = Claim("mira", "city", "Lisbon", at("2026-06-02"))
        repo.commit(
            put=[Node(id=f"{city}/a", kind="claim", content=berlin)],
            message="she lives in Berlin",
            author="agent",
        )
        tick()
        repo.commit(
            put=[Node(id=f"{city}/b", kind="claim", content=lisbon)],
            message="she lives in Lisbon",
            author="agent",
            branch="side",
        )
        tick()
        merged = repo.merge("side", author="agent")
        assert merged.commit is not None and merged.contradictions
        tick()
        repo.forget("x/secret", "<script>asked</script> to forget", author="<u>dpo</u>")
        return {"prefs": prefs.id, "merge": merged.commit.id}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The demo's store (`make demo`), plus tenants acme (docs/time-and-claims.md's claims) and lab."""
    path = tmp_path_factory.mktemp("viewer") / "demo.mnemo"
    demo = _demo()
    demo.STORE = path
    demo.remember(demo.SimulatedClock())
    with Store.open(path) as opened:
        opened.config("embedder", "none")
    ids = {"path": path, **_passport_claims(path), **_lab(path)}
    with Repo.open(path) as repo:
        ids["log"] = [c.id for c in repo.log()]
    return ids


@pytest.fixture(scope="module")
def client(store: dict[str, Any]) -> Iterator[TestClient]:
    with Repo.open(store["path"], readonly=True) as repo:
        yield TestClient(build_app(repo, port=PORT), base_url=BASE)


def text_of(html: str) -> str:
    """Roughly what a person reads: tags dropped, entities left as they are."""
    return re.sub(r"<[^>]+>", " ", html)


# -- the library answers the viewer needs ---------------------------------------------------


def test_diff_from_nothing_lists_a_root_commits_snapshot_erased_versions_by_hash(store):
    with Repo.open(store["path"], readonly=True) as repo:
        root = store["log"][-1]
        diff = repo.diff(None, root)
    assert diff.a is None and diff.b == root and not diff.removed and not diff.modified
    by_id = {c.id: c for c in diff.added}
    assert by_id["users/mira/profile/name"].new.content == "Mira Okafor"
    erased = by_id["users/mira/passport_number"]
    assert erased.new is None and erased.new_hash is not None and erased.redacted


def test_contradictions_recorded_by_a_merge_stay_listed_after_they_are_resolved(store):
    with Repo.open(store["path"], tenant="lab", clock=Clock("2026-08-01T00:00")) as repo:
        (found,) = repo.contradictions(at=store["merge"], recorded=True)
        assert (found.subject, found.predicate) == ("mira", "city")
        assert repo.contradictions(at=store["prefs"], recorded=True) == []
        tip = repo.resolve("main")
        fixed = repo.commit(
            put=[
                Node(
                    id="claims/mira/city/a",
                    kind="claim",
                    content=Claim("mira", "city", "Berlin", at("2026-06-01"), valid_to=at("2026-06-02")),
                )
            ],
            message="moved on June 2",
            author="agent",
        )
        assert repo.contradictions(at=fixed.id) == []
        assert repo.contradictions(at=store["merge"], recorded=True) == [found]
        repo.reset("main", tip, author="agent")  # leave the tenant as the other tests expect it


# -- pages --------------------------------------------------------------------------------


def test_log_shows_each_commit_with_message_author_time_and_short_id(client):
    page = client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    html = page.text
    for message in ("Mira introduces herself", "Calendar lookup finds a trip", "Mira asks to stop assuming"):
        assert message in html
    assert "Speculative run" not in html  # on branch what-if only
    assert "agent-7" in html and "2026-06-01 09:00:00Z" in html
    assert html.count('class="dot') == 6
    assert 'rel="next"' not in html
    assert "what-if" in html  # the branch switcher


def test_log_of_another_branch_and_tenant(client, store):
    what_if = client.get("/?branch=what-if").text
    assert "Speculative run: what if she pays for urgent renewal?" in what_if
    acme = client.get("/?tenant=acme").text
    assert "e2: the consulate moved it to June 30" in acme and "Mira introduces herself" not in acme
    assert 'href="/commit/' + store["c2"] + '?tenant=acme"' in acme  # links keep the tenant
    assert client.get("/?branch=nope").status_code == 404
    assert client.get("/?tenant=nope").status_code == 404


def test_log_draws_merge_lanes(client, store):
    html = client.get("/?tenant=lab").text
    assert html.count('class="dot') == 6
    assert html.count("merge\"") == 1  # the one merge commit's dot
    graph = re.findall(r'<line x1="([\d.]+)" y1="[\d.]+" x2="([\d.]+)"', html)
    assert any(x1 != x2 for x1, x2 in graph)  # a lane opens and joins: a second column
    assert 'class="ref' in html and ">side<" in html


def test_log_pages_stream_and_the_next_page_costs_what_the_first_does(monkeypatch):
    repo = Repo.in_memory(clock=Clock("2026-01-01T00:00"))
    ids = []
    for n in range(130):
        ids.append(repo.commit(put=[Node(id=f"n/{n % 7}", content=str(n))], message=f"m{n}", author="a").id)
    asked: list[int | None] = []
    real_log = Repo.log

    def spy(self: Repo, **kwargs: Any) -> Any:
        asked.append(kwargs.get("limit"))
        return real_log(self, **kwargs)

    monkeypatch.setattr(Repo, "log", spy)
    web = TestClient(build_app(repo, port=PORT, page_size=50), base_url=BASE)
    seen: list[str] = []
    url: str | None = "/"
    while url is not None:
        html = web.get(url).text
        seen += re.findall(r'<td class="id"><a href="/commit/([0-9a-f]{64})', html)
        found = re.search(r'<link rel="next" href="([^"]+)"', html)
        url = found.group(1).replace("&amp;", "&") if found else None
    assert seen == ids[::-1]
    assert asked == [51, 51, 51]  # every page reads one more than it shows, never the whole history


def test_log_pages_through_merges_in_flight(store):
    with Repo.open(store["path"], tenant="lab", readonly=True) as repo:
        web = TestClient(build_app(repo, port=PORT, page_size=2), base_url=BASE)
        seen: list[str] = []
        nexts: list[str] = []
        url: str | None = "/"
        while url is not None:
            html = web.get(url).text
            seen += re.findall(r'<td class="id"><a href="/commit/([0-9a-f]{64})', html)
            found = re.search(r'<link rel="next" href="([^"]+)"', html)
            url = found.group(1).replace("&amp;", "&") if found else None
            nexts += [url] if url else []
        assert seen == [c.id for c in repo.log()]
        assert any("skip=" in u for u in nexts) and any("skip=" not in u for u in nexts), nexts


def test_commit_page_diffs_text_line_by_line(client, store):
    visa = store["log"][2]  # main, newest first: forget, rm language, the visa check, ...
    page = client.get(f"/commit/{visa}")
    assert page.status_code == 200
    html = page.text
    assert "Visa check answers one line of the trip note" in html
    assert re.search(r'<tr class="del">.*?Visa: unknown</pre>', html)
    assert re.search(r'<tr class="add">.*?Visa: not needed for stays up to 90 days</pre>', html)
    assert re.search(r'<tr class="ctx">.*?Flight: TP 1234</pre>', html)
    assert f'href="/commit/{store["log"][3]}"' in html  # its parent
    assert client.get(f"/commit/{visa[:8]}").status_code == 200
    assert client.get("/commit/" + "0" * 64).status_code == 404


def test_commit_page_of_a_root_commit_shows_what_it_added_but_never_erased_bytes(client, store):
    html = client.get(f"/commit/{store['log'][-1]}").text
    assert "Mira Okafor" in html and "users/mira/passport_number" in html
    assert "This version was erased" in html
    assert PASSPORT_NUMBER not in html


def test_commit_page_diffs_json_key_by_key_and_lists_recorded_contradictions(client, store):
    html = client.get(f"/commit/{store['prefs']}?tenant=lab").text
    assert re.search(r'<tr class="del">.*?<th class="key" scope="row">lang</th>.*?<pre>de</pre>', html)
    assert re.search(r'<tr class="add">.*?<th class="key" scope="row">lang</th>.*?<pre>fr</pre>', html)
    assert re.search(r'<tr class="add">.*?scope="row">units</th>.*?<pre>metric</pre>', html)
    assert "tz" not in text_of(html).split("prefs", 2)[-1]  # unchanged keys are not listed
    merge = client.get(f"/commit/{store['merge']}?tenant=lab").text
    assert "Contradictions this merge recorded" in merge
    assert "claims/mira/city/a" in merge and "claims/mira/city/b" in merge and "Lisbon" in merge


def test_memory_page_shows_current_version_blame_and_history(client):
    html = client.get(f"/node/{TRIP}").text
    assert "Visa: not needed for stays up to 90 days" in html
    assert "visa.check#7" in html  # provenance
    blame = html.split('<table class="blame">', 1)[1].split("</table>", 1)[0]
    assert blame.count("<tr>") == 4  # the header and one row per line
    assert "2026-06-03 10:00:00Z" in blame and "2026-06-01 09:05:00Z" in blame
    history = html.split('<table class="history">', 1)[1]
    assert history.count('class="version current"') == 1 and history.count('class="version superseded"') == 1


def test_memory_page_of_erased_and_deleted_ids_and_encoded_ids(client):
    erased = client.get("/node/users/mira/passport_number")
    assert erased.status_code == 200
    assert "erased by" in erased.text and "dpo" in erased.text and "Mira&#39;s erasure request" in erased.text
    assert PASSPORT_NUMBER not in erased.text
    deleted = client.get("/node/users/mira/prefs/language")
    assert deleted.status_code == 200
    assert 'class="version deleted"' in deleted.text and "pt-PT" in deleted.text
    assert client.get("/node/users%2Fmira%2Fnotes%2Ftrip").text == client.get(f"/node/{TRIP}").text
    odd = client.get("/node/x/odd%20id%3F%23%25?tenant=lab")
    assert odd.status_code == 200 and "x/odd id?#%" in odd.text
    assert client.get("/node/users/nobody").status_code == 404
    assert client.get("/node/users/../etc").status_code == 404


def test_everything_from_the_store_is_escaped(client, store):
    pages = [
        client.get("/?tenant=lab").text,
        client.get("/node/x/html?tenant=lab").text,
        client.get("/node/x/secret?tenant=lab").text,
        client.get(f"/commit/{store['log'][0]}?tenant=lab").text,
        client.get(f"/commit/{client.get('/?tenant=lab').text.split('/commit/')[-1][:64]}?tenant=lab").text,
        client.get("/search?q=bold&tenant=lab").text,
    ]
    everything = "".join(pages)
    assert "<script" not in everything and "<b>" not in everything and "<img" not in everything
    assert "<i>" not in everything and "<u>" not in everything
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;&lt;b&gt;bold&lt;/b&gt;" in pages[1]
    assert "&lt;img src=x onerror=alert(1)&gt;" in pages[1]
    assert "&lt;b&gt;mallory&lt;/b&gt;" in pages[0] and "&lt;i&gt;hostile&lt;/i&gt; message" in pages[0]
    assert "&lt;u&gt;dpo&lt;/u&gt;" in pages[2] and "&lt;script&gt;asked&lt;/script&gt; to forget" in pages[2]
    assert "s3cr3t" not in everything


def test_facts_page_draws_one_band_per_claim_and_reads_as_of(client, store):
    html = client.get("/facts/mira/passport_deadline?tenant=acme").text
    bands = re.findall(r'<g class="band band\d" data-claim="([^"]+)">', html)
    assert sorted(bands) == [f"acme/mira/passport_deadline/{e}" for e in ("e0", "e1", "e2")]
    e1 = html.split('data-claim="acme/mira/passport_deadline/e1">', 1)[1].split("</g>", 1)[0]
    widths = [float(w) for w in re.findall(r'<rect x="[\d.]+" y="[\d.]+" width="([\d.]+)"', e1)]
    assert len(widths) == 3 and widths[0] > widths[1] == widths[2]  # open until e2 cut it short
    table = html.split('<table class="facts">', 1)[1]
    assert table.count("<tr>") == 4
    then = client.get("/facts/mira/passport_deadline?tenant=acme&as_of=2026-06-02").text
    assert then.split('<table class="facts">', 1)[1].count("<tr>") == 2 and "2026-07-15" in then
    assert 'class="as-of-row"' in then
    assert client.get("/facts/mira/passport_deadline?tenant=acme&as_of=soon").status_code == 400
    assert client.get("/facts/mira/nothing?tenant=acme").status_code == 404


def test_a_predicate_with_a_slash_has_a_timeline_page_its_links_reach(tmp_path):
    with Repo.init(tmp_path / "s.mnemo") as repo:
        repo.commit(
            [
                Node(
                    id="c/1",
                    kind="claim",
                    content=Claim("mira", "addr/city", "Lisbon", valid_from=datetime(2026, 6, 1, tzinfo=UTC)),
                )
            ],
            message="she moved",
        )
        web = TestClient(build_app(repo, port=PORT), base_url=BASE)
        page = web.get("/node/c/1").text
        (link,) = re.findall(r'href="(/facts/[^"]+)"', page)
        assert link == "/facts/mira/addr%2Fcity"
        timeline = web.get(link)
        assert timeline.status_code == 200 and "Lisbon" in timeline.text


def test_search_lists_hits_with_scores_and_ranks(client):
    html = client.get("/search?q=passport+deadline").text
    assert 'href="/node/users/mira/passport_deadline"' in html
    assert re.search(r"score \d\.\d{4}", html) and "words #1" in html
    assert client.get("/search").status_code == 200


# -- the guards ---------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "BREW"])
def test_only_get_and_head_are_allowed(client, method):
    answer = client.request(method, "/")
    assert answer.status_code == 405
    assert answer.headers["allow"] == "GET, HEAD"


def test_head_and_security_headers(client):
    head = client.head("/node/users/mira/notes/trip")
    assert head.status_code == 200 and head.content == b""
    got = client.get("/static/viewer.css")
    assert got.headers["content-type"].startswith("text/css")
    csp = got.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "style-src 'self'" in csp
    assert client.get("/nope").headers["content-security-policy"] == csp


@pytest.mark.parametrize("host", ["evil.example", f"evil.example:{PORT}", "127.0.0.1:1", "localhost", ""])
def test_requests_for_another_host_are_refused(client, host):
    answer = client.get("/", headers={"host": host})
    assert answer.status_code == 403
    assert "Mira" not in answer.text


def test_localhost_with_the_port_is_served(client):
    assert client.get("/", headers={"host": f"localhost:{PORT}"}).status_code == 200


# -- the command --------------------------------------------------------------------------


@pytest.mark.slow
def test_mnemo_ui_serves_on_loopback_and_ctrl_c_ends_it_quietly(store):
    process, url = _serve(store["path"])
    try:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", url), url
        with urllib.request.urlopen(url, timeout=10) as answer:
            assert "Mira introduces herself" in answer.read().decode()
        port = int(url.rsplit(":", 1)[1].strip("/"))
        busy, _ = _serve(store["path"], "--port", str(port))
        assert busy.wait(timeout=30) == 2
        assert busy.stderr is not None
        error = busy.stderr.read().strip().splitlines()
        assert len(error) == 1 and error[0].startswith("error: ") and "in use" in error[0]
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    assert process.stderr is not None and process.stderr.read() == ""


# -- in a real browser --------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium for the module; missing, the browser tests skip (fail under CI)."""
    playwright_api: Any = need_module("playwright.sync_api")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    manager = playwright_api.sync_playwright().start()
    try:
        if chromium is None:
            raise RuntimeError("no chromium on PATH")
        launched = manager.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
    except Exception as error:
        manager.stop()
        unavailable(f"Chromium cannot start for the browser tests: {error}")
    try:
        yield launched
    finally:
        launched.close()
        manager.stop()


@pytest.fixture(scope="module")
def served(store: dict[str, Any]) -> Iterator[str]:
    process, url = _serve(store["path"])
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
    requests: list[str] = []
    opened.on("request", lambda request: requests.append(request.url))
    yield opened
    context.close()
    # Nothing was fetched from another origin.
    assert requests and all(url.startswith(served + "/") for url in requests), requests


@pytest.mark.slow
def test_browser_log_to_commit_to_memory_blame_and_history(page, served):
    page.goto(served + "/")
    assert page.locator("h1").inner_text() == "Log of main"
    assert page.locator("table.log tbody tr").count() == 6
    # The stylesheet applied under the Content-Security-Policy: the header is dark.
    header = page.locator("header.top")
    assert header.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(29, 35, 48)"
    page.get_by_role("link", name="Visa check answers one line of the trip note").click()
    assert page.locator("h1").inner_text().startswith("Commit ")
    assert page.locator("tr.del").first.inner_text().strip().endswith("Visa: unknown")
    added = page.locator("tr.add").first.inner_text().strip()
    assert added.endswith("Visa: not needed for stays up to 90 days")
    page.get_by_role("link", name=TRIP).click()
    assert page.locator("h1").inner_text() == TRIP
    blame = page.locator("table.blame tbody tr")
    assert blame.count() == 3
    assert "Visa: not needed" in blame.nth(2).inner_text() and "2026-06-03" in blame.nth(2).inner_text()
    assert "Flight: TP 1234" in blame.nth(1).inner_text() and "2026-06-01" in blame.nth(1).inner_text()
    statuses = page.locator("table.history td .status").all_inner_texts()
    assert statuses == ["current", "superseded"]


@pytest.mark.slow
def test_browser_erased_memory_shows_who_when_why_never_its_bytes(page, served):
    page.goto(served + "/node/users/mira/passport_number")
    body = page.locator("body").inner_text()
    assert "redacted" in body and "erased by dpo at 2026-06-04 08:30:00Z" in body
    assert "Mira's erasure request" in body
    assert PASSPORT_NUMBER not in page.content()


@pytest.mark.slow
def test_browser_passport_deadline_chart(page, served):
    page.goto(served + "/")
    page.get_by_role("link", name="acme", exact=True).click()
    page.get_by_role("link", name="e2: the consulate moved it to June 30").click()
    page.get_by_role("link", name="acme/mira/passport_deadline/e2").click()
    page.get_by_role("link", name="mira passport_deadline").click()
    assert page.locator("h1").inner_text() == "mira passport_deadline"
    chart = page.locator("svg.bitemporal")
    assert chart.is_visible()
    assert chart.locator("g.band").count() == 3
    labels = [label.text_content() for label in chart.locator("text.band-label").all()]
    assert sorted(labels) == ["2026-06-30", "2026-07-15", "2026-08-01"]
    e1 = chart.locator('g[data-claim="acme/mira/passport_deadline/e1"] rect')
    first, later = e1.nth(0).bounding_box(), e1.nth(1).bounding_box()
    assert first["width"] > later["width"] > 0  # e2 cut e1 short once recorded
    assert first["y"] < later["y"]  # record time runs down
    e0 = chart.locator('g[data-claim="acme/mira/passport_deadline/e0"] rect').first.bounding_box()
    assert e0["x"] < later["x"] and e0["y"] > later["y"]  # valid earlier, recorded last
    page.get_by_label("as of (record time)").fill("2026-06-02T00:00:00Z")
    page.get_by_role("button", name="Show").click()
    rows = page.locator("table.facts tbody tr")
    assert rows.count() == 1 and "2026-07-15" in rows.first.inner_text()
    assert chart.locator("rect.as-of-row").count() == 1


@pytest.mark.slow
def test_browser_memory_holding_html_shows_it_as_text(page, served):
    page.goto(served + "/node/x/html?tenant=lab")
    assert page.locator("pre.content").inner_text() == HOSTILE
    assert page.evaluate("() => window.pwned") is None
    assert page.locator("main b").count() == 0
    assert "<img src=x onerror=alert(1)>" in page.locator("dl.fields").inner_text()


def test_pages_show_invisible_characters_escaped(tmp_path: Path) -> None:
    # A right-to-left override or a zero-width space in what a page shows would make it pass
    # for something else: shown as an escape, the joiner (which shapes emoji) as it is.
    with Repo.init(tmp_path / "s") as repo:
        repo.commit([Node(id="users/mira/lang", content="de \u202e nuel, a\u200bb, 👩\u200d💻")], message="m")
        web = TestClient(build_app(repo, port=PORT), base_url=BASE)
        page = web.get("/node/users/mira/lang")
        assert page.status_code == 200, page.text
        assert "\u202e" not in page.text and "\u200b" not in page.text
        assert "de \\u202e nuel" in page.text and "a\\u200bb" in page.text and "👩\u200d💻" in page.text

"""A server you can watch: ``/metrics`` scraped from a real ``mnemo serve`` and parsed by
Prometheus' own parser, the JSON access log, and ``/v1/ready`` apart from ``/v1/health``
while the store's PostgreSQL server is stopped and started again.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator

import pytest
from support.components import need_module, unavailable
from support.pg_server import PgServer, ServerUnavailable
from support.served import Served, tokens

from mnemosyne import Store

need_module("uvicorn")
need_module("httpx")
parser = need_module("prometheus_client.parser")

pytestmark = pytest.mark.slow  # server processes

TENANT = "acme-private-name"
COMMITS = "POST /v1/tenants/{tenant}/commits"


def hashed(tenant: str) -> str:
    return hashlib.sha256(tenant.encode()).hexdigest()[:12]


@pytest.fixture(scope="module")
def watched(tmp_path_factory) -> Iterator[Served]:
    path = tmp_path_factory.mktemp("watched") / "store"
    with Store.init(path) as store:
        store.create_tenant(TENANT)
    made = tokens(path, ("writer", TENANT, "write"))
    server = Served(path, "--metrics", "--access-log-format", "json")
    server.tokens = made  # type: ignore[attr-defined]
    yield server
    assert server.stop() == 0, server.stderr
    assert "Traceback" not in server.stderr


def scrape(served: Served) -> tuple[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    """The page, and every sample in it by name and labels, as Prometheus' parser reads it."""
    with served.client() as http:
        page = http.get("/metrics")
    assert page.status_code == 200, page.text
    assert page.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = {}
    for family in parser.text_string_to_metric_families(page.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return page.text, samples


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_counters_move_with_requests_and_a_commit_and_name_no_tenant_nor_token(watched) -> None:
    token = watched.tokens["writer"]
    tenant = hashed(TENANT)
    _, before = scrape(watched)
    with watched.client(token) as http:
        made = http.post(f"/v1/tenants/{TENANT}/commits", json={"put": [{"id": "a/b", "content": "x"}]})
        assert made.status_code == 201, made.text
        for _ in range(3):
            assert http.get(f"/v1/tenants/{TENANT}/nodes/a%2Fb").status_code == 200
        assert http.post(f"/v1/tenants/{TENANT}/search", json={"query": "x"}).status_code == 200
        stranger = http.get("/v1/tenants/someone-else/nodes/a%2Fb")
        assert stranger.status_code == 404
    page, after = scrape(watched)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    requests = "mnemo_http_requests_total"
    assert moved(requests, route=COMMITS, status="201", tenant=tenant) == 1
    assert moved(requests, route="GET /v1/tenants/{tenant}/nodes/{id}", status="200", tenant=tenant) == 3
    # A tenant the token does not reach is counted without one: a path names no series.
    assert moved(requests, route="GET /v1/tenants/{tenant}/nodes/{id}", status="404", tenant="") == 1
    assert moved("mnemo_commits_total", tenant=tenant) == 1
    latency = "mnemo_http_request_duration_seconds_count"
    assert moved(latency, route="GET /v1/tenants/{tenant}/nodes/{id}") == 4
    assert moved("mnemo_search_duration_seconds_count") == 1
    assert value(after, "mnemo_http_request_duration_seconds_bucket", route=COMMITS, le="+Inf") >= 1
    assert value(after, "mnemo_recall_pending_versions", tenant=tenant) == 0  # the search took it in
    assert value(after, "mnemo_open_connections") >= 1
    assert TENANT not in page and "someone-else" not in page and token not in page
    assert watched.stderr.count(TENANT) >= 1  # ... though the access log names the path asked


def test_the_recall_backlog_is_what_the_next_search_takes_in(watched) -> None:
    tenant = hashed(TENANT)
    with watched.client(watched.tokens["writer"]) as http:
        put = [{"id": f"n/{i}", "content": f"note {i}"} for i in range(3)]
        assert http.post(f"/v1/tenants/{TENANT}/commits", json={"put": put}).status_code == 201
        assert value(scrape(watched)[1], "mnemo_recall_pending_versions", tenant=tenant) == 3
        assert http.post(f"/v1/tenants/{TENANT}/search", json={"query": "note"}).status_code == 200
    assert value(scrape(watched)[1], "mnemo_recall_pending_versions", tenant=tenant) == 0


def test_the_json_access_log_has_one_object_a_line_and_no_token(watched) -> None:
    with watched.client(watched.tokens["writer"]) as http:
        http.get(f"/v1/tenants/{TENANT}/nodes/a%2Fb")
    deadline = time.monotonic() + 5
    while not any('nodes/{id}"' in line for line in watched.lines):
        assert time.monotonic() < deadline, watched.stderr
        time.sleep(0.02)
    entries = [json.loads(line) for line in watched.lines if line.startswith("{")]
    read = next(entry for entry in entries if entry["route"] == "GET /v1/tenants/{tenant}/nodes/{id}")
    assert read["tenant"] == hashed(TENANT) and read["status"] in (200, 404) and read["ms"] >= 0
    assert read["method"] == "GET" and read["target"].startswith(f"/v1/tenants/{TENANT}/nodes/")
    assert watched.tokens["writer"] not in watched.stderr


def test_ready_follows_the_store_while_health_stays_up_and_metrics_are_off_by_default() -> None:
    try:
        pg = PgServer().start()
    except (ServerUnavailable, OSError) as exc:
        unavailable(f"no PostgreSQL server for the tests: {exc}")
    try:
        url = pg.url()
        Store.init(url).close()
        served = Served(url)  # type: ignore[arg-type]  # a store URL, as --repo takes it
        try:
            with served.client() as http:
                assert http.get("/v1/ready").json() == {"ready": True}
                described = http.get("/v1/openapi.json").json()["paths"]["/v1/ready"]["get"]
                assert set(described["responses"]) == {"200", "503"} and described["security"] == []
                assert http.get("/metrics").status_code == 404  # not asked for: not served
                pg.halt()
                down = http.get("/v1/ready")
                assert down.status_code == 503 and down.json()["ready"] is False, down.text
                assert "postgresql" not in down.text  # no store location to whoever asks
                assert http.get("/v1/health").json()["status"] == "ok"
                pg.resume()
                deadline = time.monotonic() + 10
                while http.get("/v1/ready").status_code != 200:
                    assert time.monotonic() < deadline, "the server never became ready again"
                    time.sleep(0.1)
        finally:
            assert served.stop() == 0, served.stderr
        assert "Traceback" not in served.stderr
    finally:
        pg.stop()

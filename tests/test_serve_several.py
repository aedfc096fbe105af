"""Several ``mnemo serve`` processes over one PostgreSQL store, as behind a load balancer.

Three real servers on free loopback ports, one real PostgreSQL server, and clients
spread over them: a commit acknowledged by one is read (get, log, branch tag,
search, lexical and semantic) by the next request to any other; ``If-Match`` and
plain commits racing through different servers keep exactly one winner and lose
nothing; an erasure or a revocation through one holds on every other from its next
request; a server SIGKILLed under load loses nothing it acknowledged, and the
others go on (docs/serving.md, "Several servers over one store"; ADR 71).
"""

from __future__ import annotations

import itertools
import json
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote

import pytest
from support.components import need_module
from support.served import Served

from mnemosyne import Node, Repo, Store

httpx = need_module("httpx")
need_module("uvicorn")

pytestmark = pytest.mark.slow  # three server processes and a PostgreSQL server

SERVERS = 3


def path(*parts: str) -> str:
    return "/v1/tenants/default/" + "/".join(quote(part, safe="") for part in parts)


class Fleet:
    """Three servers over one store, and the tokens made in it before they started."""

    def __init__(self, url: str, tokens: dict[str, str]) -> None:
        self.url = url
        self.tokens = tokens
        self.servers: list[Served] = []
        self.stopped: list[Served] = []

    def start(self, count: int) -> list[Served]:
        """Start ``count`` servers at once (each takes about a second to come up)."""
        with ThreadPoolExecutor(count) as pool:
            started = list(pool.map(lambda _: self.serve(), range(count)))
        return started

    def serve(self) -> Served:
        # The hash embedder: semantic search, and each server's in-memory vectors, are exercised too.
        return Served(self.url, env={"MNEMO_EMBEDDER": "hash"})  # type: ignore[arg-type]  # a store URL

    def client(self, index: int, name: str = "writer") -> httpx.Client:
        return self.servers[index].client(self.tokens[name])


@pytest.fixture(scope="module")
def fleet(pg_server) -> Iterator[Fleet]:
    url = pg_server.url()
    with Store.init(url) as store:
        made = {
            name: store.create_token("default", role, name=name).token  # type: ignore[arg-type]
            for name, role in (("writer", "write"), ("reader", "read"), ("admin", "admin"))
        }
    Repo.open(url).close()  # the default tenant's first handle: its recall layout stamped once
    servers = Fleet(url, made)
    servers.servers = servers.start(SERVERS)
    try:
        yield servers
    finally:
        with ThreadPoolExecutor(SERVERS) as pool:  # a second each: at once
            codes = list(pool.map(lambda served: served.stop(), servers.servers))
        assert codes == [0] * len(codes), [served.stderr for served in servers.servers]
        for served in servers.servers + servers.stopped:
            assert "Traceback" not in served.stderr, served.stderr
            for text in made.values():
                assert text not in served.stderr
        pg_server.drop_schema(url)


def commit(http: httpx.Client, nodes: list[dict[str, Any]], **extra: Any) -> httpx.Response:
    return http.post(path("commits"), json={"put": nodes, "message": "m", **extra.pop("body", {})}, **extra)


def log_ids(http: httpx.Client, limit: int = 1000) -> list[str]:
    answer = http.get(path("log"), params={"limit": str(limit)})
    assert answer.status_code == 200, answer.text
    return [json.loads(line)["id"] for line in answer.text.splitlines()]


def test_a_commit_through_one_server_is_read_by_the_next_request_to_any_other(fleet: Fleet) -> None:
    clients = [fleet.client(i) for i in range(SERVERS)]
    try:
        seen_length = 0
        for round_ in range(9):
            writer = round_ % SERVERS
            word = f"walrus{round_}x"
            made = commit(clients[writer], [{"id": f"ryw/{round_}", "content": f"{word} ate kelp"}])
            assert made.status_code == 201, made.text
            tip = made.json()["id"]
            for reader in (writer + 1) % SERVERS, (writer + 2) % SERVERS, writer:
                http = clients[reader]
                got = http.get(path("nodes", f"ryw/{round_}"))
                assert got.status_code == 200 and got.json()["content"] == f"{word} ate kelp", got.text
                assert got.headers["etag"] == f'"{tip}"'  # the tip read is the commit just made
                branch = http.get(path("branches", "main"))
                assert branch.headers["etag"] == f'"{tip}"'
                ids = log_ids(http)
                assert ids[0] == tip and len(ids) >= seen_length  # monotonic: never an older log
                seen_length = len(ids)
                for mode in ("lexical", "semantic"):
                    asked = {"query": f"{word} ate kelp", "k": 3, "mode": mode}
                    found = http.post(path("search"), json=asked)
                    assert found.status_code == 200, found.text
                    assert found.json()[0]["id"] == f"ryw/{round_}", (mode, reader, found.json())
    finally:
        for http in clients:
            http.close()


def race(fleet: Fleet, etag: str, content: str) -> list[tuple[int, httpx.Response]]:
    """One commit through each server at once, each with ``If-Match: etag``: (server, answer)."""
    start = threading.Barrier(SERVERS)

    def write(index: int) -> tuple[int, httpx.Response]:
        with fleet.client(index) as own:
            start.wait()
            body = [{"id": "race/x", "content": f"{content} from server {index}"}]
            return index, commit(own, body, headers={"if-match": etag})

    with ThreadPoolExecutor(SERVERS) as pool:
        return list(pool.map(write, range(SERVERS)))


def test_if_match_through_different_servers_lets_exactly_one_commit_in(fleet: Fleet) -> None:
    with fleet.client(0) as http:
        assert commit(http, [{"id": "race/base", "content": "read"}]).status_code == 201
    for round_ in range(4):
        with fleet.client(round_ % SERVERS) as http:
            etag = http.get(path("nodes", "race/base")).headers["etag"]
        answers = race(fleet, etag, f"round {round_}")
        assert sorted(a.status_code for _, a in answers) == [201, 412, 412], [a.text for _, a in answers]
        winner, won = next((i, a.json()) for i, a in answers if a.status_code == 201)
        with fleet.client((round_ + 1) % SERVERS) as http:
            assert log_ids(http, 2) == [won["id"], etag.strip('"')]  # one commit on what was read
            content = http.get(path("nodes", "race/x")).json()["content"]
            assert content == f"round {round_} from server {winner}"


def test_plain_commits_racing_through_different_servers_are_all_kept(fleet: Fleet) -> None:
    acknowledged: list[tuple[str, str]] = []
    lock = threading.Lock()
    start = threading.Barrier(2 * SERVERS)

    def write(worker: int) -> None:
        with fleet.client(worker % SERVERS) as http:
            start.wait()
            for n in range(5):
                made = commit(http, [{"id": f"plain/{worker}/{n}", "content": n}])
                assert made.status_code == 201, made.text
                with lock:
                    acknowledged.append((made.json()["id"], f"plain/{worker}/{n}"))

    with ThreadPoolExecutor(2 * SERVERS) as pool:
        list(pool.map(write, range(2 * SERVERS)))
    with fleet.client(2) as http:
        ids = set(log_ids(http))
        listed = http.get(path("nodes"), params={"prefix": "plain/", "limit": "1000"})
        present = {json.loads(line)["id"] for line in listed.text.splitlines()}
    assert {commit_id for commit_id, _ in acknowledged} <= ids  # every commit on the branch's history
    assert {node for _, node in acknowledged} == present  # and every node in its tip


def test_tokens_made_and_revoked_in_the_store_hold_on_every_server_from_the_next_request(
    fleet: Fleet,
) -> None:
    with Store.open(fleet.url) as store:  # what `mnemo --repo URL token create` does, servers running
        made = store.create_token("default", "read", name="late").token
        for index in range(SERVERS):
            with fleet.servers[index].client(made) as http:
                assert http.get("/v1/whoami").json()["name"] == "late"
                assert http.get(path("log"), params={"limit": "1"}).status_code == 200
        store.revoke_token("late")
        for index in range(SERVERS):  # no delay: the next request through any server is refused
            with fleet.servers[index].client(made) as http:
                assert http.get(path("log"), params={"limit": "1"}).status_code == 401


def test_an_erasure_through_one_server_is_gone_from_every_other(fleet: Fleet) -> None:
    secret = "the vault code is 7461 heron"
    with fleet.client(0) as http:
        made = commit(http, [{"id": "erase/me", "content": secret}])
        assert made.status_code == 201
        at = {"at": made.json()["id"]}
    for index in range(SERVERS):  # read everywhere first: every server holds the object warm
        with fleet.client(index, "reader") as http:
            assert http.get(path("nodes", "erase/me"), params=at).json()["content"] == secret
            hits = http.post(path("search"), json={"query": "vault heron", "k": 3}).json()
            assert [hit["id"] for hit in hits][:1] == ["erase/me"]
    with fleet.client(1, "admin") as http:
        forgot = http.post(path("forget"), json={"ids": ["erase/me"], "reason": "asked"})
        assert forgot.status_code == 200, forgot.text
    for index in range(SERVERS):
        with fleet.client(index, "reader") as http:
            assert http.get(path("nodes", "erase/me")).status_code == 404  # gone from the tip
            assert http.get(path("nodes", "erase/me"), params=at).status_code == 410  # and its bytes
            history = http.get(path("history", "erase/me"))
            assert secret not in history.text
            hits = http.post(path("search"), json={"query": "vault heron", "k": 3}).json()
            assert "erase/me" not in [hit["id"] for hit in hits]
            assert secret not in json.dumps(hits)


def test_a_server_killed_under_load_loses_nothing_it_acknowledged_and_the_others_go_on(
    fleet: Fleet,
) -> None:
    acknowledged: dict[str, str] = {}  # node id -> commit id, of every 201
    failures: list[str] = []
    lock = threading.Lock()
    numbers = itertools.count()
    stop = threading.Event()
    victim = 2

    def load(worker: int) -> None:
        index = worker % SERVERS
        http = fleet.client(index)
        try:
            while not stop.is_set():
                node = f"load/{worker}/{next(numbers)}"
                try:
                    made = commit(http, [{"id": node, "content": node}])
                except httpx.TransportError as error:
                    # Its server died: as a load balancer does, go to the next one.
                    with lock:
                        failures.append(f"{index}: {type(error).__name__}")
                    http.close()
                    index = (index + 1) % SERVERS
                    if index == victim:
                        index = (index + 1) % SERVERS
                    http = fleet.client(index)
                    continue
                assert made.status_code == 201, made.text
                with lock:
                    acknowledged[node] = made.json()["id"]
        finally:
            http.close()

    def until(count: int) -> None:  # acknowledged commits, however loaded the machine is
        deadline = time.monotonic() + 30
        while len(acknowledged) < count and time.monotonic() < deadline:
            time.sleep(0.02)

    with ThreadPoolExecutor(2 * SERVERS) as pool:
        running = [pool.submit(load, worker) for worker in range(2 * SERVERS)]
        until(20)
        killed = fleet.servers.pop(victim)
        assert killed.stop(signal.SIGKILL) == -signal.SIGKILL
        fleet.stopped.append(killed)
        before = len(acknowledged)
        until(before + 20)
        after = len(acknowledged)
        stop.set()
        for future in running:
            future.result()
    assert failures, "no request reached the killed server after it died"
    assert after >= before + 20  # the others went on
    for index in range(len(fleet.servers)):  # the two left
        with fleet.client(index, "reader") as http:
            assert http.get("/v1/ready").json() == {"ready": True}
            ids = set(log_ids(http, 100_000))
            listed = http.get(path("nodes"), params={"prefix": "load/", "limit": "100000"})
            present = {json.loads(line)["id"] for line in listed.text.splitlines()}
        assert set(acknowledged.values()) <= ids
        assert set(acknowledged) <= present
    with Repo.open(fleet.url) as repo:
        report = repo.fsck()
    assert report.ok, report.problems


def test_a_handle_follows_the_embedder_setting_changed_by_another_process(pg_url: str) -> None:
    """A server's handle (writable, using the store's setting) reads the setting at each search.

    It loaded its embedder once, so another process's ``mnemo config embedder hash``
    went unseen until the server restarted: semantic search refused, hybrid lexical only.
    """
    with Store.init(pg_url) as store:
        store.config("embedder", "none")
    with Repo.open(pg_url) as served, Store.open(pg_url) as other:
        served.commit([Node(id="a", content="otters hold hands asleep")])
        assert [hit.id for hit in served.search("otters hold hands", mode="lexical")] == ["a"]
        assert served.embedder() is None
        other.config("embedder", "hash")
        hits = served.search("otters hold hands asleep", mode="semantic")
        assert [hit.id for hit in hits] == ["a"] and served.embedder() is not None
        other.config("embedder", "none")
        served.search("otters", mode="lexical")
        assert served.embedder() is None

"""Which requests a server answers on its event loop, and which in a worker thread."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from mnemosyne import Node, Repo, Store
from mnemosyne.integrations.server.asgi import Api, Tenants
from mnemosyne.store.kv.lmdb_kv import LmdbKV
from mnemosyne.store.kv.postgres_kv import PostgresKV


class CountingPool(ThreadPoolExecutor):
    """A worker pool that counts the work handed to it."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.handed = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.handed += 1
        return super().submit(fn, *args, **kwargs)


def ask(api: Api, path: str, token: str, query: str = "") -> tuple[int, dict[str, Any]]:
    """One GET through the ASGI interface: its status and JSON answer."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "GET",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "headers": [(b"authorization", f"Bearer {token}".encode())],
    }
    asyncio.run(api(scope, receive, send))
    body = b"".join(message.get("body", b"") for message in sent if message["type"] == "http.response.body")
    return sent[0]["status"], json.loads(body.splitlines()[0])  # of JSON Lines, the first


@pytest.fixture
def served(tmp_path: Path) -> Any:
    path = tmp_path / "store"
    with Repo.init(path) as repo:
        repo.commit([Node(id="a/1", content="first")], message="one")
        repo.commit([Node(id="a/1", content="second")], message="two")
    store = Store.open(path)
    token = store.create_token("default", "read", name="reader").token
    tenants = Tenants(store)
    api = Api(tenants)
    api.pool.shutdown()
    api.pool = pool = CountingPool()
    yield api, pool, token
    pool.shutdown()
    tenants.close()


def test_a_read_at_the_tip_of_a_local_store_never_waits_for_a_worker(served: Any) -> None:
    api, pool, token = served
    base = "/v1/tenants/default"
    assert ask(api, f"{base}/nodes/a%2F1", token)[1]["content"] == "second"  # opens the handle: a worker
    opened = pool.handed
    status, node = ask(api, f"{base}/nodes/a%2F1", token)
    assert (status, node["content"]) == (200, "second")
    assert ask(api, f"{base}/branches/main", token)[0] == 200
    assert ask(api, f"{base}/freshness/main", token)[0] == 200
    assert ask(api, f"{base}/nodes/missing", token)[0] == 404
    assert pool.handed == opened  # answered on the event loop
    status, node = ask(api, f"{base}/nodes/a%2F1", token, "at=HEAD~1")
    assert (status, node["content"]) == (200, "first")  # a revision walks commits: a worker's
    assert pool.handed == opened + 1
    assert ask(api, f"{base}/log", token)[0] == 200  # a listing too
    assert pool.handed == opened + 2


def test_a_bad_token_is_refused_on_the_event_loop_too(served: Any) -> None:
    api, _, token = served
    base = "/v1/tenants/default"
    ask(api, f"{base}/nodes/a%2F1", token)
    assert ask(api, f"{base}/nodes/a%2F1", token + "x")[0] == 401
    assert ask(api, "/v1/tenants/other/nodes/a%2F1", token)[0] == 404


def test_a_store_whose_reads_wait_on_a_server_reads_in_a_worker(
    served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    api, pool, token = served
    base = "/v1/tenants/default"
    ask(api, f"{base}/nodes/a%2F1", token)
    assert PostgresKV.remote and not LmdbKV.remote
    monkeypatch.setattr(api.tenants.store.kv, "remote", True)  # as a PostgreSQL store says of itself
    before = pool.handed
    assert ask(api, f"{base}/nodes/a%2F1", token)[0] == 200
    assert pool.handed == before + 1

"""``mnemo serve``: a real server process on a free loopback port, driven over HTTP from this one.

One server per module (its store and tokens made here first); every route, the
token rules, the body limit, ``If-Match`` races, MCP over HTTP, the refusals at
start, and a clean stop on SIGINT and SIGTERM.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from support.components import need_module
from support.served import Served, tokens

from mnemosyne import Node, Repo, Store, to_json

httpx = need_module("httpx")
jsonschema = need_module("jsonschema")
need_module("uvicorn")

pytestmark = pytest.mark.slow  # a server process per module, seconds to start and stop

CLAIM = {
    "id": "claims/mira/city",
    "kind": "claim",
    "content": {"subject": "mira", "predicate": "city", "value": "Oslo", "valid_from": "2026-01-01"},
}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    path = tmp_path_factory.mktemp("served") / "store"
    with Store.init(path) as store:
        store.create_tenant("acme")
    made = tokens(
        path,
        ("writer", "default", "write"),
        ("reader", "default", "read"),
        ("admin", "default", "admin"),
        ("acme-writer", "acme", "write"),
    )
    server = Served(path, "--max-body", "64K")
    server.tokens = made  # type: ignore[attr-defined]
    yield server
    assert server.stop() == 0, server.stderr
    assert "Traceback" not in server.stderr
    for name, text in made.items():
        assert text not in server.stderr, f"the {name} token reached the server's log"


@pytest.fixture(scope="module")
def openapi(served) -> dict[str, Any]:
    with served.client() as http:
        answer = http.get("/v1/openapi.json")
    assert answer.status_code == 200
    return answer.json()


def client(served, name: str = "writer"):
    return served.client(served.tokens[name])


def path(*parts: str) -> str:
    return "/v1/tenants/default/" + "/".join(quote(part, safe="") for part in parts)


def conforms(openapi: dict[str, Any], template: str, method: str, answer: Any) -> None:
    """The answer's body is what the OpenAPI document says the route returns."""
    responses = openapi["paths"][template][method]["responses"]
    media = answer.headers["content-type"]
    schema = responses[str(answer.status_code)]["content"][media]["schema"]
    validator = jsonschema.Draft202012Validator({**schema, "components": openapi["components"]})
    values = [json.loads(line) for line in answer.text.splitlines()] if "jsonl" in media else [answer.json()]
    for value in values:
        validator.validate(value)


def error_of(answer: Any, status: int, kind: str, code: int) -> str:
    """The message of an error answer, checked for its one shape."""
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/json"
    body = answer.json()
    assert set(body) == {"error"} and set(body["error"]) == {"kind", "message", "exit_code"}
    assert (body["error"]["kind"], body["error"]["exit_code"]) == (kind, code), body
    message = body["error"]["message"]
    assert "\n" not in message and "Traceback" not in answer.text
    return str(message)


def tip(served) -> str | None:
    with client(served, "reader") as http:
        answer = http.get(path("branches", "main"))
    return answer.json()["commit"]["id"] if answer.status_code == 200 else None


# -- no token needed -------------------------------------------------------------------


def test_health_and_the_openapi_document_need_no_token(served, openapi) -> None:
    with served.client() as http:
        health = http.get("/v1/health")
        assert health.status_code == 200 and health.json()["status"] == "ok"
        error_of(http.get("/v1/whoami"), 401, "AccessDenied", 7)
    assert openapi["openapi"].startswith("3.1")
    from mnemosyne.integrations.server.routes import ROUTES

    for route in ROUTES:
        operation = openapi["paths"][route.path][route.method.lower()]
        assert operation["x-mnemo-role"] == route.role
    refs = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if "$ref" in value:
                refs.add(value["$ref"].rsplit("/", 1)[1])
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(openapi)
    assert refs <= set(openapi["components"]["schemas"])


def test_whoami_says_what_the_token_is(served) -> None:
    with client(served, "reader") as http:
        answer = http.get("/v1/whoami")
    assert answer.json() | {"id": "x", "created_at": "x"} == {
        "id": "x",
        "name": "reader",
        "tenant": "default",
        "role": "read",
        "created_at": "x",
        "expires_at": None,
    }


# -- every route -----------------------------------------------------------------------


def test_commit_then_every_read_route_answers_the_one_json_form(served, openapi) -> None:
    nodes = [{"id": "users/mira/lang", "content": "Mira prefers German"}, CLAIM]
    with client(served) as http:
        made = http.post(path("commits"), json={"put": nodes, "message": "first", "author": "agent-7"})
        assert made.status_code == 201, made.text
        conforms(openapi, "/v1/tenants/{tenant}/commits", "post", made)
        commit = made.json()
        assert made.headers["etag"] == f'"{commit["id"]}"'
        assert made.headers["location"] == f"/v1/tenants/default/commits/{commit['id']}"
        assert (commit["author"], commit["put_ids"]) == ("agent-7", ["users/mira/lang", "claims/mira/city"])
        again = http.post(path("commits"), json={"put": nodes[:1], "message": "retry"})
        assert again.status_code == 200 and again.json()["created"] is False  # nothing changed
        second = http.post(path("commits"), json={"put": [{"id": "users/mira/lang", "content": "Deutsch"}]})
        assert second.json()["author"] == "writer"  # the token's name when the body names none

        node = http.get(path("nodes", "users/mira/lang"))
        assert node.status_code == 200 and node.json()["content"] == "Deutsch"
        assert node.headers["etag"] == f'"{second.json()["id"]}"'
        assert node.headers["cache-control"] == "no-store"
        conforms(openapi, "/v1/tenants/{tenant}/nodes/{id}", "get", node)
        typed = http.get("/v1/tenants/default/nodes/users/mira/lang")  # an id's segments, as typed
        assert (typed.status_code, typed.json()) == (200, node.json())
        assert http.get("/v1/tenants/default/history/users/mira/lang").json()[0]["status"] == "current"
        old = http.get(path("nodes", "users/mira/lang"), params={"at": commit["id"]})
        assert old.json()["content"] == "Mira prefers German" and "etag" not in old.headers

        with Repo.open(served.path, readonly=True) as repo:  # what the library says, in-process
            expected = {
                ("log", "get", ()): [json.loads(to_json(c)) for c in repo.log()],
                ("history/{id}", "get", ("history", "users/mira/lang")): json.loads(
                    to_json(repo.history("users/mira/lang"))
                ),
                ("blame/{id}", "get", ("blame", "users/mira/lang")): json.loads(
                    to_json(repo.blame("users/mira/lang"))
                ),
                ("facts/{subject}", "get", ("facts", "mira")): json.loads(to_json(repo.facts("mira"))),
                ("facts/{subject}/{predicate}", "get", ("facts", "mira", "city")): json.loads(
                    to_json(repo.facts("mira", "city"))
                ),
                ("timeline/{subject}/{predicate}", "get", ("timeline", "mira", "city")): json.loads(
                    to_json(repo.timeline("mira", "city"))
                ),
                ("contradictions", "get", ("contradictions",)): [],
                ("nodes", "get", ("nodes",)): [json.loads(to_json(n)) for n in repo.nodes()],
                ("branches", "get", ("branches",)): {
                    "head": "main",
                    "branches": [{"name": "main", "commit": json.loads(to_json(repo.resolve("main")))}],
                },
            }
        for (template, method, parts), want in expected.items():
            answer = http.get(path(*(parts or ("log",))))
            assert answer.status_code == 200, (template, answer.text)
            got = (
                [json.loads(line) for line in answer.text.splitlines()]
                if "jsonl" in answer.headers["content-type"]
                else answer.json()
            )
            assert got == want, template
            conforms(openapi, f"/v1/tenants/{{tenant}}/{template}", method, answer)

        diff = http.get(path("diff"), params={"a": commit["id"], "b": "HEAD"})
        assert [change["id"] for change in diff.json()["modified"]] == ["users/mira/lang"]
        conforms(openapi, "/v1/tenants/{tenant}/diff", "get", diff)
        resolved = http.get(path("commits", "HEAD~1"))
        assert resolved.json()["id"] == commit["id"]
        page = http.get(path("nodes"), params={"prefix": "users/", "limit": "1"})
        assert [json.loads(line)["id"] for line in page.text.splitlines()] == ["users/mira/lang"]
        after = http.get(path("nodes"), params={"after": "claims/mira/city"})
        assert [json.loads(line)["id"] for line in after.text.splitlines()] == ["users/mira/lang"]

        hits = http.post(path("search"), json={"query": "Deutsch", "k": 3, "run_id": "run-1"})
        assert [hit["id"] for hit in hits.json()] == ["users/mira/lang"]
        conforms(openapi, "/v1/tenants/{tenant}/search", "post", hits)
        packed = http.post(
            path("context"), json={"query": "Deutsch", "budget_tokens": 200, "prefix": "users/"}
        )
        assert [item["id"] for item in packed.json()["items"]] == ["users/mira/lang"]
        conforms(openapi, "/v1/tenants/{tenant}/context", "post", packed)
        reads = http.get(path("reads", "run-1"))
        assert reads.json()[0]["ids"] == ["users/mira/lang"]

        verified = http.post(path("verify"), json={"ids": ["users/mira/lang"], "note": "checked"})
        assert verified.status_code == 201 and verified.json()["verified"] == ["users/mira/lang"]
        conforms(openapi, "/v1/tenants/{tenant}/verify", "post", verified)


def test_branches_and_a_merge_with_conflicts_returned_as_data(served, openapi) -> None:
    with client(served) as http:
        http.post(path("commits"), json={"put": [{"id": "merge/x", "content": "base"}]})
        made = http.post(path("branches"), json={"name": "side"})
        assert made.status_code == 201 and made.json()["name"] == "side"
        conforms(openapi, "/v1/tenants/{tenant}/branches", "post", made)
        http.post(path("commits"), json={"put": [{"id": "merge/x", "content": "ours"}]})
        http.post(path("commits"), json={"put": [{"id": "merge/x", "content": "theirs"}], "branch": "side"})
        before = tip(served)
        merged = http.post(path("merge"), json={"source": "side"})
        assert merged.status_code == 200, merged.text
        conforms(openapi, "/v1/tenants/{tenant}/merge", "post", merged)
        result = merged.json()
        assert result["commit"] is None and [c["id"] for c in result["conflicts"]] == ["merge/x"]
        assert tip(served) == before  # nothing written
        resolved = http.post(
            path("merge"),
            json={"source": "side", "resolutions": {"merge/x": {"id": "merge/x", "content": "both"}}},
        )
        assert resolved.json()["commit"]["parents"][0] == before
        assert http.get(path("nodes", "merge/x")).json()["content"] == "both"
        listed = http.get(path("branches")).json()
        assert [b["name"] for b in listed["branches"]] == ["main", "side"]
        gone = http.delete(path("branches", "side"))
        assert gone.status_code == 200 and gone.json()["name"] == "side"
        error_of(http.get(path("branches", "side")), 404, "NotFound", 3)


def test_forget_needs_an_admin_token_then_the_version_is_gone(served) -> None:
    with client(served) as http:
        http.post(path("commits"), json={"put": [{"id": "secret/card", "content": "4111"}]})
        body = {"ids": ["secret/card"], "reason": "asked to"}
        error_of(http.post(path("forget"), json=body), 403, "AccessDenied", 7)
    with client(served, "admin") as http:
        erased = http.post(path("forget"), json=body)
        assert erased.status_code == 200, erased.text
        assert [r["redactions"][0]["reason"] for r in erased.json()["reports"]] == ["asked to"]
        old = erased.json()["reports"][0]["redactions"][0]["hash"]
        history = http.get(path("history", "secret/card")).json()
        assert [v["status"] for v in history] == ["redacted"]
        at = history[0]["commit"]["id"]
        message = error_of(http.get(path("nodes", "secret/card"), params={"at": at}), 410, "Redacted", 3)
        assert "asked to" in message and old[:7] in message
        error_of(http.post(path("forget"), json={"ids": ["never/was"], "reason": "r"}), 404, "NotFound", 3)


# -- errors: one line, one shape, nothing written --------------------------------------


def test_bad_requests_are_one_line_and_write_nothing(served) -> None:
    with client(served) as http:
        http.post(path("commits"), json={"put": [CLAIM]})  # the claim the conflict below is with
    before = tip(served)
    with client(served) as http:
        error_of(http.get(path("nodes", "no/such/id")), 404, "NotFound", 3)
        error_of(http.get(path("nodes", "bad//id")), 400, "InvalidInput", 2)
        message = error_of(http.get(path("log"), params={"limt": "3"}), 400, "InvalidInput", 2)
        assert "?limt=" in message and "?limit=" in message
        error_of(http.get(path("log"), params={"limit": "x"}), 400, "InvalidInput", 2)
        error_of(http.get(path("log"), params=[("at", "a"), ("at", "b")]), 400, "InvalidInput", 2)
        error_of(http.get(path("log"), params={"at": "no-such-rev"}), 404, "NotFound", 3)
        error_of(http.get(path("diff")), 400, "InvalidInput", 2)
        bad_bodies = [
            b"{not json",
            b'{"put": [{"content": 1}], "put": []}',  # a key given twice
            b'{"put": [{"content": NaN}]}',
            b"[1, 2]",
            b'{"put": [{"content": 1, "colour": "red"}]}',  # not a node field
            b'{"put": [{"content": 1}], "mesage": "typo"}',  # not a body field
            b'{"put": [{"id": "", "content": 1}]}',
            b'{"put": [{"id": "a", "content": 1}], "on_claim_conflict": "maybe"}',
            b'{"put": [{"id": "a", "content": 1}], "meta": [1]}',
            b"\xff\xfe",
        ]
        for raw in bad_bodies:
            error_of(http.post(path("commits"), content=raw), 400, "InvalidInput", 2)
        message = error_of(
            http.post(path("commits"), json={"put": [], "mesage": "typo"}), 400, "InvalidInput", 2
        )
        assert "'mesage'" in message and "message" in message
        nodes = [{"id": "ok1", "content": "a"}, {"id": "ok2", "content": "a"}, {"id": "ok3", "zzz": 1}]
        message = error_of(http.post(path("commits"), json={"put": nodes}), 400, "InvalidInput", 2)
        assert message.startswith("put[2]: unknown field 'zzz'"), message
        error_of(http.post(path("commits"), json={"delete": ["never/there"]}), 404, "NotFound", 3)
        claim = {**CLAIM, "id": "claims/mira/city2", "content": {**CLAIM["content"], "value": "Bergen"}}
        error_of(http.post(path("commits"), json={"put": [claim]}), 409, "ClaimConflict", 2)
        error_of(http.put(path("commits"), json={}), 405, "InvalidInput", 2)
        error_of(http.get("/v1/tenants/default/nothing-here"), 404, "NotFound", 3)
        error_of(http.get("/elsewhere"), 404, "NotFound", 3)
    assert tip(served) == before


def test_the_body_limit_refuses_large_bodies_and_writes_nothing(served) -> None:
    before = tip(served)
    big = {"put": [{"id": "big", "content": "x" * 70_000}]}
    with client(served) as http:
        message = error_of(http.post(path("commits"), json=big), 413, "InvalidInput", 2)
        assert "65,536 bytes" in message

        def chunks():  # no Content-Length: counted as it arrives
            yield b'{"put": [{"id": "big", "content": "'
            for _ in range(20):
                yield b"y" * 4096
            yield b'"}]}'

        error_of(http.post(path("commits"), content=chunks()), 413, "InvalidInput", 2)
    assert tip(served) == before


def test_a_stranger_sending_a_body_of_no_declared_size_is_refused_before_it_is_read(served) -> None:
    # Chunked, and no chunk ever sent: the answer comes from the token alone.
    parts = urlsplit(served.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/tenants/default/commits HTTP/1.1\r\nHost: x\r\n"
            b"Authorization: Bearer mnemo_000000000000_nope\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]


# -- tokens ----------------------------------------------------------------------------


def test_token_rules(served, tmp_path) -> None:
    with served.client() as http:
        missing = http.get(path("log"))
        error_of(missing, 401, "AccessDenied", 7)
        assert missing.headers["www-authenticate"].startswith("Bearer")
        error_of(http.get(path("log"), headers={"authorization": "Basic abc"}), 401, "AccessDenied", 7)
        error_of(http.get(path("log"), headers={"authorization": "Bearer nope"}), 401, "AccessDenied", 7)
        forged = served.tokens["writer"][:-4] + "AAAA"
        error_of(http.get(path("log"), headers={"authorization": f"Bearer {forged}"}), 401, "AccessDenied", 7)
    with client(served, "acme-writer") as http:
        # Another tenant answers as a tenant that does not exist: a token learns of no other.
        other = http.get(path("log"))
        nowhere = http.get("/v1/tenants/nowhere/log")
        assert error_of(other, 404, "NotFound", 3) == "no tenant 'default'"
        assert error_of(nowhere, 404, "NotFound", 3) == "no tenant 'nowhere'"
        assert http.get("/v1/tenants/acme/log").status_code == 200
    with client(served, "reader") as http:
        assert http.get(path("log")).status_code == 200
        assert http.post(path("search"), json={"query": "x"}).status_code == 200
        for method, route, body in [
            ("POST", "commits", {"put": [{"id": "r", "content": 1}]}),
            ("POST", "verify", {"ids": ["users/mira/lang"]}),
            ("POST", "branches", {"name": "nope"}),
            ("POST", "merge", {"source": "main"}),
            ("POST", "forget", {"ids": ["users/mira/lang"], "reason": "r"}),
        ]:
            message = error_of(http.request(method, path(route), json=body), 403, "AccessDenied", 7)
            assert "a read token" in message
        error_of(http.delete(path("branches", "main")), 403, "AccessDenied", 7)
    # Revoked (by another process, the server running): refused from the next request on.
    extra = tokens(served.path, ("short-lived", "default", "write"))["short-lived"]
    with served.client(extra) as http:
        assert http.get(path("log")).status_code == 200
        with Store.open(served.path) as store:
            store.revoke_token("short-lived")
        error_of(http.get(path("log")), 401, "AccessDenied", 7)
    # Expired.
    with Store.open(served.path) as store:
        stale = store.create_token(
            "default", "read", expires=timedelta(hours=1), clock=lambda: datetime.now(UTC) - timedelta(days=1)
        ).token
    with served.client(stale) as http:
        error_of(http.get(path("log")), 401, "AccessDenied", 7)


def test_a_dropped_tenant_takes_its_tokens_and_a_new_one_starts_afresh(served) -> None:
    with Store.open(served.path) as store:
        store.create_tenant("brief")
        first = store.create_token("brief", "write").token
    with served.client(first) as http:
        assert (
            http.post("/v1/tenants/brief/commits", json={"put": [{"id": "a", "content": 1}]}).status_code
            == 201
        )
        with Store.open(served.path) as store:
            store.drop_tenant("brief")
            store.create_tenant("brief")
            second = store.create_token("brief", "write").token
        error_of(http.get("/v1/tenants/brief/log"), 401, "AccessDenied", 7)
    with served.client(second) as http:
        assert http.get("/v1/tenants/brief/log").text == ""  # the new tenant, not the server's old handle
        assert (
            http.post("/v1/tenants/brief/commits", json={"put": [{"id": "b", "content": 2}]}).status_code
            == 201
        )


# -- If-Match --------------------------------------------------------------------------


def test_if_match_lets_exactly_one_of_two_racing_commits_in(served) -> None:
    with client(served) as http:
        http.post(path("commits"), json={"put": [{"id": "race/base", "content": "read"}]})
        read = http.get(path("nodes", "race/base"))
        etag = read.headers["etag"]
    statuses: list[int] = []
    start = threading.Barrier(2)

    def write(value: str) -> None:
        with client(served) as own:
            start.wait()
            body = {"put": [{"id": "race/x", "content": value}]}
            statuses.append(own.post(path("commits"), json=body, headers={"if-match": etag}).status_code)

    threads = [threading.Thread(target=write, args=(v,)) for v in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [201, 412]
    with client(served) as http:
        log = [json.loads(line) for line in http.get(path("log"), params={"limit": "2"}).text.splitlines()]
        assert f'"{log[1]["id"]}"' == etag  # one commit on top of what was read
        stale = http.post(
            path("commits"), json={"put": [{"id": "race/y", "content": 1}]}, headers={"if-match": etag}
        )
        message = error_of(stale, 412, "RefConflict", 4)
        assert "nothing was written" in message
        unknown = http.post(
            path("commits"),
            json={"put": [{"id": "race/y", "content": 1}]},
            headers={"if-match": '"' + "0" * 64 + '"'},
        )
        error_of(unknown, 404, "NotFound", 3)
        assert http.get(path("nodes", "race/y")).status_code == 404
        fresh = http.post(
            path("commits"),
            json={"put": [{"id": "race/y", "content": 1}]},
            headers={"if-match": f'"{log[0]["id"]}"'},
        )
        assert fresh.status_code == 201


# -- MCP over HTTP ---------------------------------------------------------------------


def test_an_mcp_session_over_http_with_the_same_tokens(served) -> None:
    need_module("mcp")
    httpx2 = need_module("httpx2")  # the HTTP client the MCP SDK's transport takes
    from mcp.client.streamable_http import streamable_http_client
    from support.mcp_client import connected

    def transport(name: str):
        headers = {"authorization": f"Bearer {served.tokens[name]}"}
        http = httpx2.AsyncClient(headers=headers, timeout=30)
        return streamable_http_client(f"{served.url}/mcp", http_client=http)

    with connected(
        transport("writer"), transport("reader"), transport("admin"), names=("agent-x",)
    ) as sessions:
        writer, reader, admin = sessions
        assert {"remember", "delete", "verify"} <= set(writer.tools()) and "forget" not in writer.tools()
        assert not {"remember", "delete", "verify", "forget"} & set(reader.tools())
        assert "forget" in admin.tools()
        made = writer.ok("remember", nodes=[{"id": "mcp/note", "content": "over http"}], message="via mcp")
        assert made["author"] == "agent-x"
        assert reader.ok("get", id="mcp/note")["content"] == "over http"
        assert reader.ok("recall", query="over http")["hits"][0]["id"] == "mcp/note"
    with client(served, "reader") as http:
        assert http.get(path("nodes", "mcp/note")).json()["provenance"]["source"] == "mcp"
    with served.client("mnemo_000000000000_" + "A" * 43) as http:
        assert http.post("/mcp", json={}).status_code == 401


# -- starting and stopping -------------------------------------------------------------


def test_a_non_loopback_address_is_refused_without_tokens(tmp_path) -> None:
    Store.init(tmp_path / "store").close()
    done = subprocess.run(
        [sys.executable, "-m", "mnemo_cli", "--repo", str(tmp_path / "store"), "serve", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: refusing to serve on 0.0.0.0") and done.stderr.count("\n") == 1
    assert done.stdout == ""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_server_cleanly(tmp_path: Path, sig: int) -> None:
    with Repo.init(tmp_path / "store") as repo:
        repo.commit([Node(id="a", content=1)])
    made = tokens(tmp_path / "store", ("w", "default", "write"))
    server = Served(tmp_path / "store")
    with server.client(made["w"]) as http:
        assert http.get(path("nodes", "a")).status_code == 200
    assert server.stop(sig) == 0
    assert server.stderr.endswith("stopped\n") and "Traceback" not in server.stderr
    with Repo.open(tmp_path / "store") as repo:  # closed cleanly: opens, and writes
        repo.commit([Node(id="b", content=2)])


def acme(*parts: str) -> str:
    return "/v1/tenants/acme/" + "/".join(quote(part, safe="") for part in parts)


def test_every_answer_of_the_store_says_how_long_its_work_took(served) -> None:
    """``Server-Timing: app;dur=MS``: the server's own time, within what the client waited (tenant acme)."""
    with client(served, "acme-writer") as http:
        made = http.post(acme("commits"), json={"put": [{"id": "timing/a", "content": "kept for timing"}]})
        started = time.perf_counter()
        found = http.post(acme("search"), json={"query": "kept timing"})
        waited = (time.perf_counter() - started) * 1e3
        listed = http.get(acme("log"), params={"limit": 2})  # a stream: the time of its first lines
        refused = http.get(acme("nodes", "no/such/id"))
    for answer in (made, found, listed, refused):
        timing = answer.headers.get("server-timing", "")
        assert re.fullmatch(r"app;dur=\d+\.\d\d", timing), (answer.status_code, timing)
    assert made.status_code in (200, 201) and found.status_code == 200 and listed.status_code == 200
    assert refused.status_code == 404
    spent = float(found.headers["server-timing"].removeprefix("app;dur="))
    assert 0 < spent <= waited, (spent, waited)
    with served.client("not-a-token") as http:
        assert "server-timing" not in http.get(path("log")).headers  # no work was done for a stranger

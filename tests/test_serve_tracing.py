"""OpenTelemetry traces of a real ``mnemo serve``, exported over OTLP/HTTP to a receiver in this process.

The server is started with the standard variables only (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_SERVICE_NAME``, ``OTEL_BSP_SCHEDULE_DELAY``); the receiver decodes what the
SDK's exporter sends with OpenTelemetry's own protobuf messages. A span per
request, named by route template, a child of the caller's ``traceparent``, with
status and tenant hash, and never a token, an id or a query; off (no variable),
the server starts and answers without loading OpenTelemetry's SDK or exporter.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from support.components import need_module
from support.served import Served, tokens

from mnemosyne import Store

need_module("uvicorn")
need_module("httpx")
trace_service = need_module("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
need_module("opentelemetry.sdk")

pytestmark = pytest.mark.slow  # a server process

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


class Receiver:
    """An OTLP/HTTP trace receiver on a free loopback port: every span it was sent."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.resources: list[dict[str, Any]] = []
        self.bodies: list[bytes] = []
        received = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                assert self.path == "/v1/traces", self.path
                assert self.headers["content-type"] == "application/x-protobuf"
                request = trace_service.ExportTraceServiceRequest()
                request.ParseFromString(body)
                received.bodies.append(body)
                for resource_spans in request.resource_spans:
                    received.resources.append(values(resource_spans.resource.attributes))
                    for scope_spans in resource_spans.scope_spans:
                        received.spans.extend(scope_spans.spans)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def imported(module: str, served: Served) -> bool:
    """Whether the server's import listing (``PYTHONPROFILEIMPORTTIME``) names ``module``."""
    return re.search(rf"\|\s+{re.escape(module)}$", served.stderr, re.MULTILINE) is not None


def values(attributes: Any) -> dict[str, Any]:
    found = {}
    for attribute in attributes:
        value = attribute.value
        found[attribute.key] = getattr(value, value.WhichOneof("value"))
    return found


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.close()


def test_each_request_is_a_span_exported_over_otlp(tmp_path: Path, receiver: Receiver) -> None:
    path = tmp_path / "store"
    with Store.init(path) as store:
        store.create_tenant("acme")
    made = tokens(path, ("writer", "acme", "write"))
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_SERVICE_NAME": "memory-api",
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "PYTHONPROFILEIMPORTTIME": "1",
    }
    served = Served(path, env=env)
    try:
        with served.client(made["writer"]) as http:
            base = "/v1/tenants/acme"
            assert http.post(
                f"{base}/commits", json={"put": [{"id": "users/mira", "content": "x"}]}
            ).is_success
            headers = {"traceparent": f"00-{TRACE}-{PARENT}-01"}
            assert http.get(f"{base}/nodes/users%2Fmira", headers=headers).status_code == 200
            assert http.get(f"{base}/nodes/users%2Fnobody?at=main").status_code == 404
        with served.client("not-a-token") as stranger:
            assert stranger.get(f"{base}/log").status_code == 401
    finally:
        assert served.stop() == 0, served.stderr  # the last spans leave as it stops
    assert "Traceback" not in served.stderr
    assert imported("opentelemetry.sdk.trace", served)  # asked for: loaded (see the test below)
    by_name: dict[str, list[Any]] = {}
    for span in receiver.spans:
        by_name.setdefault(span.name, []).append(span)
    commits, gets, logs = (
        by_name["POST /v1/tenants/{tenant}/commits"],
        by_name["GET /v1/tenants/{tenant}/nodes/{id}"],
        by_name["GET /v1/tenants/{tenant}/log"],
    )
    assert len(commits) == 1 and len(gets) == 2 and len(logs) == 1, sorted(by_name)
    acme = hashlib.sha256(b"acme").hexdigest()[:12]
    attributes = values(commits[0].attributes)
    assert attributes == {
        "http.request.method": "POST",
        "http.route": "/v1/tenants/{tenant}/commits",
        "http.response.status_code": 201,
        "mnemo.tenant": acme,
    }
    assert commits[0].kind == 2  # SPAN_KIND_SERVER
    assert commits[0].end_time_unix_nano > commits[0].start_time_unix_nano
    child = next(span for span in gets if span.parent_span_id)
    assert child.trace_id.hex() == TRACE and child.parent_span_id.hex() == PARENT
    assert sorted(values(span.attributes)["http.response.status_code"] for span in gets) == [200, 404]
    assert "mnemo.tenant" not in values(logs[0].attributes)  # a refused token learns no tenant
    assert values(logs[0].attributes)["http.response.status_code"] == 401
    assert receiver.resources[0]["service.name"] == "memory-api"
    sent = b"".join(receiver.bodies)
    for secret in (
        made["writer"].encode(),
        b"not-a-token",
        b"users/mira",
        b"users%2Fmira",
        b"nobody",
        b"acme",
    ):
        assert secret not in sent


def test_without_the_variables_no_span_and_the_sdk_never_loaded(tmp_path: Path, receiver: Receiver) -> None:
    path = tmp_path / "store"
    Store.init(path).close()
    made = tokens(path, ("writer", "default", "write"))
    # Only a variable that enables nothing; Python lists each module it imports on stderr.
    env = {"OTEL_SERVICE_NAME": "memory-api", "PYTHONPROFILEIMPORTTIME": "1"}
    served = Served(path, env=env)
    try:
        with served.client(made["writer"]) as http:
            assert http.post(
                "/v1/tenants/default/commits", json={"put": [{"id": "a", "content": 1}]}
            ).is_success
            assert http.get("/v1/tenants/default/log").status_code == 200
    finally:
        assert served.stop() == 0, served.stderr
    assert receiver.spans == []
    assert imported("mnemosyne.integrations.server.serving", served)  # the listing is there
    assert "opentelemetry.sdk" not in served.stderr and "opentelemetry.exporter" not in served.stderr


def test_an_exporter_it_lacks_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "store"
    Store.init(path).close()
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "zipkin"}
    done = subprocess.run(
        [sys.executable, "-m", "mnemo_cli", "--repo", str(path), "serve", "--port", "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == "error: OTEL_TRACES_EXPORTER: 'zipkin' is not otlp, console or none\n"

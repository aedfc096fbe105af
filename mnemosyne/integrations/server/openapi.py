"""The OpenAPI document of the HTTP API (``/v1/openapi.json``), built from the route table and the types.

Each route's parameters, body and result come from :data:`~.routes.ROUTES`; each
schema from the library's types, as their one JSON form
(:func:`mnemosyne.model.form_schema.schema_components`), so the document says
what the server does.
"""

from __future__ import annotations

from typing import Any

from mnemosyne.errors import KINDS
from mnemosyne.integrations.server.bodies import BODIES
from mnemosyne.integrations.server.calls import SLASHED, Route
from mnemosyne.integrations.server.routes import ROUTES
from mnemosyne.model.access import Token
from mnemosyne.model.form_schema import schema_components
from mnemosyne.model.version import VERSION

_STATUS_TEXT = {200: "OK", 201: "Created"}

_ERRORS = {
    "400": "Invalid input: the request, a parameter or the body (one line says what); nothing was written.",
    "401": "No token, or one the store does not honour (unknown, revoked, expired).",
    "403": "The token's role does not allow this.",
    "404": "No such route, tenant (or not this token's), id, revision or branch.",
    "409": "A conflict: a claim conflict, a merge's stale resolutions, a ref moved; nothing was written.",
    "410": "The version asked for was erased (its redaction record is in the message).",
    "412": "If-Match named a tip the branch is no longer at; nothing was written.",
    "413": "The request body is larger than the server takes.",
    "507": "The store's disk is full; nothing was written.",
    "408": "The request's headers or body took longer than the server waits; the connection closes.",
    "429": "This token has as many requests under way as the server takes at once (Retry-After: 1).",
    "431": "The request's line and headers are larger, or its header fields more, than the server takes.",
    "503": "Every connection the server keeps open is being answered (Retry-After: 1).",
}
_BOUNDS = ("408", "429", "431", "503")
"""What any request may be answered, by the server's bounds (docs/serving.md)."""


def _error_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "error": {
                "type": "object",
                "properties": {
                    "kind": {"enum": [kind.__name__ for kind in KINDS]},
                    "message": {"type": "string", "description": "One line."},
                    "exit_code": {"type": "integer", "description": "The exit code mnemo gives this error."},
                },
                "required": ["kind", "message", "exit_code"],
            }
        },
        "required": ["error"],
    }


def _errors(*codes: str) -> dict[str, Any]:
    ref = {"$ref": "#/components/schemas/Error"}
    return {
        code: {"description": _ERRORS[code], "content": {"application/json": {"schema": ref}}}
        for code in codes
    }


def _path_param(name: str, *, last: bool) -> str:
    if name == "tenant":
        return "The token's tenant."
    if last and name in SLASHED:
        return (
            f"Percent-encoded ('/' as %2F), or as the rest of the path: its '/' kept, as in "
            f"{_EXAMPLE[name]} (this document's path template shows it as one segment)."
        )
    return "Percent-encoded ('/' as %2F)."


_EXAMPLE = {
    "id": "nodes/mem/0 for the id mem/0",
    "name": "branches/team/mira",
    "rev": "commits/origin/main~1",
}


def _operation(route: Route, result: dict[str, Any], body: dict[str, Any] | None) -> dict[str, Any]:
    names = [part[1:-1] for part in route.path.split("/") if part.startswith("{")]
    parameters: list[dict[str, Any]] = [
        {
            "name": name,
            "in": "path",
            "required": True,
            "schema": {"type": "string"},
            "description": _path_param(name, last=name == names[-1]),
        }
        for name in names
    ]
    parameters += [
        {
            "name": p.name,
            "in": "query",
            "required": p.required,
            "schema": {"type": p.kind},
            "description": p.description,
        }
        for p in route.query
    ]
    media = "application/jsonl" if route.lines else "application/json"
    shown = dict(result)
    if route.wire:
        media, shown = _WIRE, _wire_schema(f"The answer to {route.path.rsplit('/', 1)[1]}.")
    if route.lines:
        shown = {
            "description": 'One JSON value per line (a last line {"error": …} if the stream failed).',
            **result,
        }
    headers = {name: {"schema": {"type": "string"}} for name in route.headers}
    success: dict[str, Any] = {
        "description": _STATUS_TEXT.get(route.status, "OK"),
        "content": {media: {"schema": shown}},
    }
    if headers:
        success["headers"] = headers
    responses = {str(route.status): success}
    if route.status == 201:
        responses["200"] = {
            "description": "Nothing changed: nothing was written (the tip as it was).",
            "content": {media: {"schema": shown}},
        }
    codes = ["400", "401", "403", "404"]
    if route.role != "read" or route.body is not None or route.wire:
        codes += ["409", "413"]
    if route.path.endswith("/nodes/{id}") or route.path.endswith("/blame/{id}"):
        codes.append("410")
    if route.path.endswith("/commits") and route.method == "POST":
        codes.append("412")
    if route.role != "read":
        codes.append("507")
    codes += _BOUNDS
    responses.update(_errors(*codes))
    operation: dict[str, Any] = {
        "summary": route.summary,
        "operationId": f"{route.method.lower()}_{route.handler.__name__.lstrip('_')}_{len(names)}",
        "parameters": parameters,
        "responses": responses,
        "x-mnemo-role": route.role,
    }
    if route.path.endswith("/commits") and route.method == "POST":
        parameters.append(
            {
                "name": "If-Match",
                "in": "header",
                "required": False,
                "schema": {"type": "string"},
                "description": 'The tip the client read ("ID", an ETag of a read): the commit is made only '
                "if the branch is still there, else 412 and nothing is written.",
            }
        )
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    if route.wire:
        schema = _wire_schema("The step's request.")
        operation["requestBody"] = {"required": True, "content": {_WIRE: {"schema": schema}}}
    return operation


_WIRE = "application/vnd.msgpack"


def _wire_schema(what: str) -> dict[str, Any]:
    return {
        "type": "string",
        "format": "binary",
        "description": f"{what} A msgpack message of mnemosyne.admin.wire (remotes over HTTP: "
        "mnemo fetch, pull, push and clone speak it; see docs/serving.md).",
    }


def document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of the API."""
    results, components = schema_components([route.response for route in ROUTES] + [Token])
    bodies, inputs = schema_components(BODIES, output=False)
    body_of = dict(zip(BODIES, bodies, strict=True))
    paths: dict[str, dict[str, Any]] = {}
    for route, result in zip(ROUTES, results[: len(ROUTES)], strict=True):
        body = body_of[route.body] if route.body is not None else None
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route, result, body)
    public: dict[str, Any] = {"security": []}
    paths["/v1/health"] = {
        "get": {
            "summary": "Whether the server is up (no token needed).",
            "operationId": "health",
            "responses": {
                "200": {"description": "Up.", "content": {"application/json": {"schema": {"type": "object"}}}}
            },
            **public,
        }
    }
    readiness = {
        "type": "object",
        "properties": {"ready": {"type": "boolean"}, "reason": {"type": "string"}},
        "required": ["ready"],
    }
    paths["/v1/ready"] = {
        "get": {
            "summary": "Whether the server can serve: the store answers a read now (no token needed).",
            "operationId": "ready",
            "responses": {
                status: {"description": what, "content": {"application/json": {"schema": readiness}}}
                for status, what in (("200", "Ready."), ("503", "The store cannot be read (in 2 s)."))
            },
            **public,
        }
    }
    paths["/v1/openapi.json"] = {
        "get": {
            "summary": "This document (no token needed).",
            "operationId": "openapi",
            "responses": {
                "200": {
                    "description": "OpenAPI 3.1.",
                    "content": {"application/json": {"schema": {"type": "object"}}},
                }
            },
            **public,
        }
    }
    paths["/v1/whoami"] = {
        "get": {
            "summary": "The token the request carries: id, name, tenant, role and expiry (never its text).",
            "operationId": "whoami",
            "responses": {
                "200": {"description": "OK", "content": {"application/json": {"schema": results[-1]}}},
                **_errors("401"),
            },
        }
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Mnemosyne",
            "version": VERSION,
            "description": "Version-controlled agent memory over HTTP (mnemo serve). Bodies and results are "
            "the library's one JSON form; every request but /v1/health, /v1/ready and /v1/openapi.json needs "
            "'Authorization: Bearer TOKEN', a token reaching one tenant with one role (read, write, admin). "
            "MCP (streamable HTTP) is served at /mcp with the same tokens.",
        },
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "schemas": {**components, **inputs, "Error": _error_schema()},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }

"""Paths of the served API: an id (a branch name, a revision) in a path as users type it, or encoded."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemosyne.integrations.server.asgi import HttpError, match, segments_of
from mnemosyne.integrations.server.openapi import document

_segment = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="/"), min_size=1
)
_ids = st.lists(_segment, min_size=1, max_size=5).map("/".join)


@given(_ids, st.sampled_from(["nodes", "history", "blame"]), st.booleans())
def test_an_id_in_a_path_may_keep_its_slashes(node_id, where, encoded):
    sent = quote(node_id, safe="" if encoded else "/")
    route, params = match("GET", segments_of(f"/v1/tenants/acme/{where}/{sent}".encode()))
    assert route.path == "/v1/tenants/{tenant}/" + where + "/{id}"
    assert params == {"tenant": "acme", "id": node_id}


@given(_ids)
def test_a_branch_name_too_and_for_deleting(name):
    for method in ("GET", "DELETE"):
        route, params = match(
            method, segments_of(f"/v1/tenants/acme/branches/{quote(name, safe='/')}".encode())
        )
        assert (route.method, params["name"]) == (method, name)


def test_paths_without_a_trailing_id_keep_their_shape():
    with pytest.raises(HttpError) as refused:
        match("GET", segments_of(b"/v1/tenants/acme/log/extra"))
    assert refused.value.status == 404
    route, params = match("GET", segments_of(b"/v1/tenants/acme/facts/mira/city"))
    assert params == {"tenant": "acme", "subject": "mira", "predicate": "city"}
    route, _ = match("GET", segments_of(b"/v1/tenants/acme/nodes"))
    assert route.path.endswith("/nodes")


def test_the_openapi_document_says_so():
    parameters = document()["paths"]["/v1/tenants/{tenant}/nodes/{id}"]["get"]["parameters"]
    said = next(p for p in parameters if p["name"] == "id")["description"]
    assert "%2F" in said and "nodes/mem/0" in said


def test_the_openapi_document_names_the_answers_of_the_servers_bounds():
    for path, methods in document()["paths"].items():
        if path.startswith("/v1/tenants/"):
            for operation in methods.values():
                assert {"408", "429", "431", "503"} <= set(operation["responses"]), path

"""``mnemo serve``: one store over HTTP, for many agents at once.

- **API.** HTTP/JSON under ``/v1/tenants/{tenant}/…`` (ids in paths
  percent-encoded, ``/`` as ``%2F``): commits, reads, history, blame, diffs,
  facts, search and context, verification, branches and merges, erasure.
  Bodies are the library's one JSON form; errors one JSON shape naming the
  error's kind and the command line's exit code; ``/v1/openapi.json`` describes
  it all, from the same types. See :mod:`.routes`.
- **Tokens.** Every request but ``/v1/health``, ``/v1/ready``, ``/v1/openapi.json``
  and ``/metrics`` (with ``--metrics``) carries
  ``Authorization: Bearer TOKEN``: a token of the store (``mnemo token create``)
  reaches one tenant with one role (read, write, admin). See :mod:`.asgi`.
- **Watching.** ``/v1/ready`` (the store answers), ``/metrics`` in Prometheus'
  text format (``--metrics``), a JSON access log. See :mod:`.metrics`.
- **MCP.** The tools of ``mnemo mcp``, over streamable HTTP at ``/mcp``, behind
  the same tokens. See :mod:`.mcp_http`.

A face, as the command line is: it parses, calls ``Repo``, renders. Needs the
``serve`` extra (uvicorn; the MCP SDK for ``/mcp``).
"""

from mnemosyne.integrations.server.serving import ServedApp, build_app

__all__ = ["ServedApp", "build_app"]

"""``mnemo ui``: see the memory in a browser, served on the loopback address until interrupted.

The viewer itself is :mod:`mnemosyne.integrations.viewer`; this command opens
the store read-only as every reading command does (``--repo``, ``--tenant``),
binds 127.0.0.1 (a free port unless told), prints the address and serves. The
``ui`` extra (Starlette, uvicorn, Jinja2) is imported here, when the command
runs, never when ``mnemo`` starts.
"""

import errno
import os
import socket
import webbrowser
from typing import Annotated

import typer

from mnemosyne import InvalidInput

from .state import EMBEDDER_ENV, state

HOST = "127.0.0.1"
"""Loopback only: the viewer shows every memory of the store to whoever can reach it."""

_UI_MODULES = {"starlette", "uvicorn", "jinja2", "markupsafe", "anyio", "h11", "click"}


def _bind(port: int) -> socket.socket:
    """A listening socket on the loopback address (port 0: any free one)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((HOST, port))
    except OSError as error:
        sock.close()
        if error.errno == errno.EADDRINUSE:
            raise InvalidInput(
                f"port {port} on {HOST} is in use: choose another with --port, or omit it"
            ) from None
        if error.errno == errno.EACCES:
            raise InvalidInput(f"port {port} on {HOST} needs privileges: choose one above 1023") from None
        raise
    sock.listen(128)
    return sock


def ui(
    ctx: typer.Context,
    port: Annotated[
        int,
        typer.Option(
            "--port", min=0, max=65535, help="The port to serve on (default: a free one).", show_default=False
        ),
    ] = 0,
    open_browser: Annotated[
        bool, typer.Option("--open", help="Open the viewer in the default web browser.")
    ] = False,
) -> None:
    """Browse the store in a web browser: log, commits, memories, facts, search (read-only).

    Serves on 127.0.0.1 only and prints the address; Ctrl-C stops it. Pages
    read the store afresh on each request, so commits made meanwhile appear on
    reload. Every page takes ?tenant= and ?branch= (default: --tenant, or the
    default tenant, and the current branch). Nothing is written, no script
    runs in the pages, and nothing is fetched from another site. It needs the
    'ui' extra: pip install 'mnemosyne[ui]'.
    """
    settings = state(ctx)
    try:
        import uvicorn

        from mnemosyne.integrations.viewer import build_app
    except ModuleNotFoundError as error:
        if (error.name or "").partition(".")[0] not in _UI_MODULES:
            raise
        raise InvalidInput(
            f"mnemo ui needs the 'ui' extra ({error.name} is missing): pip install 'mnemosyne[ui]'"
        ) from None
    repo = settings.open(ctx, readonly=True, embeds=True)
    sock = _bind(port)
    bound = sock.getsockname()[1]
    app = build_app(repo, port=bound, host=HOST, embedder=os.environ.get(EMBEDDER_ENV) or None)
    url = f"http://{HOST}:{bound}/"
    typer.echo(url)
    if open_browser:
        webbrowser.open(url)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        # uvicorn stops gracefully on Ctrl-C, then raises it again: the user asked to stop.
        pass
    finally:
        sock.close()

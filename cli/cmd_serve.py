"""``mnemo serve``: one long-running server over one store, for many agents, until stopped.

The application is :mod:`mnemosyne.integrations.server` (the HTTP/JSON API under
``/v1`` and MCP at ``/mcp``); this command opens the store (``--repo``), refuses a
non-loopback address while the store has no token, binds the socket itself (so
a port in use is one line, and ``--port 0`` picks a free one), says where it
listens on stderr, and runs uvicorn until SIGINT or SIGTERM, then closes the
store. The ``serve`` extra (uvicorn; the MCP SDK for ``/mcp``) is imported
here, when the command runs, never when ``mnemo`` starts.
"""

import ctypes
import errno
import ipaddress
import json
import os
import re
import signal
import socket
import sys
from datetime import UTC, datetime
from types import FrameType
from typing import Annotated

import typer

from mnemosyne import InvalidInput, MnemoError, Store
from mnemosyne.integrations.server.limits import BACKLOG, Limits
from mnemosyne.model.defaults import DEFAULT_TENANT

from .render import note
from .state import EMBEDDER_ENV, index_cache, state

_SERVE_MODULES = {"uvicorn", "httptools", "h11", "click", "anyio", "sniffio", "idna"}
_SIZE = re.compile(r"(\d+)([KMG]?)i?B?", re.IGNORECASE)
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


_M_ARENA_MAX = -8
"""glibc's ``mallopt`` parameter for the most malloc arenas (``malloc.h``)."""


def _fewer_malloc_arenas() -> None:
    """Cap glibc's malloc arenas at 2 in this process, before the worker threads start.

    glibc gives each thread that allocates an arena of its own (up to 8 per core)
    and keeps what is freed there: with dozens of worker threads each building a
    search's arrays in turn, the server's memory grew to twice its size after
    warm-up within a minute of load (1.3 times with two arenas; bench/serve_load.py).
    ``MALLOC_ARENA_MAX``, when set, is the user's choice and is left alone.
    """
    if not sys.platform.startswith("linux") or "MALLOC_ARENA_MAX" in os.environ:
        return
    try:
        ctypes.CDLL(None).mallopt(_M_ARENA_MAX, 2)
    except (OSError, AttributeError):  # not glibc (musl has no arenas to cap)
        pass


def _size(text: str) -> int:
    """A byte count such as ``8M``, ``512K``, ``1G`` or ``1000000``."""
    found = _SIZE.fullmatch(text.strip())
    if found is None or int(found.group(1)) == 0:
        raise InvalidInput(f"--max-body: {text!r} is not a size (e.g. 8M, 512K, 1G, or bytes)")
    return int(found.group(1)) * _UNITS[found.group(2).upper()]


def _address(host: str) -> tuple[socket.AddressFamily, str]:
    """The family and numeric address ``host`` names (``localhost`` is loopback)."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as error:
        raise InvalidInput(f"--host {host!r}: cannot resolve it ({error})") from None
    family, _, _, _, sockaddr = infos[0]
    return family, str(sockaddr[0])


def _is_loopback(address: str) -> bool:
    return ipaddress.ip_address(address.split("%")[0]).is_loopback


def _bind(family: socket.AddressFamily, address: str, port: int) -> socket.socket:
    """A listening socket (port 0: any free one)."""
    # IPPROTO_TCP named, so asyncio sets TCP_NODELAY on each connection (it skips proto 0), and set
    # here too: with Nagle on, a kept-alive client waits out a delayed ACK (~40 ms) per request.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((address, port))
    except OSError as error:
        sock.close()
        if error.errno == errno.EADDRINUSE:
            raise InvalidInput(f"port {port} on {address} is in use: choose another with --port") from None
        if error.errno == errno.EACCES:
            raise InvalidInput(f"port {port} on {address} needs privileges: choose one above 1023") from None
        if error.errno == errno.EADDRNOTAVAIL:
            raise InvalidInput(f"{address} is not an address of this machine") from None
        raise
    sock.listen(BACKLOG)
    return sock


def _refusals_json(line: str) -> None:
    """A connection refused before any request (431, 408, 503), in the JSON access log: one object too."""
    note(json.dumps({"refused": line}, ensure_ascii=True))


def serve(
    ctx: typer.Context,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            metavar="ADDRESS",
            help="The address to listen on; one that is not loopback needs tokens in the store.",
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option("--port", metavar="PORT", min=0, max=65535, help="The port (0: a free one, printed)."),
    ] = 7777,
    max_body: Annotated[
        str,
        typer.Option("--max-body", metavar="SIZE", help="The largest request body taken (413 beyond)."),
    ] = "8M",
    access_log: Annotated[
        bool,
        typer.Option(
            "--access-log",
            help="Log each request on stderr (client, method, path, status, ms); never a token.",
        ),
    ] = False,
    access_log_format: Annotated[
        str,
        typer.Option(
            "--access-log-format",
            metavar="text|json",
            help="The access log's lines: text, or one JSON object each (implies --access-log).",
        ),
    ] = "",
    metrics: Annotated[
        bool,
        typer.Option(
            "--metrics",
            help="Count requests and serve them at /metrics in Prometheus' text format (no token asked; "
            "tenants hashed; see docs/serving.md).",
        ),
    ] = False,
    max_connections: Annotated[
        int,
        typer.Option(
            "--max-connections",
            metavar="N",
            min=1,
            help="Connections open at once (at most the open-files limit allows); "
            "a new one replaces the oldest idle one, else 503.",
        ),
    ] = Limits.max_connections,
    max_in_flight: Annotated[
        int,
        typer.Option(
            "--max-in-flight", metavar="N", min=1, help="Requests under way per token (429 beyond)."
        ),
    ] = Limits.max_in_flight,
    header_timeout: Annotated[
        float,
        typer.Option(
            "--header-timeout",
            metavar="SECONDS",
            min=0.1,
            help="Time to send a request's headers (408 beyond).",
        ),
    ] = Limits.header_timeout,
    body_timeout: Annotated[
        float,
        typer.Option(
            "--body-timeout", metavar="SECONDS", min=0.1, help="Time to send a request's body (408 beyond)."
        ),
    ] = Limits.body_timeout,
    idle_timeout: Annotated[
        int,
        typer.Option(
            "--idle-timeout",
            metavar="SECONDS",
            min=1,
            help="How long a kept-alive connection may wait for its next request.",
        ),
    ] = Limits.idle_timeout,
) -> None:
    """Serve the store over HTTP to many agents: a JSON API under /v1, MCP at /mcp.

    One process holds the store and its indexes warm for every client; each
    request is its own transaction, so commands and other processes can share
    the store meanwhile. Every request but /v1/health, /v1/ready,
    /v1/openapi.json and /metrics needs 'Authorization: Bearer TOKEN': make tokens with 'mnemo token create
    --tenant T --role read|write|admin'; each reaches one tenant. Listens on
    127.0.0.1 unless told otherwise, and refuses an address that is not
    loopback while the store has no token. Put TLS in front (a reverse proxy)
    before serving beyond this machine: see docs/serving.md.

    Bounded so that hostile clients cannot starve it: request headers up to
    64 KiB and 100 fields (431), the time to send headers and body (408),
    connections open at once, requests under way per token (429); see
    docs/serving.md.

    OpenTelemetry traces, with the 'otel' extra, when the standard OTEL_*
    variables ask for them (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_EXPORTER).

    Prints where it listens on stderr; SIGINT (Ctrl-C) or SIGTERM stops it
    cleanly (requests under way finish first). It needs the 'serve' extra:
    pip install 'mnemosyne[serve]'.
    """
    settings = state(ctx)
    if settings.tenant is not None:
        raise InvalidInput("mnemo serve serves every tenant (each token reaches its own): drop --tenant")
    limit = _size(max_body)
    if access_log_format not in ("", "text", "json"):
        raise InvalidInput(f"--access-log-format: {access_log_format!r} is not text or json")
    access_log = access_log or bool(access_log_format)
    limits = Limits(
        max_connections=max_connections,
        max_in_flight=max_in_flight,
        header_timeout=header_timeout,
        body_timeout=body_timeout,
        idle_timeout=idle_timeout,
    )
    try:
        import uvicorn

        from mnemosyne.integrations.server import build_app
        from mnemosyne.integrations.server.connections import Connections
    except ModuleNotFoundError as error:
        if (error.name or "").partition(".")[0] not in _SERVE_MODULES:
            raise
        raise InvalidInput(
            f"mnemo serve needs the 'serve' extra ({error.name} is missing): pip install 'mnemosyne[serve]'"
        ) from None
    family, address = _address(host)
    from mnemosyne.integrations.server import tracing

    # The standard OTEL_* variables: read here, where the environment is the command's to read.
    traced = tracing.Tracing(os.environ) if tracing.wanted(os.environ) else None
    path = settings.store_path()
    store = Store.open(path, readonly="auto", index_cache=index_cache(path))
    try:
        now = datetime.now(UTC)
        live = [token for token in store.tokens() if not token.expired(now)]
        if not _is_loopback(address) and not live:
            raise InvalidInput(
                f"refusing to serve on {host} (not a loopback address) while the store has no token: "
                "make one with 'mnemo token create --tenant T --role read|write|admin'"
            )
        logged = note if access_log else None
        app = build_app(
            store,
            host=host,
            max_body=limit,
            embedder=os.environ.get(EMBEDDER_ENV) or None,
            log=note,
            limits=limits,
            access_log=logged,
            json_log=access_log_format == "json",
            metrics=metrics,
            tracing=traced,
        )
    except BaseException:
        store.close()
        if traced is not None:
            traced.close()
        raise
    try:
        try:
            app.tenants.repo(DEFAULT_TENANT)  # warm, and a bad MNEMO_EMBEDDER refused now
        except ValueError as error:
            if isinstance(error, MnemoError):
                raise
            raise InvalidInput(f"{EMBEDDER_ENV}: unknown embedder {app.tenants.embedder!r}") from None
        sock = _bind(family, address, port)
        _fewer_malloc_arenas()
        shown = f"[{address}]" if family == socket.AF_INET6 else address
        bound = sock.getsockname()[1]
        connections = Connections(limits, _refusals_json if access_log_format == "json" else logged)
        if app.metrics is not None:
            app.metrics.open_connections = lambda: len(connections.open)
        config = uvicorn.Config(
            app,
            http=connections.protocol,  # type: ignore[arg-type]  # a factory, called as the class would be
            log_level="warning",
            access_log=False,  # the application logs each request itself (--access-log)
            lifespan="on",
            ws="none",  # no WebSocket route: its libraries would only lengthen start-up
            timeout_graceful_shutdown=5,
            timeout_keep_alive=limits.idle_timeout,
            backlog=BACKLOG,
            server_header=False,
        )
        server = uvicorn.Server(config)

        def stop(signum: int, frame: FrameType | None) -> None:
            server.should_exit = True

        # Set before saying where it listens: a signal from then on stops the server cleanly,
        # whether it comes before uvicorn takes the signals over or after (uvicorn raises
        # the one it caught again once it has shut down).
        previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            if store.readonly:
                note(f"warning: {store.where} is read-only here: writes are refused")
            if not live:
                note("warning: the store has no token yet: every request is refused (mnemo token create)")
            base = f"http://{shown}:{bound}"
            note(f"serving {store.where} on {base}/v1 (MCP: {base}/mcp); Ctrl-C stops")
            server.run(sockets=[sock])
        except KeyboardInterrupt:
            pass  # asked to stop; uvicorn has finished the requests under way
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            sock.close()
        note("stopped")
    finally:
        app.close()

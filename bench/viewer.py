"""mnemo ui on a large store: time to first byte and full load of the log and a memory page.

The viewer runs under uvicorn in a thread on a loopback socket, as ``mnemo ui``
serves it; requests go over HTTP (one connection per request, as a browser's
first visit). Call ``bench_viewer(root)`` from bench/run.py, or run this file:

    python bench/viewer.py [--commits 10000] [--memories 100000]
"""

from __future__ import annotations

import argparse
import http.client
import re
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path

from harness import make_node, node_id, row

from mnemosyne import Node, Repo

TARGET_MS = 100.0
BUSY = "bench/busy/memory"


def _build(path: Path, commits: int, memories: int) -> str:
    """``commits`` commits writing ``memories`` memories in all; returns an id written many times."""
    per = max(memories // commits, 1)
    with Repo.init(path, sync=False) as repo:
        for c in range(commits):
            first = c * per
            nodes = [make_node(i % memories) for i in range(first, first + per)]
            nodes.append(Node(id=BUSY, content=f"version {c}\nline two"))  # one memory with a long history
            repo.commit(nodes, message=f"step {c}: {per} memories", author="bench")
    return BUSY


def _get(port: int, path: str) -> tuple[float, float, int]:
    """(seconds to the first byte of the body's headers, seconds to the last byte, status)."""
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})
    answer = conn.getresponse()
    first = time.perf_counter() - started
    answer.read()
    full = time.perf_counter() - started
    conn.close()
    return first, full, answer.status


def _next(port: int, path: str) -> str:
    """The address of the page a log page links as rel=next."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})
    html = conn.getresponse().read().decode()
    conn.close()
    found = re.search(r'<link rel="next" href="([^"]+)"', html)
    assert found is not None, "the first page links no next page"
    return found.group(1).replace("&amp;", "&")


def bench_viewer(root: Path, commits: int = 10_000, memories: int = 100_000, runs: int = 30) -> None:
    """Rows: median time to first byte and to full load of ``/`` and of a memory page."""
    import uvicorn

    from mnemosyne.integrations.viewer import build_app

    path = root / "viewer"
    t0 = time.perf_counter()
    busy = _build(path, commits, memories)
    row("viewer: build the store (s)", f"{commits}c", f"{time.perf_counter() - t0:.1f}")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    with Repo.open(path, readonly=True) as repo:
        server = uvicorn.Server(
            uvicorn.Config(build_app(repo, port=port), log_level="warning", access_log=False, lifespan="off")
        )
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.01)
        try:
            pages = {
                "log /": "/",
                "log next page": _next(port, "/"),
                "memory page": f"/node/{node_id(memories // 2)}",
                f"memory of {commits} versions": f"/node/{busy}",
            }
            for name, url in pages.items():
                for _ in range(3):
                    _get(port, url)  # warm: templates compiled, pages cached by the OS
                firsts, fulls = [], []
                for _ in range(runs):
                    first, full, status = _get(port, url)
                    assert status == 200, (url, status)
                    firsts.append(first * 1e3)
                    fulls.append(full * 1e3)
                ttfb, load = statistics.median(firsts), statistics.median(fulls)
                row(f"viewer: {name} first byte (median ms)", f"{memories}m", f"{ttfb:.1f}")
                # A memory with thousands of versions costs what history and blame cost
                # (O(versions) in the library): measured, without the page target.
                aimed = not name.startswith("memory of")
                row(
                    f"viewer: {name} full load (median ms)",
                    f"{memories}m",
                    f"{load:.1f}",
                    f"<= {TARGET_MS:.0f}" if aimed else "",
                    load <= TARGET_MS if aimed else None,
                )
        finally:
            server.should_exit = True
            thread.join(timeout=30)
            sock.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=10_000)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bench_viewer(Path(tmp), args.commits, args.memories, args.runs)

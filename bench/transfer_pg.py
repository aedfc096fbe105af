"""Push and fetch with a PostgreSQL store on the other side: objects/s and round trips per commit.

A push of ``commits`` commits (8 new nodes each) from an LMDB store into an empty
PostgreSQL store, then a fetch of them back from it into an empty LMDB store by a
handle that has read none of them (as ``mnemo fetch`` in a new process). Round
trips are counted on every PostgreSQL handle of this process (the transfer opens
its own). No tool does this beside us: the rows are for what a user pays, and the
round trips per commit say what a network between them would add. Import it
with ``tests`` on the path, as ``postgres`` does (the counter is the tests' own).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from harness import row
from support.round_trips import RoundTrips
from sync import _history

from mnemosyne import Repo


def bench_transfers_pg(server: Any, root: Path, commits: int = 1_000) -> None:
    url = server.url("transfers")
    Repo.init(url).close()
    with _history(root / "pg-push-local", commits, 8) as local:
        local.store.add_remote("pg", url)
        with RoundTrips() as trips:
            start = time.perf_counter()
            pushed = local.push("pg").tenants[0]
            elapsed = time.perf_counter() - start
    row(
        "postgres: push into a PostgreSQL store, objects/s; round trips per commit",
        f"{pushed.commits} commits, {pushed.objects} objects",
        f"{pushed.objects / elapsed:,.0f}; {trips.count / pushed.commits:.2f}",
    )
    with Repo.init(root / "pg-fetch-local", sync=False) as fresh:
        fresh.store.add_remote("pg", url)
        with RoundTrips() as trips:
            start = time.perf_counter()
            fetched = fresh.fetch("pg").tenants[0]
            elapsed = time.perf_counter() - start
    row(
        "postgres: fetch from a PostgreSQL store (a handle new to its history), objects/s; round trips per commit",
        f"{fetched.commits} commits, {fetched.objects} objects",
        f"{fetched.objects / elapsed:,.0f}; {trips.count / fetched.commits:.2f}",
    )

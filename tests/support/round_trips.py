"""Round trips to the PostgreSQL server from every handle of this process, counted (tests and bench)."""

from __future__ import annotations

from typing import Any

from mnemosyne.store.kv.postgres_kv import PostgresKV


class RoundTrips:
    """Counts every handle's round trips while entered (a transfer opens handles of its own).

    Attributes:
        count: round trips so far.
    """

    def __enter__(self) -> RoundTrips:
        self.count = 0
        self._waited = waited = PostgresKV.waited

        def counting(kv: Any) -> None:
            self.count += 1
            waited(kv)

        PostgresKV.waited = counting  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        PostgresKV.waited = self._waited  # type: ignore[method-assign]

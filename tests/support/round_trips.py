"""Round trips to the PostgreSQL server from every handle of this process, counted in a test."""

from __future__ import annotations

import pytest

from mnemosyne.store.kv.postgres_kv import PostgresKV


def count_round_trips(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count every handle's round trips from now on (a transfer opens handles of its own).

    Returns a one-item list the count goes into, read as ``trips[0]`` (set it to 0 to start again).
    """
    trips = [0]
    waited = PostgresKV.waited

    def counting(self: PostgresKV) -> None:
        trips[0] += 1
        waited(self)

    monkeypatch.setattr(PostgresKV, "waited", counting)
    return trips

"""The injected clock most tests use: each reading returns the current time, then steps it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

T0 = datetime(2026, 6, 1, 9, tzinfo=UTC)


class Clock:
    """A settable test clock; ``last`` is the last reading (None before the first)."""

    def __init__(self, start: datetime = T0, step: timedelta = timedelta(seconds=1)) -> None:
        self.now = start
        self.step = step
        self.last: datetime | None = None

    def __call__(self) -> datetime:
        self.last = self.now
        self.now += self.step
        return self.last

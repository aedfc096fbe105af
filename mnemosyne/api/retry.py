"""Optimistic concurrency: re-run a read-modify-write that lost a race."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from mnemosyne.errors import InvalidInput, RefConflict

T = TypeVar("T")


def with_retry(
    fn: Callable[[], T],
    attempts: int = 10,
    base_delay: float = 0.002,
    max_delay: float = 0.2,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``fn`` until it does not raise :class:`RefConflict`, at most ``attempts`` times.

    ``fn`` should read what it needs, then commit with ``parent=`` the tip it read,
    so that a lost race raises ``RefConflict`` and the whole function runs again on
    the new tip. Waits grow exponentially with jitter between attempts.

    Args:
        fn: the read-modify-write to run.
        attempts: how many times to try before letting the last ``RefConflict`` out.
        base_delay: first wait, in seconds.
        max_delay: longest wait, in seconds.
        sleep: how to wait (injectable for tests).

    Returns:
        Whatever ``fn`` returns.

    Raises:
        InvalidInput: ``attempts`` is not a whole number of at least 1.
        RefConflict: every attempt lost its race.
    """
    if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 1:
        raise InvalidInput(f"attempts must be a whole number, at least 1 (got {attempts!r})")
    for attempt in range(attempts):
        try:
            return fn()
        except RefConflict:
            if attempt == attempts - 1:
                raise
            delay = min(max_delay, base_delay * (2**attempt))
            sleep(delay * (0.5 + random.random()))
    raise AssertionError("unreachable")

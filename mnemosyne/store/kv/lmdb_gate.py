"""The gate a handle's threads pass to open LMDB transactions, and a map resize waits at."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Gate:
    """Lets transactions run together but alone with a map resize.

    LMDB requires that no transaction of this process is open while the map size
    changes; threads sharing a handle pass through this gate.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active = 0
        self._resizing = False

    def enter(self) -> None:
        """Take a shared slot (waiting out a resize); :meth:`leave` gives it back.

        A pair of calls rather than a context manager: every transaction passes here.
        """
        with self._cond:
            while self._resizing:
                self._cond.wait()
            self._active += 1

    def leave(self) -> None:
        """Give a shared slot back."""
        with self._cond:
            self._active -= 1
            if self._resizing:  # only a resize waits for the slots to empty
                self._cond.notify_all()

    @contextmanager
    def released(self) -> Iterator[None]:
        """Step out of a shared slot for the duration of the block."""
        with self._cond:
            self._active -= 1
            self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                while self._resizing:
                    self._cond.wait()
                self._active += 1

    def idle_after_fork(self) -> bool:
        """Whether no transaction was open when the process forked.

        Read in the child alone, without the condition's lock: a thread the child
        does not have may have held it.
        """
        return self._active == 0 and not self._resizing

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the gate alone for the block: every slot empty, none taken meanwhile (a resize)."""
        with self._cond:
            while self._resizing:
                self._cond.wait()
            self._resizing = True
            while self._active:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._resizing = False
                self._cond.notify_all()

"""Letting go of a mapped file's pages: they leave the process's resident memory, not the cache.

LMDB maps its data file read-only and shared; every page a read touches stays
resident in the process (counted in its RSS as file pages) until the mapping
goes. A pass over most of a large store (building an approximate index reads
every vector block: 1.5 GB at a million 384-wide vectors) would leave all of it
there. ``madvise(MADV_DONTNEED)`` over a read-only shared file mapping drops
the process's page-table entries only: the pages stay in the operating system's
cache, and a later read maps them again (a minor fault), with the file's
current contents. Nothing is lost, and nothing is written.
"""

from __future__ import annotations

import os
import sys
from typing import Any

_MADV_DONTNEED = 4
"""Linux's value: only Linux is asked (it lists a process's mappings in /proc/self/maps)."""

_libc: Any = None
"""The C library through ctypes, loaded at the first call: ctypes.util imports modules
(tempfile among them) that a process which never builds an index should not load."""


def let_go(path: str) -> int:
    """Drop this process's read-only shared mappings of file ``path`` from its resident memory.

    Returns:
        Bytes of mappings advised (0 where the system does not list its
        mappings, or none is of that file).
    """
    global _libc
    if not sys.platform.startswith("linux"):
        return 0
    real = os.path.realpath(path)
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return 0
    spans = []
    for line in lines:
        parts = line.split(None, 5)
        # Only read-only shared mappings (LMDB's without its write map): dropping a
        # private or writable mapping's pages could drop changes.
        if len(parts) == 6 and parts[1] == "r--s" and parts[5] == real:
            start, end = (int(part, 16) for part in parts[0].split("-"))
            spans.append((start, end - start))
    if not spans:
        return 0
    if _libc is None:
        import ctypes
        import ctypes.util

        _libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        _libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        _libc.madvise.restype = ctypes.c_int
    advised = 0
    for start, length in spans:
        if _libc.madvise(start, length, _MADV_DONTNEED) == 0:
            advised += length
    return advised

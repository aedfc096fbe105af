"""A small file system of a test's own, to fill up: a tmpfs, or ext4 on a loop device.

Mounting needs root. Where the mount fails (not root, no tmpfs, no loop devices,
no ``mkfs.ext4``), the test is :func:`~support.components.unavailable`: it fails
under CI and is skipped elsewhere. The two kinds fail differently when full (a
short write on both; tmpfs also kills a process that touches an unallocated page
of a shared mapping with SIGBUS), which is why the tests run on both.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from support.components import unavailable

KINDS = ("tmpfs", "ext4")


def _run(*command: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise OSError(f"{' '.join(command)}: {done.stderr.strip() or done.returncode}")


@contextmanager
def mounted(kind: str, parent: Path, size_mib: int) -> Iterator[Path]:
    """A fresh file system of ``size_mib`` MiB mounted under ``parent``, unmounted afterwards."""
    where = parent / f"{kind}-disk"
    where.mkdir()
    image = parent / f"{kind}.img"
    if os.geteuid() != 0:
        unavailable(f"mounting a {kind} needs root")
    try:
        if kind == "tmpfs":
            _run("mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(where))
        else:
            if shutil.which("mkfs.ext4") is None:
                unavailable("mkfs.ext4 is not installed")
            with open(image, "wb") as handle:
                handle.truncate(size_mib << 20)
            _run("mkfs.ext4", "-q", "-F", str(image))
            _run("mount", "-o", "loop", str(image), str(where))
    except OSError as exc:
        unavailable(f"cannot mount a {kind}: {exc}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=60)
        image.unlink(missing_ok=True)


@pytest.fixture(params=KINDS)
def small_disk(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """An empty 4 MiB tmpfs, or an 8 MiB ext4 (about 6 MiB free), for one test."""
    kind = request.param
    with mounted(kind, tmp_path, 4 if kind == "tmpfs" else 8) as where:
        yield where


def fill(disk: Path, leave: int = 0) -> Path:
    """Write a file on ``disk`` until the disk is full, then give back about ``leave`` bytes.

    Returns:
        The filler file (delete it to give the space back).
    """
    filler = disk / "filler"
    block = bytes(1 << 16)
    with open(filler, "wb", buffering=0) as handle:
        while True:
            try:
                handle.write(block)
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                break
        # A smaller write may still fit in the last part-filled block.
        for size in (4096, 512, 1):
            while True:
                try:
                    handle.write(bytes(size))
                except OSError:
                    break
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler

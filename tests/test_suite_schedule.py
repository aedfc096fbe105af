"""The suite keeps both workers busy to the end and its temporary files off the disk.

``make unit`` is ``pytest -n 2 --dist loadfile``: the files run longest first
(``support.schedule``) in the collection's order, which xdist must not redo by
number of tests; temporary files go to a roomy tmpfs (``support.scratch``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import TESTS, schedule, scratch


@dataclass(frozen=True)
class Item:
    nodeid: str


def test_files_go_longest_first_each_in_its_own_order() -> None:
    items = [
        Item("tests/test_a.py::test_1"),
        Item("tests/test_a.py::test_2"),
        Item("tests/test_b.py::test_1[x]"),
        Item("tests/test_c.py::TestC::test_1"),
        Item("tests/test_c.py::TestC::test_2"),
        Item("tests/test_d.py::test_1"),
        Item("tests/test_e.py::test_1"),
    ]
    seconds = {"test_a.py": 1.0, "test_b.py": 9.0, "test_d.py": 1.0}
    # test_c.py is not listed: two tests at SECONDS_PER_TEST each; test_e.py one.
    ordered = [item.nodeid for item in schedule.longest_first(items, seconds)]
    assert ordered == [
        "tests/test_b.py::test_1[x]",
        "tests/test_a.py::test_1",  # ties keep the collection's order: a before d
        "tests/test_a.py::test_2",
        "tests/test_d.py::test_1",
        "tests/test_c.py::TestC::test_1",
        "tests/test_c.py::TestC::test_2",
        "tests/test_e.py::test_1",
    ]
    assert sorted(ordered) == sorted(item.nodeid for item in items)  # nothing dropped


def test_this_session_runs_its_files_longest_first(request: pytest.FixtureRequest) -> None:
    options = request.config.option
    if getattr(options, "failedfirst", False) or getattr(options, "newfirst", False):
        return  # --ff and --nf put the tests they pick first, as asked
    seconds = schedule.recorded()
    files = [schedule.file_of(item.nodeid) for item in request.session.items]
    runs = [name for i, name in enumerate(files) if i == 0 or files[i - 1] != name]
    assert len(runs) == len(set(runs)), "a file's tests are not together"
    counts = {name: files.count(name) for name in runs}
    costs = [seconds.get(name, counts[name] * schedule.SECONDS_PER_TEST) for name in runs]
    assert costs == sorted(costs, reverse=True)


def test_xdist_keeps_the_collection_order(pytestconfig: pytest.Config) -> None:
    """Its default reorders ``--dist loadfile``'s files by number of tests, undoing the above."""
    assert getattr(pytestconfig.option, "loadscopereorder", False) is False


def test_the_recorded_durations_are_of_test_files_that_exist() -> None:
    recorded = json.loads(schedule.DURATIONS.read_text())
    assert len(recorded) > 50  # most of the suite is listed
    assert [name for name in recorded if not (TESTS / name).is_file()] == []
    assert all(isinstance(s, int | float) and s >= 0 for s in recorded.values())


def test_durations_are_measured_from_a_junit_report(tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_a" name="test_1" time="0.25"/>'
        '<testcase classname="tests.test_b.TestB" name="test_1" time="2.0"/>'
        '<testcase classname="tests.test_a" name="test_2" time="0.5"/>'
        "</testsuite></testsuites>"
    )
    assert list(schedule.measure(report).items()) == [("test_b.py", 2.0), ("test_a.py", 0.8)]


def test_temporary_files_of_this_run_share_one_place_with_its_processes(tmp_path: Path) -> None:
    """A process a test starts (a ``mnemo``, a writer) writes where the test's own files are."""
    here = Path(tempfile.gettempdir()).resolve()
    assert tmp_path.resolve().is_relative_to(here)
    child = subprocess.run(
        [sys.executable, "-c", "import tempfile; print(tempfile.gettempdir())"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(child.stdout.strip()).resolve() == here


def test_a_roomy_tmpfs_takes_the_temporary_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TMPDIR", raising=False)
    stats = os.statvfs(scratch.SHM) if scratch.SHM.is_dir() else None
    mounts = Path("/proc/mounts").read_text() if Path("/proc/mounts").exists() else ""
    roomy_tmpfs = (
        stats is not None
        and f" {scratch.SHM} tmpfs " in mounts
        and stats.f_bavail * stats.f_frsize >= scratch.MIN_FREE
        and os.access(scratch.SHM, os.W_OK)
    )
    assert scratch.ram_tmpdir() == (scratch.SHM if roomy_tmpfs else None)


def test_a_chosen_tmpdir_or_a_small_tmpfs_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", "/var/tmp")
    assert scratch.ram_tmpdir() is None
    monkeypatch.delenv("TMPDIR")
    monkeypatch.setattr(scratch, "MIN_FREE", 2**62)  # more than any machine has: too small
    assert scratch.ram_tmpdir() is None


def test_disk_tmp_path_is_where_the_files_would_have_gone_without_the_tmpfs(
    disk_tmp_path: Path, tmp_path: Path
) -> None:
    assert disk_tmp_path.is_dir() and not any(disk_tmp_path.iterdir())
    assert disk_tmp_path.resolve().is_relative_to(scratch.disk_tmpdir().resolve())
    if os.environ.get(scratch.DISK_ENV):  # this run moved its files to the tmpfs
        assert tmp_path.resolve().is_relative_to(scratch.SHM)
        assert not disk_tmp_path.resolve().is_relative_to(scratch.SHM)

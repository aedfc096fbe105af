"""The order test files run in: the longest first, so two workers finish together.

``make unit`` runs ``pytest -n 2 --dist loadfile``: each file is one unit of work,
and pytest-xdist hands the units out in the order the collection lists them
(``tests/conftest.py`` turns off xdist's own reordering, which goes by number of
tests, not by time: a file of two crash tests came among the last and left the
other worker idle for its whole length). Sorting the files longest first is the
classic longest-processing-time rule: whatever file comes last is short, so the
workers' end times differ by seconds at most.

The cost of a file is its time in ``durations.json`` beside this module (seconds on
one core, from a plain sequential run); a file not listed there (a new one) is
estimated at :data:`SECONDS_PER_TEST` a test. Refresh the list now and then::

    .venv/bin/pytest -p no:cacheprovider --junitxml=/tmp/suite.xml
    .venv/bin/python tests/support/schedule.py /tmp/suite.xml

Only the order changes: every test still runs, within a file in the order written.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, TypeVar

DURATIONS = Path(__file__).resolve().with_name("durations.json")
"""Seconds each test file took on one core: ``{"test_docs.py": 19.8, ...}``."""

SECONDS_PER_TEST = 0.1
"""The estimate for a test of a file ``durations.json`` does not list (about the suite's mean)."""


class _Item(Protocol):
    @property
    def nodeid(self) -> str: ...


T = TypeVar("T", bound=_Item)


def file_of(nodeid: str) -> str:
    """The test file of a node id, by name: ``tests/test_x.py::test_y[1]`` -> ``test_x.py``."""
    return nodeid.split("::", 1)[0].rsplit("/", 1)[-1]


def recorded() -> dict[str, float]:
    """The recorded seconds of each test file (empty when the file is missing)."""
    try:
        data = json.loads(DURATIONS.read_text())
    except FileNotFoundError:
        return {}
    return {str(name): float(seconds) for name, seconds in data.items()}


def longest_first(items: Sequence[T], seconds: dict[str, float]) -> list[T]:
    """The items grouped by file, the files by cost (longest first), each file's items in order.

    Files of equal cost keep their collection order (the sort is stable).
    """
    counts: dict[str, int] = {}
    for item in items:
        counts[file_of(item.nodeid)] = counts.get(file_of(item.nodeid), 0) + 1
    rank = {name: i for i, name in enumerate(counts)}  # collection order of the files

    def cost(name: str) -> float:
        return seconds.get(name, counts[name] * SECONDS_PER_TEST)

    return sorted(items, key=lambda item: (-cost(file_of(item.nodeid)), rank[file_of(item.nodeid)]))


def measure(junit_xml: Path) -> dict[str, float]:
    """Seconds per test file from a JUnit XML report (``pytest --junitxml``), longest first."""
    totals: dict[str, float] = {}
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        parts = case.get("classname", "").split(".")
        name = next((p for p in parts if p.startswith("test_")), None)
        if name is not None:
            totals[f"{name}.py"] = totals.get(f"{name}.py", 0.0) + float(case.get("time") or 0)
    return {name: round(s, 1) for name, s in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))}


if __name__ == "__main__":
    DURATIONS.write_text(json.dumps(measure(Path(sys.argv[1])), indent=1) + "\n")
    print(f"wrote {DURATIONS}")

"""Which tier runs: every test (``make test``), or the fast tier (``make unit-fast``).

The fast tier leaves out the tests marked ``slow`` (``-m "not slow"``) and runs
the property tests it keeps on fewer examples: ``make unit-fast`` sets
``MNEMO_FAST_TESTS=1``, and a test whose settings say ``max_examples=examples(N)``
then runs a fifth of N (at least 5). Without it (``make test``, a plain
``pytest``) every property test runs all N.
"""

from __future__ import annotations

import os

FAST = os.environ.get("MNEMO_FAST_TESTS", "") not in ("", "0")
"""Whether this run is the fast tier."""


def examples(full: int) -> int:
    """How many examples a property test runs: ``full``, or a fifth of it (at least 5) in the fast tier."""
    return min(full, max(5, full // 5)) if FAST else full

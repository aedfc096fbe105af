"""Tests that need a component (PostgreSQL, Chromium, an optional extra) and cannot get it.

Under CI (env ``CI`` set) every component must be there: such a test fails. Elsewhere
(a laptop without the server package, say) it is skipped, saying what is missing.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest


def unavailable(what: str, *, module_level: bool = False) -> NoReturn:
    """Fail under CI, else skip: ``what`` is missing."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} (CI must have every component the tests use)", pytrace=False)
    pytest.skip(what, allow_module_level=module_level)


def need_module(name: str) -> ModuleType:
    """Import ``name`` (an optional extra's package); missing, :func:`unavailable`."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        unavailable(f"{name} is not installed ({error})", module_level=True)


POSTGRES = pytest.param("postgres", marks=pytest.mark.slow)
"""The PostgreSQL backend as a test parameter: its tests need the session's server, so they are slow."""

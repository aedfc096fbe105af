"""Defaults of the API, named once so every face shows and uses the same ones."""

from __future__ import annotations

from datetime import timedelta

DEFAULT_TENANT = "default"
"""The tenant every store is created with; it cannot be dropped."""

DEFAULT_BRANCH = "main"
"""The branch a new store (and a new tenant) starts on."""

DEFAULT_AUTHOR = "unknown"
"""The author recorded when a write names none."""

SEARCH_K = 10
"""Hits a search returns by default."""

CONTEXT_BUDGET = 1000
"""The token budget a context fills by default."""

CONTEXT_K = 50
"""How many of the best hits a context considers by default."""

GC_GRACE = timedelta(days=14)
"""How long an object must stay unreachable before gc removes it, by default."""

EXPIRED_REASON = "expired"
"""The reason ``forget_expired`` records when none is given."""

SETTINGS = {"embedder": "auto"}
"""The store's known settings and their defaults (``Store.config``)."""

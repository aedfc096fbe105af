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

SENSITIVITY_LEVELS = "public,internal,personal,restricted"
"""The sensitivity scale by default, least sensitive first (``max_sensitivity=``)."""

APPROXIMATE_FROM = 200_000
"""Vectors of one model from which semantic search ranks by an approximate index."""

SETTINGS = {
    "embedder": "auto",
    "recall.approximate_from": str(APPROXIMATE_FROM),
    "recall.require_allowed_for": "false",
    "recall.sensitivity_levels": SENSITIVITY_LEVELS,
    "recall.unlabeled_sensitivity": "internal",
}
"""The store's known settings and their defaults (``Store.config``).

``recall.require_allowed_for``: ``true`` leaves a memory without ``meta["allowed_for"]``
out of every search that names a use. ``recall.sensitivity_levels``: the ordered
scale ``max_sensitivity=`` reads. ``recall.unlabeled_sensitivity``: the level of a
memory without ``meta["sensitivity"]`` (not public, by default).
``recall.approximate_from``: how many vectors a model needs before semantic search
ranks them with an approximate index (a whole number, or ``off`` for exact always).
"""

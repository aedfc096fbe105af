"""Opening the store a LangGraph face works on, as LangGraph's own savers and stores do."""

from __future__ import annotations

from pathlib import Path

from mnemosyne import NotFound, Repo


def open_creating(path: str | Path, tenant: str) -> Repo:
    """The tenant ``tenant`` of the store at ``path``; the store and the tenant are created when absent."""
    try:
        return Repo.open(path, tenant=tenant, create=True)
    except NotFound:
        Repo.init(path).close()
        return Repo.open(path, tenant=tenant, create=True)

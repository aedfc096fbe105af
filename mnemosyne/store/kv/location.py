"""Telling a store URL from a directory path, and showing a URL without its password.

Kept apart from the PostgreSQL backend so that recognising a URL needs no
database driver: a URL must never be taken for a directory, with or without
the ``postgres`` extra installed.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, quote, urlencode, urlsplit

SCHEMES = ("postgresql://", "postgres://")
"""URL prefixes libpq accepts (and so do we), in any case."""


def is_postgres_url(location: object) -> bool:
    """Whether ``location`` is a PostgreSQL URL (``postgresql://`` or ``postgres://``)."""
    return isinstance(location, str) and location[:13].lower().startswith(SCHEMES)


def join_url(scheme: str, netloc: str, path: str, query: list[tuple[str, str]]) -> str:
    """Put a URL back together (not ``urlunsplit``: it drops the ``//`` of an empty host).

    Spaces are written ``%20``, never ``+``: libpq decodes ``%XX`` only and would
    read ``+`` as a plus (in ``options``, ``application_name``, a password).
    """
    tail = f"?{urlencode(query, safe='/', quote_via=quote)}" if query else ""
    return f"{scheme}://{netloc}{path}{tail}"


def shown_url(url: str) -> str:
    """``url`` as messages show it: any password, in the user part or the query, left out."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, _, hostport = netloc.rpartition("@")
        netloc = f"{user.split(':', 1)[0]}@{hostport}"
    query = [
        (key, "…" if key == "password" else value)
        for key, value in parse_qsl(parts.query, keep_blank_values=True)
    ]
    return join_url(parts.scheme, netloc, parts.path, query)

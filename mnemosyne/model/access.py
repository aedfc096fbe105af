"""Access tokens: who may reach a served store, in which tenant, and with which role.

A token lets an HTTP client (``mnemo serve``) act in one tenant with one role.
The roles nest: ``read`` reads (get, ls, log, history, blame, diff, facts,
search, context); ``write`` also writes (commits, verifications, branches,
merges); ``admin`` also erases (``forget``). The store keeps a keyed hash of
each token's secret, never the secret (see :mod:`mnemosyne.store.tokens`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, get_args

import msgspec

Role = Literal["read", "write", "admin"]
"""What a token may do, each role all that the one before it may."""

ROLES: tuple[str, ...] = get_args(Role)
"""The roles, least privileged first."""

TOKEN_PREFIX = "mnemo_"
"""How every token starts, so secret scanners and people can tell one at a glance."""


def allows(role: Role, needed: Role) -> bool:
    """Whether a token of ``role`` may do what needs ``needed`` (roles nest: admin ⊃ write ⊃ read)."""
    return ROLES.index(role) >= ROLES.index(needed)


class Token(msgspec.Struct, frozen=True, kw_only=True):
    """An access token as listed: everything but its secret, which the store never keeps.

    Attributes:
        id: its id, 12 hex digits (part of the token text, so not secret).
        name: the name given at creation, or None.
        tenant: the one tenant it reaches.
        role: ``read``, ``write`` or ``admin``.
        created_at: when it was created (the store's clock).
        expires_at: when it stops working, or None for never.
    """

    id: str
    name: str | None
    tenant: str
    role: Role
    created_at: datetime
    expires_at: datetime | None = None

    def expired(self, now: datetime) -> bool:
        """Whether the token no longer works at ``now``."""
        return self.expires_at is not None and self.expires_at <= now


class NewToken(msgspec.Struct, frozen=True, kw_only=True):
    """A token just created: the only time its secret text is known.

    Attributes:
        token: the text a client sends (``Authorization: Bearer <token>``);
            shown once, kept nowhere.
        id: its id (``mnemo token revoke ID``).
        name: its name, or None.
        tenant: the tenant it reaches.
        role: its role.
        created_at: when it was created.
        expires_at: when it stops working, or None for never.
    """

    token: str
    id: str
    name: str | None
    tenant: str
    role: Role
    created_at: datetime
    expires_at: datetime | None = None

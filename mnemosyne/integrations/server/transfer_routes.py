"""The routes of remotes over HTTP: one ``POST transfer/{step}`` per step of a fetch or a push.

Each step's body and answer are msgpack messages of :mod:`mnemosyne.admin.wire`;
the library's ``Repo.answer_transfer`` does the work, so these routes only name
the steps, the role each needs and what each does (docs/serving.md, "Remotes
over HTTP").
"""

from __future__ import annotations

from collections.abc import Callable

from mnemosyne.integrations.server.calls import TENANT, Call, Reply, Route
from mnemosyne.model.access import Role


def _transfer(step: str) -> Callable[[Call], Reply]:
    """The handler of one step of a fetch from this store or a push to it."""

    def handler(call: Call) -> Reply:
        return Reply(raw=call.repo.answer_transfer(step, call.body, author=call.author(None)))

    handler.__name__ = f"transfer_{step}"
    return handler


_STEPS: tuple[tuple[str, Role, str], ...] = (
    ("offer", "read", "Fetch: the branches, the commits the client lacks of them, the erasures it lacks."),
    ("plan", "read", "Fetch: the objects those commits add to their parents' trees, children first."),
    ("read", "read", "Fetch: objects' stored bytes, as many as fit in about 8 MiB (ask again for the rest)."),
    ("survey", "write", "Push: the tips this tenant has and the versions it erased."),
    ("lacking", "write", "Push: which of these commits and objects this tenant lacks."),
    ("redact", "admin", "Push: redaction records, applied first (erasure travels; an admin's right)."),
    ("store", "write", "Push: objects, each hashed on arrival, written in one transaction."),
    ("finish", "write", "Push: index the commits sent, then move the branch by compare-and-swap (409)."),
)
"""The steps of remotes over HTTP: name, role, summary (docs/serving.md, "Remotes over HTTP")."""

TRANSFER_ROUTES = tuple(
    Route("POST", f"{TENANT}/transfer/{step}", role, summary, _transfer(step), wire=True)
    for step, role, summary in _STEPS
)
"""``POST transfer/{step}``: msgpack messages of :mod:`mnemosyne.admin.wire` both ways."""

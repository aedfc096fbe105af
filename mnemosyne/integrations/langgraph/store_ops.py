"""The operations a :class:`~mnemosyne.integrations.langgraph.store.MnemosyneStore` takes, checked.

A batch is checked whole before any of it runs: a namespace that is not a tuple
of text labels, a key that is not text, a value that is not a map, a ttl past
about a thousand years, a negative limit or a bad filter is refused with
``InvalidInput``, and nothing of the batch is written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from langgraph.store.base import (
    GetOp,
    ListNamespacesOp,
    Op,
    PutOp,
    SearchOp,
    _validate_namespace,
    validate_op_namespace,
)

from mnemosyne import InvalidInput
from mnemosyne.integrations.langgraph.items import MAX_TTL_MINUTES, is_text
from mnemosyne.integrations.langgraph.namespaces import check_filter


def check_op(op: Op) -> None:
    """Refuse an operation LangGraph's types allow but the store cannot keep, before any is run.

    Raises:
        InvalidInput: what is wrong with it, in one line.
    """
    if not isinstance(op, GetOp | PutOp | SearchOp | ListNamespacesOp):
        raise InvalidInput(f"unknown store operation {type(op).__name__}")
    for namespace in (getattr(op, "namespace", None), getattr(op, "namespace_prefix", None)):
        if namespace is not None and not isinstance(namespace, tuple):
            raise InvalidInput(f"a namespace must be a tuple of labels, not {type(namespace).__name__}")
    validate_op_namespace(op)
    if isinstance(op, GetOp | PutOp) and not isinstance(op.key, str):
        raise InvalidInput(f"a key must be text, not {type(op.key).__name__}")
    for label in (*(getattr(op, "namespace", None) or ()), getattr(op, "key", "")):
        if isinstance(label, str) and not is_text(label):
            raise InvalidInput(f"namespace labels and keys must be valid UTF-8 text, not {label!r}")
    if isinstance(op, PutOp) and op.value is not None:
        _validate_namespace(op.namespace)
        if not isinstance(op.value, Mapping):
            raise InvalidInput(f"a value must be a map, not {type(op.value).__name__}")
        if op.ttl is not None and (
            not isinstance(op.ttl, int | float)
            or isinstance(op.ttl, bool)
            or not math.isfinite(op.ttl)
            or not 0 <= op.ttl <= MAX_TTL_MINUTES
        ):
            raise InvalidInput(
                f"ttl must be a number of minutes from 0 to {MAX_TTL_MINUTES} (about 1,000 years), "
                f"not {op.ttl!r}"
            )
    if isinstance(op, SearchOp | ListNamespacesOp):
        for name in ("limit", "offset"):
            number = getattr(op, name)
            if not isinstance(number, int) or isinstance(number, bool) or number < 0:
                raise InvalidInput(f"{name} must be a whole number, at least 0 (got {number!r})")
    if isinstance(op, SearchOp):
        check_filter(op.filter)

"""A LangGraph value as node content: its JSON form when it has an exact one, else the serializer's bytes.

A channel's value, a checkpoint's metadata, a pending write: the saver stores each
readably where it can (ADRs 33 and 61). A value *has a JSON form* when it is built
only of ``dict`` (text keys), ``list``, ``str``, ``int`` (64-bit), finite ``float``,
``bool`` and ``None``, exactly those types and no subclass of them, nested less
than :data:`MAX_JSON_DEPTH` deep: such a value comes back from a node equal, of
the same types, in the same order. The store keeps a map's keys sorted, so the
order of a dict whose keys were not sorted is written beside the value, once per
set of keys (``order``: each such dict's keys in the first order met), and put
back on reading: records of one shape, a list of messages say, cost one entry. A
dict whose keys come in another order than their set's first is named by its path
(``order_at``: ``[path, keys]``, the path a list of keys and indexes). A value
that holds LangChain messages, and would have a JSON form if each were LangChain's
constructor record of it, is stored with the records, in ``langchain``
(:mod:`.message_forms`). Anything else (tuples, sets, enums, dataclasses, bytes,
huge integers, NaN, messages of other classes) is stored as the bytes of
LangGraph's serializer, marked with its type. So a stored value is one of::

    {"json": VALUE}
    {"json": VALUE, "order": [KEYS, ...], "order_at": [[PATH, KEYS], ...]}
    {"langchain": VALUE_WITH_RECORDS, "order": ..., "order_at": ...}
    {"serde": TYPE, "bytes": BASE64}

(``order`` and ``order_at`` each only when needed) and what a saver keeps in
memory of it is :data:`Serialized`: ``(EXACT, msgpack bytes)`` for a JSON form,
``(MESSAGES, msgpack bytes)`` for one with records, LangGraph's ``(type, bytes)``
otherwise, loaded again into fresh objects on every read (a caller may change what
it is given).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from mnemosyne import CorruptObject
from mnemosyne.integrations.langgraph.message_forms import revived, with_records

Serialized = tuple[str, bytes]
"""A value as it loads again: ``(EXACT, msgpack bytes)`` or LangGraph's ``(type, bytes)``."""

EXACT = "mnemosyne:exact"
"""The type of a :data:`Serialized` that is the msgpack of a value's JSON form (no serializer type is)."""

MESSAGES = "mnemosyne:langchain"
"""The type of a :data:`Serialized` that is the msgpack of a value's JSON form with messages as records."""

MAX_JSON_DEPTH = 56
"""Deepest nesting a JSON form may have: node content nests at most 64 deep, and the form sits inside it."""

_INT_MIN = -(2**63)
_INT_MAX = 2**64 - 1

Dumps = Callable[[Any], tuple[str, bytes]]
Loads = Callable[[tuple[str, bytes]], Any]

_encoder = msgspec.msgpack.Encoder()  # insertion order kept: a JSON form's maps in their own order
_decode = msgspec.msgpack.decode


_CONFLICT: tuple[str, ...] = ("", "")
"""Marks, among the orders met, that a set of keys came in two orders (no dict has these keys)."""


def json_form(value: Any, key: str = "json") -> dict[str, Any] | None:
    """``{"json": value}`` (with ``order`` where needed) when ``value`` has an exact JSON form, else None.

    Args:
        value: the value.
        key: the field the value goes in (``json``, or ``langchain`` for one with messages as records).
    """
    # A dict's keys sorted -> its keys in order; and each order met -> itself.
    orders: dict[tuple[str, ...], tuple[str, ...]] = {}
    if not _exact(value, orders, 0):
        return None
    unsorted = [list(keys) for shape, keys in orders.items() if keys != shape and shape != _CONFLICT]
    form: dict[str, Any] = {key: value}
    if unsorted:
        form["order"] = unsorted
    if _CONFLICT in orders:
        # A set of keys in a second order (LangGraph's versions_seen beside channel_versions):
        # each dict whose order is not its set's first is named by its path.
        form["order_at"] = _orders_at(value, orders, [], [])
    return form


def _orders_at(
    value: Any, orders: dict[tuple[str, ...], tuple[str, ...]], path: list[str | int], out: list[Any]
) -> list[Any]:
    """``[path, keys]`` of each dict in ``value`` whose keys are not in their set's first order."""
    if type(value) is dict:
        keys = tuple(value)
        if orders[tuple(sorted(keys))] != keys:
            out.append([list(path), list(keys)])
        for key, item in value.items():
            if type(item) is dict or type(item) is list:
                _orders_at(item, orders, [*path, key], out)
    elif type(value) is list:
        for index, item in enumerate(value):
            if type(item) is dict or type(item) is list:
                _orders_at(item, orders, [*path, index], out)
    return out


def _exact(value: Any, orders: dict[tuple[str, ...], tuple[str, ...]], depth: int) -> bool:
    kind = type(value)
    if kind is str:
        return _utf8(value)
    if value is None or kind is bool:
        return True
    if kind is int:
        return bool(_INT_MIN <= value <= _INT_MAX)
    if kind is float:
        return math.isfinite(value)
    if depth >= MAX_JSON_DEPTH:
        return False
    depth += 1
    if kind is dict:
        keys = tuple(value)
        if orders.get(keys) != keys:  # records of one shape: the first is checked, the rest found here
            for key in keys:
                if type(key) is not str or not (key.isascii() or _utf8(key)):
                    return False
            if orders.setdefault(tuple(sorted(keys)), keys) != keys:
                orders[_CONFLICT] = _CONFLICT  # a second order of these keys: named by its path
            else:
                orders[keys] = keys
        value = value.values()
    elif kind is not list:
        return False
    # Text and integer items are checked here, without a call each: a put walks every
    # value it stores once, and most items of a state are text.
    for item in value:
        item_kind = type(item)
        if item_kind is str:
            if not (item.isascii() or _utf8(item)):
                return False
        elif item_kind is int:
            if not _INT_MIN <= item <= _INT_MAX:
                return False
        elif not _exact(item, orders, depth):
            return False
    return True


def _utf8(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no JSON text holds it
        return False
    return True


def stored(dumps: Dumps, value: Any, *, messages: bool) -> tuple[dict[str, Any], Serialized]:
    """The fields that store ``value`` in a node, and what to keep of it in memory.

    Args:
        dumps: LangGraph's serializer (``serde.dumps_typed``), for a value with no JSON form.
        value: the value.
        messages: whether a value holding messages may be stored with their records: only
            when the serializer is LangGraph's own, whose bytes say no more than they do (a
            serializer of the application's, one that encrypts say, keeps its bytes).
    """
    form = json_form(value)
    if form is not None:
        return form, (EXACT, _encoder.encode(value))
    records = with_records(value) if messages else None
    if records is not None:
        form = json_form(records, "langchain")
        if form is not None:
            return form, (MESSAGES, _encoder.encode(records))
    typed = dumps(value)
    return {"serde": typed[0], "bytes": base64.b64encode(typed[1]).decode("ascii")}, typed


def proven(fields: Mapping[str, Any]) -> tuple[Any, ...]:
    """What of the fields :func:`stored` made :func:`json_form` has proven JSON: the value and its orders.

    :func:`json_form` accepts only what ``check_json`` accepts (exactly its types,
    text that is valid UTF-8, 64-bit integers, finite floats, maps with text keys)
    nested less than :data:`MAX_JSON_DEPTH` deep; ``order`` and ``order_at`` are
    lists (three deep at most) of the keys it checked and of list indexes. A node
    built of the fields need not walk them again (``note_with_proven``, given
    ``nesting=MAX_JSON_DEPTH``). Nothing of a value stored as the serializer's bytes.
    """
    if "json" not in fields and "langchain" not in fields:
        return ()
    return tuple(fields[key] for key in ("json", "langchain", "order", "order_at") if key in fields)


def serialized(fields: Mapping[str, Any]) -> Serialized:
    """What :func:`stored` kept in memory, from the fields it wrote (as read back from a node).

    Raises:
        CorruptObject: the fields are none of the stored forms.
    """
    for key, form in (("json", EXACT), ("langchain", MESSAGES)):
        if key in fields:
            value = fields[key]
            if "order" in fields or "order_at" in fields:
                value = _reorder(value, fields.get("order", []), fields.get("order_at", []))
            return form, _encoder.encode(value)
    kind, data = fields.get("serde"), fields.get("bytes")
    if not isinstance(kind, str) or not isinstance(data, str):
        raise CorruptObject(
            f"a stored LangGraph value has neither 'json' nor 'serde' and 'bytes': {sorted(fields)}"
        )
    try:
        return kind, base64.b64decode(data, validate=True)
    except ValueError:
        raise CorruptObject("a stored LangGraph value's 'bytes' are not base64") from None


def load(loads: Loads, value: Serialized) -> Any:
    """A fresh copy of the value ``value`` keeps (``loads``: LangGraph's ``serde.loads_typed``)."""
    if value[0] == EXACT:
        return _decode(value[1])
    if value[0] == MESSAGES:
        return revived(_decode(value[1]))
    return loads(value)


def _reorder(value: Any, orders: Any, orders_at: Any) -> Any:
    """``value`` with every dict whose keys an ``order`` entry holds rebuilt with its keys in that order.

    Then each dict an ``order_at`` entry names by its path gets the order given there.
    """
    if not isinstance(orders, list) or not all(_keys(keys) for keys in orders):
        raise CorruptObject("a stored LangGraph value's 'order' is not a list of lists of keys")
    wanted = {tuple(sorted(keys)): keys for keys in orders}
    value = _rebuilt(value, wanted)
    if not isinstance(orders_at, list):
        raise CorruptObject("a stored LangGraph value's 'order_at' is not a list")
    for entry in orders_at:
        if not (
            isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], list) and _keys(entry[1])
        ):
            raise CorruptObject(
                "a stored LangGraph value's 'order_at' holds an entry that is not [path, keys]"
            )
        value = _ordered_at(value, entry[0], entry[1])
    return value


def _keys(keys: Any) -> bool:
    return isinstance(keys, list) and all(isinstance(key, str) for key in keys)


def _ordered_at(value: Any, path: list[Any], keys: list[str]) -> Any:
    """``value`` (rebuilt by :func:`_rebuilt`, so its own) with the dict at ``path`` in the order ``keys``."""
    parent: Any = None
    target = value
    for step in path:
        parent = target
        try:
            target = target[step]
        except (KeyError, IndexError, TypeError):
            raise CorruptObject(f"a stored LangGraph value has no {path!r} to order") from None
    if not isinstance(target, dict) or sorted(target) != sorted(keys):
        raise CorruptObject(f"a stored LangGraph value's dict at {path!r} has other keys than its order")
    ordered = {key: target[key] for key in keys}
    if parent is None:
        return ordered
    parent[path[-1]] = ordered
    return value


def _rebuilt(value: Any, wanted: dict[tuple[str, ...], list[str]]) -> Any:
    if isinstance(value, list):
        return [_rebuilt(item, wanted) for item in value]
    if isinstance(value, dict):
        keys = wanted.get(tuple(sorted(value)))
        return {key: _rebuilt(value[key], wanted) for key in (value if keys is None else keys)}
    return value

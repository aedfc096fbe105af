"""LangChain messages in a stored value as LangChain's own JSON form, and back.

LangChain serializes a message as a constructor record (``dumpd``, and the JSON
that LangGraph's ``JsonPlusSerializer`` reads)::

    {"id": ["langchain", "schema", "messages", "HumanMessage"],
     "kwargs": {"content": "hi", "id": "m-1", "type": "human"},
     "lc": 1, "type": "constructor"}

``kwargs`` holds the message's fields that differ from their defaults (and its
``type``, always), so the message is ``cls(**kwargs)`` again. The saver stores a
value holding messages in this form when it is exact (ADR 61): every message is of
one of LangChain's own message classes, exactly (no subclass), with no extra
fields, and every field, like every other part of the value, has an exact JSON
form (:mod:`.stored_values`); no map of the value other than a record has an
``lc`` key, so records are told apart from the value's own maps without guessing.
Only those classes are revived, by their record's ``id``: a stored value never
names code to import.
"""

from __future__ import annotations

from typing import Any

import langchain_core.messages as lc_messages
from langchain_core.messages import BaseMessage

from mnemosyne import CorruptObject

_CLASSES: dict[type[BaseMessage], tuple[str, ...]] = {}
_BY_ID: dict[tuple[str, ...], type[BaseMessage]] = {}
_DEFAULTS: dict[type[BaseMessage], dict[str, Any]] = {}

for _name in lc_messages.__all__:
    _cls = getattr(lc_messages, _name, None)
    if isinstance(_cls, type) and issubclass(_cls, BaseMessage) and _cls.is_lc_serializable():
        if _cls.__name__.startswith("Base"):
            continue  # abstract: no message is of these classes exactly
        _CLASSES[_cls] = tuple(_cls.lc_id())
        _BY_ID[tuple(_cls.lc_id())] = _cls


def _defaults(cls: type[BaseMessage]) -> dict[str, Any]:
    found = _DEFAULTS.get(cls)
    if found is None:
        found = {
            name: field.get_default(call_default_factory=True)
            for name, field in cls.model_fields.items()
            if not field.is_required() and name != "type"  # the type is always written: it reads
        }
        _DEFAULTS[cls] = found
    return found


class _NoForm(Exception):
    """The value has no exact form with messages as records."""


def with_records(value: Any) -> Any | None:
    """``value`` with each LangChain message replaced by its constructor record; None if it holds none.

    Also None when a map of the value has an ``lc`` key of its own, or a message is
    of a class this module does not revive, or has extra fields. Whether the rest is
    exact JSON is for the caller to check (:func:`.stored_values.json_form`).
    """
    found: list[bool] = []
    try:
        replaced = _replace(value, found, 0)
    except _NoForm:
        return None
    return replaced if found else None


def _replace(value: Any, found: list[bool], depth: int) -> Any:
    kind = type(value)
    if kind is dict:
        if "lc" in value:
            raise _NoForm  # a map of the value's own that a reader would take for a record
        return {key: _replace(item, found, depth + 1) for key, item in value.items()}
    if kind is list:
        return [_replace(item, found, depth + 1) for item in value]
    if isinstance(value, BaseMessage):
        record_id = _CLASSES.get(kind)
        if record_id is None or value.__pydantic_extra__:
            raise _NoForm
        found.append(True)
        defaults = _defaults(kind)
        kwargs = {
            name: field
            for name, field in sorted(value.__dict__.items())
            if name not in defaults or field != defaults[name]
        }
        # Keys in sorted order, as the store keeps them: a record costs no "order" entry.
        return {"id": list(record_id), "kwargs": kwargs, "lc": 1, "type": "constructor"}
    return value  # text, numbers, ...: the caller checks their JSON form


def revived(value: Any) -> Any:
    """``value`` with each constructor record made the message it stands for again.

    Raises:
        CorruptObject: a record names a class this module does not revive, or its
            fields do not make one.
    """
    if isinstance(value, list):
        return [revived(item) for item in value]
    if isinstance(value, dict):
        if "lc" not in value:
            return {key: revived(item) for key, item in value.items()}
        record_id = value.get("id")
        cls = _BY_ID.get(tuple(record_id)) if isinstance(record_id, list) else None
        kwargs = value.get("kwargs")
        if cls is None or value.get("type") != "constructor" or not isinstance(kwargs, dict):
            raise CorruptObject(f"a stored LangGraph value holds a record of no known message: {record_id!r}")
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
            raise CorruptObject(f"a stored {cls.__name__} does not load: {exc}") from None
    return value

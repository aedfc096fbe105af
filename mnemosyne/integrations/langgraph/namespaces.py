"""How LangGraph's (namespace, key) pairs become node ids and commit messages, and how filters match.

LangGraph accepts labels and keys that ids refuse (``/``, control characters,
``..``, any length), so each label and the key are escaped into one id segment
each: ``%``, ``/``, ``~``, control characters and invisible ones (U+200B, U+2028,
U+202E, ...) are percent-encoded (UTF-8),
a key of only dots has its dots encoded, and the empty key is ``~``. Escaping is
injective and the key is always the last segment, so ``("users", "a/b")`` and
``("users", "a", "b")`` never meet. An id that would pass 256 bytes keeps as many
whole leading segments as fit, then a last segment ``~`` + a blake2b-128 digest
of the full form; no escaped segment starts with ``~`` except the empty key's, so
the two forms never collide either. The namespace and key themselves are kept in
the node's meta, which is what a read trusts.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote

from mnemosyne import InvalidInput
from mnemosyne.model.validation import INVISIBLE, MAX_ID_BYTES

ROOT = "langgraph-store"
"""The id segment every item of a :class:`MnemosyneStore` lives under."""

# Invisible characters too (U+2028, U+202E, ...): ids refuse them (ADR 53).
_ESCAPED = re.compile(f"[%/~\\x00-\\x1f\\x7f-\\x9f{INVISIBLE}]")
_DIGEST_SEGMENT = 1 + 32  # "~" and 16 bytes of hex
_BUDGET = MAX_ID_BYTES - 1 - _DIGEST_SEGMENT  # the readable part of a digested id


def _percent(match: re.Match[str]) -> str:
    return "".join(f"%{byte:02X}" for byte in match.group().encode("utf-8"))


def escape(text: str) -> str:
    """One id segment for a namespace label or a key (see the module docstring)."""
    out = _ESCAPED.sub(_percent, text)
    if out in (".", ".."):
        out = out.replace(".", "%2E")
    return out or "~"


def unescape(segment: str) -> str:
    """The label or key an :func:`escape` d segment stands for."""
    return "" if segment == "~" else unquote(segment, errors="strict")


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def node_id(namespace: Sequence[str], key: str) -> str:
    """The node id of the item ``key`` in ``namespace``: readable, injective, a valid id."""
    return _node_id(tuple(namespace), key)


@functools.lru_cache(maxsize=4096)
def _node_id(namespace: tuple[str, ...], key: str) -> str:
    # Kept: every read of an item names it (a get, and a search checking what it found).
    segments = [escape(label) for label in namespace] + [escape(key)]
    full = ROOT + "/" + "/".join(segments)
    if _size(full) <= MAX_ID_BYTES:
        return full
    digest = hashlib.blake2b(full.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    readable = ROOT
    for segment in segments:
        if _size(readable) + 1 + _size(segment) > _BUDGET:
            break
        readable += "/" + segment
    return f"{readable}/~{digest}"


def decode_id(item_id: str) -> tuple[tuple[str, ...], str] | None:
    """The (namespace, key) of a readable id; None for a digested one (read its node's meta)."""
    root, _, rest = item_id.partition("/")
    if root != ROOT or not rest:
        return None
    *labels, last = rest.split("/")
    if last.startswith("~") and last != "~":
        return None
    return tuple(unescape(label) for label in labels), unescape(last)


def id_prefix(namespace_prefix: Sequence[str]) -> str:
    """An id prefix every item under ``namespace_prefix`` has, in either form of id.

    A digested id keeps whole leading segments up to a budget, so a prefix that
    fits the budget is one; a longer one is shortened until it fits (the caller
    filters by the namespace kept in each node).
    """
    labels = [escape(label) for label in namespace_prefix]
    while labels and _size(ROOT + "/" + "/".join(labels)) > _BUDGET:
        labels.pop()
    return ROOT + "/" + "".join(label + "/" for label in labels)


def search_order(ids: list[str], under: str) -> tuple[list[str], list[str]]:
    """The readable ids among ``ids`` in the order search gives items (namespace, then key), and the digested.

    ``ids`` are in id order, every one under the id prefix ``under``. Where no id
    holds an escape, the order follows from the ids without decoding each: all
    directly under ``under`` (one namespace), it is id order. A digested id's
    place is known only from its node's meta.
    """
    joined = "\n".join(ids)
    if "%" not in joined and "~" not in joined:
        if joined.count("/") == len(ids) * under.count("/"):
            return list(ids), []
        return sorted(ids, key=_labels), []
    keyed: list[tuple[tuple[tuple[str, ...], str], str]] = []
    digested: list[str] = []
    for item_id in ids:
        found = decode_id(item_id)
        if found is None:
            digested.append(item_id)
        else:
            keyed.append((found, item_id))
    keyed.sort(key=lambda entry: entry[0])
    return [item_id for _, item_id in keyed], digested


def _labels(item_id: str) -> tuple[list[str], str]:
    """How an id without escapes sorts: its namespace's labels, then its key."""
    namespace, _, key = item_id.rpartition("/")
    return namespace.split("/"), key


# -- names in commit messages -------------------------------------------------

_BARE = re.compile(r"[A-Za-z0-9_.:@+|-]+")
_LABEL_WIDTH = 40
_ITEM_WIDTH = 160


def _one_line(text: str) -> str:
    """JSON-quoted ``text`` with every character that is not printable escaped (no line breaks)."""
    quoted = json.dumps(text, ensure_ascii=False)
    return "".join(char if char.isprintable() else f"\\u{ord(char):04x}" for char in quoted)


def shown(text: str, width: int = _LABEL_WIDTH) -> str:
    """``text`` as a commit message names it: bare when plain, else quoted; cut past ``width``."""
    cut = _cut(text, width)
    return cut if _BARE.fullmatch(cut) else _one_line(cut)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def describe_namespace(namespace: Sequence[str]) -> str:
    """A namespace as a commit message names it: ``("users", "mira")``, on one line."""
    labels = ", ".join(_one_line(_cut(label, _LABEL_WIDTH)) for label in namespace)
    return _cut(f"({labels})", _ITEM_WIDTH)


def describe(namespace: Sequence[str], key: str) -> str:
    """An item as a commit message names it: ``("users", "mira") / prefs``, on one line."""
    return _cut(f"{describe_namespace(namespace)} / {shown(key)}", _ITEM_WIDTH)


# -- namespace patterns (list_namespaces) ------------------------------------


def matches(namespace: tuple[str, ...], match_type: str, path: Sequence[str]) -> bool:
    """Whether ``namespace`` starts (``prefix``) or ends (``suffix``) with ``path``; ``*`` is any label."""
    if len(namespace) < len(path):
        return False
    if match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise InvalidInput(f"match_type must be 'prefix' or 'suffix', not {match_type!r}")
    return all(wanted == "*" or label == wanted for label, wanted in pairs)


# -- value filters (search) --------------------------------------------------

_MISSING = object()
_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _ordered(value: Any, bound: Any) -> bool:
    """Whether two values compare by order: both numbers or both text (never raises)."""
    return (_number(value) and _number(bound)) or (isinstance(value, str) and isinstance(bound, str))


def _operator(value: Any, name: str, bound: Any) -> bool:
    if name == "$eq":
        return value is not _MISSING and bool(value == bound)
    if name == "$ne":
        return value is _MISSING or bool(value != bound)
    if name not in _OPERATORS:
        raise InvalidInput(f"unknown filter operator {name!r}: use {', '.join(_OPERATORS)}")
    if value is _MISSING or not _ordered(value, bound):
        return False
    if name == "$gt":
        return bool(value > bound)
    if name == "$gte":
        return bool(value >= bound)
    if name == "$lt":
        return bool(value < bound)
    return bool(value <= bound)


def _compare(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(isinstance(name, str) and name.startswith("$") for name in wanted):
            return all(_operator(value, name, bound) for name, bound in wanted.items())
        # A plain map matches a map with those keys and values (others may be there too).
        return isinstance(value, Mapping) and all(
            _compare(value.get(name, _MISSING), part) for name, part in wanted.items()
        )
    if isinstance(wanted, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(wanted)
            and all(_compare(a, b) for a, b in zip(value, wanted, strict=True))
        )
    return value is not _MISSING and bool(value == wanted)


def _lookup(value: Mapping[str, Any], path: str) -> Any:
    """A top-level key as it stands, else a dotted path into nested maps."""
    if path in value:
        return value[path]
    found: Any = value
    for part in path.split("."):
        if not isinstance(found, Mapping) or part not in found:
            return _MISSING
        found = found[part]
    return found


def check_filter(conditions: Any) -> None:
    """Refuse a filter that is not a map or names an unknown operator, before anything is read.

    Raises:
        InvalidInput: naming what is wrong.
    """
    if conditions is None:
        return
    if not isinstance(conditions, Mapping):
        raise InvalidInput(f"a search filter must be a map, not {type(conditions).__name__}")
    for wanted in conditions.values():
        if isinstance(wanted, Mapping):
            for name, part in wanted.items():
                if isinstance(name, str) and name.startswith("$"):
                    if name not in _OPERATORS:
                        raise InvalidInput(f"unknown filter operator {name!r}: use {', '.join(_OPERATORS)}")
                else:
                    check_filter({name: part})


def passes(value: Mapping[str, Any], conditions: Mapping[str, Any] | None) -> bool:
    """Whether an item's value passes a LangGraph search filter.

    Args:
        value: the item's value.
        conditions: ``{key: wanted}``; ``key`` is top-level or dotted
            (``"meta.lang"``), ``wanted`` a value (equality; a map matches the keys
            it names) or ``{"$eq" | "$ne" | "$gt" | "$gte" | "$lt" | "$lte": bound}``.
            Order operators compare numbers with numbers and text with text; any
            other pair does not pass.

    Raises:
        InvalidInput: the filter names an unknown operator (:func:`check_filter` says so
            before any item is read).
    """
    if conditions is None:
        return True
    return all(_compare(_lookup(value, str(path)), wanted) for path, wanted in conditions.items())

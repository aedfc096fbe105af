"""The one JSON form of every object and result, and the strict reading of node JSON.

Output: each result struct becomes a JSON object with exactly its attributes
(and a few computed ones, such as a change's ``redacted``), nested results as
objects, times in RFC 3339 UTC with ``Z``. A node has every field, ``meta`` is
``{}`` when empty, and ``hash`` is added; a claim's content is an object of all
its fields. Every face (the command line's ``--json``, MCP, LangGraph, the
viewer) prints these forms, so a program learns one shape per result.

Input: node JSON is read strictly. A key given twice in one object, ``NaN`` and
``Infinity`` are refused rather than guessed at, and so is an integer of more
than 20 digits (no 64-bit integer has more), unconverted, naming where it sits;
unknown fields are refused; an omitted or null ``id`` is generated at commit, an
empty one refused; a ``hash``, when given, must be the hash of the node described
(with its id).
"""

from __future__ import annotations

import functools
import json
import re
from datetime import datetime
from typing import Any, Literal, TypeVar

import msgspec

from mnemosyne.errors import InvalidInput
from mnemosyne.model.objects import NO_ID, Claim, Commit, Node, Provenance, Redaction, has_id
from mnemosyne.model.results import Change
from mnemosyne.model.times import parse_time, rfc3339

NODE_FIELDS = ("id", "content", "kind", "provenance", "event_time", "meta", "expires_at", "hash")
"""The fields of a node's JSON form (``hash`` is computed: on input it is checked)."""

PROVENANCE_FIELDS = ("agent_step", "observation", "tool_call", "source")
CLAIM_FIELDS = ("subject", "predicate", "value", "valid_from", "valid_to", "confidence", "evidence")
CLAIM_TIME_FIELDS = ("valid_from", "valid_to")

COMPUTED: dict[type, tuple[str, ...]] = {Change: ("redacted",)}
"""Properties that join an object's fields in its JSON form."""

T = TypeVar("T")


# -- output -----------------------------------------------------------------------


def to_builtins(value: Any) -> Any:
    """``value`` as plain JSON values (dicts, lists, text, numbers, None), in its JSON form.

    Raises:
        InvalidInput: ``value`` holds something with no JSON form.
    """
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Node):
        return node_builtins(value)
    if isinstance(value, datetime):
        return rfc3339(value)
    if isinstance(value, Claim):
        return claim_builtins(value)
    if isinstance(value, Provenance | Redaction):
        return {name: to_builtins(getattr(value, name)) for name in value.__struct_fields__}
    if isinstance(value, msgspec.Struct):
        out = {name: to_builtins(getattr(value, name)) for name in value.__struct_fields__}
        if isinstance(value, Commit) and out.get("meta") is None:
            out["meta"] = {}
        for name in COMPUTED.get(type(value), ()):
            out[name] = to_builtins(getattr(value, name))
        return out
    if isinstance(value, list | tuple):
        return [to_builtins(item) for item in value]
    if isinstance(value, dict):
        return {str(key): to_builtins(item) for key, item in value.items()}
    raise InvalidInput(f"{type(value).__name__} has no JSON form")


def to_json(value: Any) -> str:
    """``value`` in its JSON form, as one line of JSON text.

    Raises:
        InvalidInput: ``value`` holds something with no JSON form, text that is
            not valid Unicode (a lone surrogate), or itself.
    """
    try:
        return msgspec.json.encode(to_builtins(value)).decode()
    except UnicodeEncodeError:
        raise InvalidInput("text with a lone surrogate has no JSON form") from None
    except RecursionError:
        raise InvalidInput("a value that contains itself has no JSON form") from None


def node_builtins(node: Node) -> dict[str, Any]:
    """A node's JSON form: every field, ``meta`` ``{}`` when empty, and its ``hash``."""
    named = has_id(node)
    content = claim_builtins(node.content) if isinstance(node.content, Claim) else node.content
    return {
        "id": node.id if named else None,
        "content": content,
        "kind": node.kind,
        "provenance": {name: getattr(node.provenance, name) for name in PROVENANCE_FIELDS},
        "event_time": rfc3339(node.event_time) if node.event_time is not None else None,
        "meta": node.meta or {},
        "expires_at": rfc3339(node.expires_at) if node.expires_at is not None else None,
        "hash": node.hash if named else None,
    }


def claim_builtins(claim: Claim) -> dict[str, Any]:
    """A claim's JSON form: an object of all its fields."""
    return {
        "subject": claim.subject,
        "predicate": claim.predicate,
        "value": claim.value,
        "valid_from": rfc3339(claim.valid_from),
        "valid_to": rfc3339(claim.valid_to) if claim.valid_to is not None else None,
        "confidence": claim.confidence,
        "evidence": list(claim.evidence),
    }


# -- input ------------------------------------------------------------------------

_SPACE = re.compile(r"[ \t\r\n]*")


class _Refused(Exception):
    """Raised inside the decoder's hooks; reported with the line of the value."""


class _NotJson(_Refused):
    """``NaN`` or ``Infinity``: Python's reader takes them, JSON has no such values."""


class _Malformed(InvalidInput):
    """Text that is not JSON at all (as opposed to JSON that is refused): see :func:`json_or_text`."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Build an object, refusing a key given twice (Python's json would keep the last)."""
    built: dict[str, Any] = {}
    for key, value in pairs:
        if key in built:
            raise _Refused(f"duplicate key {key!r} in one object")
        built[key] = value
    return built


def _no_constant(name: str) -> Any:
    raise _NotJson(f"{name} is not JSON (NaN and Infinity are refused)")


_LONGEST_INT = 20
"""Digits of the longest 64-bit integer (2**64 - 1): no number stored can have more."""


class _TooLong:
    """Stands in for an integer literal of more than :data:`_LONGEST_INT` digits.

    Converting it could only fail (Python refuses more than 4,300 digits, and no
    object holds more than 64 bits), so it is not converted: the reader finds
    where it sits and refuses the value, naming that place.
    """

    def __init__(self, digits: int) -> None:
        self.digits = digits


def _too_long(value: Any) -> tuple[str, int] | None:
    """Where the first too-long integer sits in ``value`` (``content.readings[2]``), and its digits."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:  # depth-first, in document order; a loop, as the value may be deeply nested
        path, item = stack.pop()
        if isinstance(item, _TooLong):
            return path, item.digits
        if isinstance(item, dict):
            children = [(f"{path}.{key}" if path else key, child) for key, child in item.items()]
        elif isinstance(item, list):
            children = [(f"{path}[{index}]", child) for index, child in enumerate(item)]
        else:
            continue
        stack.extend(reversed(children))
    return None


def json_values(text: str, source: str) -> list[tuple[int, Any]]:
    """Split ``text`` into the JSON values it holds one after another, each with its line.

    So one value, JSON Lines and pretty-printed values in a row all read.

    Raises:
        InvalidInput: malformed JSON (naming the line and column), a key given
            twice, ``NaN`` or ``Infinity``, an integer of more digits than any
            64-bit integer has (naming its line and its place in the value).
    """
    return _read_values(text, source, lines=True)


def _read_values(text: str, source: str, *, lines: bool) -> list[tuple[int, Any]]:
    """:func:`json_values`; without ``lines``, messages name no line (the text is one option)."""

    def at(line: int) -> str:
        return f" at line {line}" if lines else ""

    too_long = 0

    def parse_int(literal: str) -> int | _TooLong:
        nonlocal too_long
        digits = len(literal) - literal.startswith("-")
        if digits <= _LONGEST_INT:
            return int(literal)
        too_long += 1
        return _TooLong(digits)

    decoder = json.JSONDecoder(
        object_pairs_hook=_unique_keys, parse_constant=_no_constant, parse_int=parse_int
    )
    values: list[tuple[int, Any]] = []
    position, line, counted = 0, 1, 0
    while True:
        space = _SPACE.match(text, position)
        position = space.end() if space else position
        if position >= len(text):
            return values
        line += text.count("\n", counted, position)
        counted = position
        try:
            value, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            reason = exc.msg.removesuffix(" at")  # "Invalid control character at"
            raise _Malformed(
                f"{source}: invalid JSON at line {exc.lineno}, column {exc.colno}: {reason}"
            ) from None
        except _Refused as exc:
            refused = _Malformed if isinstance(exc, _NotJson) else InvalidInput
            raise refused(f"{source}: invalid JSON in the value{at(line)}: {exc}") from None
        except RecursionError:
            raise InvalidInput(f"{source}: the value{at(line)} is nested too deeply") from None
        found = _too_long(value) if too_long else None  # looked for only when one was read
        if found is not None:
            path, digits = found
            where = f"{source} line {line}" if lines else source
            raise InvalidInput(
                f"{where}: {path + ': ' if path else ''}an integer of {digits:,} digits "
                "is outside the 64-bit range"
            )
        values.append((line, value))


def json_or_text(text: str, what: str) -> Any:
    """The JSON value ``text`` spells, else ``text`` itself: how a ``KEY=VALUE`` option reads VALUE.

    ``de`` is the text ``"de"``, ``3`` the number, ``"3"`` the text ``"3"``,
    ``NaN`` the text (it is not JSON). JSON that no memory could hold is refused
    rather than taken for text.

    Args:
        text: the value as given.
        what: how errors name it (``--meta lang``).

    Raises:
        InvalidInput: naming ``what``: an integer of more digits than any 64-bit
            integer has, a key given twice, a value nested too deeply.
    """
    try:
        values = _read_values(text, what, lines=False)
    except _Malformed:
        return text
    if len(values) != 1:
        return text
    return values[0][1]


def read_nodes(text: str, source: str) -> list[Node]:
    """The nodes in ``text``: one JSON object, a JSON array of them, or JSON Lines.

    Args:
        text: the input.
        source: how errors name the input (a file name, ``stdin``, …).

    Raises:
        InvalidInput: malformed JSON or a value that is not a valid node.
    """
    nodes: list[Node] = []
    for line, value in json_values(text, source):
        if isinstance(value, list):
            for index, item in enumerate(value):
                nodes.append(node_from_builtins(item, f"{source} line {line}, [{index}]"))
        else:
            nodes.append(node_from_builtins(value, f"{source} line {line}"))
    return nodes


def from_json(text: str | bytes, cls: type[T], source: str = "input") -> T:
    """The object of type ``cls`` (a node, a commit, any result) that JSON text describes.

    The inverse of :func:`to_json`: ``from_json(to_json(x), type(x)) == x``.
    Nodes are read by the rules of the module docstring; computed fields (a
    node's ``hash`` aside, which is checked) are ignored.

    Raises:
        InvalidInput: malformed JSON, or JSON that is not such an object.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{source}: not UTF-8 text (bad byte at offset {exc.start})") from None
    values = json_values(text, source)
    if len(values) != 1:
        raise InvalidInput(f"{source}: expected one JSON value, found {len(values)}")
    return from_builtins(values[0][1], cls, source)


def from_builtins(value: Any, cls: type[T], where: str = "input") -> T:
    """The object of type ``cls`` that plain JSON values describe (see :func:`from_json`).

    Raises:
        InvalidInput: naming ``where`` and what does not fit.
    """
    converted: T = _convert(value, type_info(cls), where)
    return converted


def place(where: str, part: str) -> str:
    """The name of a value inside the one named ``where``: ``part`` is ``.field`` or ``[index]``.

    Every face names a failing value the same way, by its path from the argument,
    field or line that holds it, indexes from 0: ``put[2]``, ``nodes[0].meta``,
    ``stdin line 3, [1]``. An empty ``where`` is the top of the value itself.
    """
    if not where:
        return part.removeprefix(".")
    if " " in where.partition("[")[0]:  # a phrase ("stdin line 3"), not a path
        return f"{where}, {part.removeprefix('.')}"
    return f"{where}{part}"


def _at(where: str, problem: str) -> str:
    """``problem``, said of the value named ``where`` (nothing to name: the top of the value)."""
    return f"{where}: {problem}" if where else problem


def type_info(cls: Any) -> msgspec.inspect.Type:
    """The description msgspec gives of ``cls``, worked out once per type.

    Working it out reads the class's annotations and resolves them (about half a
    millisecond for a request body's class), and a served API converts a body on
    every request.
    """
    return _type_info(cls)


_type_info = functools.cache(msgspec.inspect.type_info)


def _convert(value: Any, info: msgspec.inspect.Type, where: str) -> Any:
    inspect = msgspec.inspect
    if isinstance(info, inspect.UnionType):
        if value is None and any(isinstance(t, inspect.NoneType) for t in info.types):
            return None
        choices = [t for t in info.types if not isinstance(t, inspect.NoneType)]
        return _convert(value, choices[0], where)
    if isinstance(info, inspect.StructType):
        cls = info.cls
        if cls is Node:
            return node_from_builtins(value, where)
        if cls is Provenance:
            return _provenance(value)
        if not isinstance(value, dict):
            raise InvalidInput(_at(where, f"expected an object for {cls.__name__}, not {_kind(value)}"))
        fields = {}
        for field in info.fields:
            if field.name in value:
                fields[field.name] = _convert(value[field.name], field.type, place(where, f".{field.name}"))
            elif field.required:
                raise InvalidInput(_at(where, f"{cls.__name__} needs {field.name!r}"))
        if issubclass(cls, Commit) and fields.get("meta") == {}:
            fields["meta"] = None  # one spelling for "no meta", as stored
        try:
            return cls(**fields)
        except (TypeError, ValueError) as exc:
            raise InvalidInput(_at(where, str(exc))) from None
    if isinstance(info, inspect.ListType | inspect.VarTupleType):
        if not isinstance(value, list):
            raise InvalidInput(_at(where, f"expected an array, not {_kind(value)}"))
        items = [_convert(item, info.item_type, place(where, f"[{i}]")) for i, item in enumerate(value)]
        return items if isinstance(info, inspect.ListType) else tuple(items)
    if isinstance(info, inspect.DictType):
        if not isinstance(value, dict):
            raise InvalidInput(_at(where, f"expected an object, not {_kind(value)}"))
        return {
            key: _convert(item, info.value_type, place(where, f"[{key!r}]")) for key, item in value.items()
        }
    if isinstance(info, inspect.DateTimeType):
        return _time(value, where) if isinstance(value, str) else _refuse(value, "an RFC 3339 time", where)
    try:
        return msgspec.convert(value, info_type(info))
    except msgspec.ValidationError as exc:
        said = str(exc)  # "Expected `int`, got `str`": in the lower case of every other message
        raise InvalidInput(_at(where, said[:1].lower() + said[1:])) from None


def info_type(info: msgspec.inspect.Type) -> Any:
    """The Python type a leaf of ``msgspec.inspect`` stands for (text, numbers, literals, any)."""
    inspect = msgspec.inspect
    if isinstance(info, inspect.LiteralType):
        return Literal[tuple(info.values)]
    simple: dict[type, Any] = {
        inspect.StrType: str,
        inspect.IntType: int,
        inspect.FloatType: float,
        inspect.BoolType: bool,
        inspect.NoneType: type(None),
    }
    return simple.get(type(info), Any)


def _refuse(value: Any, wanted: str, where: str) -> Any:
    raise InvalidInput(_at(where, f"expected {wanted}, not {_kind(value)}"))


def node_from_builtins(value: Any, where: str) -> Node:
    """A node from its JSON form as plain values.

    Raises:
        InvalidInput: naming ``where`` and what is wrong.
    """
    if not isinstance(value, dict):
        raise InvalidInput(f"{where}: expected a node object or an array of them, not {_kind(value)}")
    unknown = sorted(set(value) - set(NODE_FIELDS))
    if unknown:
        raise InvalidInput(f"{where}: unknown field {unknown[0]!r} (a node has {', '.join(NODE_FIELDS)})")
    if "content" not in value:
        raise InvalidInput(f'{where}: a node needs "content"')
    expected = value.get("hash")
    if expected is not None and not isinstance(expected, str):
        raise InvalidInput(f"{where}: hash must be a string")
    try:
        node_id = value.get("id")
        if node_id is None:
            node_id = NO_ID  # generated at commit
        kind: Any = value.get("kind")
        if kind is None:
            kind = "note"
        content = value["content"]
        if kind == "claim" and isinstance(content, dict):
            content = {
                key: _time(item, f"claim {key}") if key in CLAIM_TIME_FIELDS else item
                for key, item in content.items()
            }
        node = Node(
            id=node_id,
            content=content,
            kind=kind,
            provenance=_provenance(value.get("provenance")),
            event_time=_time(value.get("event_time"), "event_time"),
            meta=value.get("meta"),
            expires_at=_time(value.get("expires_at"), "expires_at"),
        )
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: {exc}") from None
    if expected is not None:
        if not has_id(node):
            raise InvalidInput(f"{where}: a hash is checked against the node's id: give the id too")
        if expected.lower() != node.hash:
            raise InvalidInput(
                f"{where}: hash {expected[:12]}… does not match the node described (its hash is "
                f"{node.hash[:12]}…): the node differs from the one that hash names"
            )
    return node


def _provenance(value: Any) -> Provenance:
    if value is None:
        return Provenance()
    if not isinstance(value, dict):
        raise InvalidInput(f"provenance must be an object, not {_kind(value)}")
    unknown = sorted(set(value) - set(PROVENANCE_FIELDS))
    if unknown:
        raise InvalidInput(
            f"unknown provenance field {unknown[0]!r} (provenance has {', '.join(PROVENANCE_FIELDS)})"
        )
    return Provenance(**value)


def _time(value: Any, what: str) -> Any:
    """Parse a time string; anything else goes to the node's own checks."""
    if isinstance(value, str):
        try:
            return parse_time(value)
        except InvalidInput as exc:
            raise InvalidInput(f"{what}: {exc}") from None
    return value


def _kind(value: Any) -> str:
    names = {str: "a string", bool: "a boolean", int: "a number", float: "a number", list: "an array"}
    return "null" if value is None else names.get(type(value), type(value).__name__)

"""Reading nodes for ``mnemo commit``: one JSON object, a JSON array, or JSON Lines.

The input is read as a stream of JSON values separated by whitespace, so a
single object, an array of objects, JSON Lines and pretty-printed objects one
after another all work. Errors name the line and column.
"""

import json
import re
from collections.abc import Callable
from typing import Any

from mnemosyne import InvalidInput, Node, Provenance, parse_time

NODE_FIELDS = ("id", "content", "kind", "provenance", "event_time", "meta", "expires_at", "hash")
"""Fields a node object may have; ``hash`` is accepted (``show --json`` output) and ignored."""

PROVENANCE_FIELDS = ("agent_step", "observation", "tool_call", "source")
CLAIM_TIME_FIELDS = ("valid_from", "valid_to")

_SPACE = re.compile(r"[ \t\r\n]*")


class _Refused(Exception):
    """Raised inside the decoder's hooks; reported with the line of the value."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Build an object, refusing a key given twice (Python's json would keep the last)."""
    built: dict[str, Any] = {}
    for key, value in pairs:
        if key in built:
            raise _Refused(f"duplicate key {key!r} in one object")
        built[key] = value
    return built


def _no_constant(name: str) -> Any:
    raise _Refused(f"{name} is not JSON (NaN and Infinity are refused)")


def json_values(text: str, source: str) -> list[tuple[int, Any]]:
    """Split ``text`` into its JSON values, each with the line it starts on.

    Objects with a key given twice, ``NaN`` and ``Infinity`` are refused: JSON
    does not define them, and keeping one of two values silently loses data.

    Raises:
        InvalidInput: malformed JSON, naming the line and column.
    """
    decoder = json.JSONDecoder(object_pairs_hook=_unique_keys, parse_constant=_no_constant)
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
            raise InvalidInput(
                f"{source}: invalid JSON at line {exc.lineno}, column {exc.colno}: {reason}"
            ) from None
        except _Refused as exc:
            raise InvalidInput(f"{source}: invalid JSON in the value at line {line}: {exc}") from None
        except RecursionError:
            raise InvalidInput(f"{source}: the value at line {line} is nested too deeply") from None
        values.append((line, value))


def read_nodes(text: str, source: str, new_id: Callable[[], str]) -> list[Node]:
    """Parse the nodes in ``text``; id-less nodes get ids from ``new_id``.

    Args:
        text: the input.
        source: how errors name the input (a file name or ``stdin``).
        new_id: makes an id for a node that has none.

    Returns:
        The nodes, in input order.

    Raises:
        InvalidInput: malformed JSON or a value that is not a valid node.
    """
    nodes: list[Node] = []
    for line, value in json_values(text, source):
        if isinstance(value, list):
            for index, item in enumerate(value, start=1):
                nodes.append(node_from_json(item, f"{source} line {line}, item {index}", new_id))
        else:
            nodes.append(node_from_json(value, f"{source} line {line}", new_id))
    return nodes


def node_from_json(value: Any, where: str, new_id: Callable[[], str]) -> Node:
    """Build a node from its JSON form (see ``INTERFACE.md``).

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
    if value.get("hash") is not None and not isinstance(value["hash"], str):
        raise InvalidInput(f"{where}: hash must be a string (it is ignored: the store computes it)")
    try:
        node_id = value.get("id")
        if node_id is None or node_id == "":
            node_id = new_id()
        kind: Any = value.get("kind")
        if kind is None:
            kind = "note"
        content = value["content"]
        if kind == "claim" and isinstance(content, dict):
            content = {
                key: _time(item, f"claim {key}") if key in CLAIM_TIME_FIELDS else item
                for key, item in content.items()
            }
        return Node(
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
    """Parse a time string; anything else goes to the library to judge."""
    if isinstance(value, str):
        try:
            return parse_time(value)
        except InvalidInput as exc:
            raise InvalidInput(f"{what}: {exc}") from None
    return value


def _kind(value: Any) -> str:
    names = {str: "a string", bool: "a boolean", int: "a number", float: "a number", list: "an array"}
    return "null" if value is None else names.get(type(value), type(value).__name__)

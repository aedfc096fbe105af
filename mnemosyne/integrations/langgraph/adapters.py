"""What the store adapts from LangGraph: its embeddings config, and its run config as provenance.

Kept apart from :mod:`~mnemosyne.integrations.langgraph.store` so the store reads
as the mapping of operations to commits and reads.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
from langchain_core.embeddings import Embeddings
from langgraph.config import get_config
from langgraph.store.base import IndexConfig, ensure_embeddings, get_text_at_path, tokenize_path

from mnemosyne import InvalidInput, Provenance

# -- embeddings ---------------------------------------------------------------


def _recall_text(value: Mapping[str, Any]) -> str:
    """The text recall derives from a map content: its strings in order, else compact JSON.

    Mirrors the recall layer's rule, so the embedder can tell which item a text
    it is asked to embed came from; should the rules ever part, the text is
    embedded whole, never wrongly.
    """
    parts: list[str] = []

    def walk(part: Any) -> None:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, list):
            for entry in part:
                walk(entry)
        elif isinstance(part, dict):
            for name in sorted(part):  # a stored map's keys are in canonical (sorted) order
                walk(part[name])

    walk(value)
    if not any(part.strip() for part in parts):
        return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return " ".join(parts)


class IndexEmbedder:
    """A LangGraph ``index`` config as a Mnemosyne :class:`~mnemosyne.recall.embedders.Embedder`.

    Recall embeds the text of a whole node; LangGraph embeds the ``fields`` an
    index config (or a put's ``index``) names. When the store writes an item it
    notes which fields' text stands for the item's whole text, and embeds that
    instead; a text it was not told of (a query, or an item indexed by another
    process) is embedded as it is. ``index=False`` embeds nothing (a zero vector,
    which ranks last).

    Attributes:
        model_id: names the embeddings class, the dimensions and the fields, so
            vectors of another configuration never mix with these.
        dim: the ``dims`` of the config.
    """

    def __init__(self, config: IndexConfig) -> None:
        """Adapt ``config``: ``{"dims": int, "embed": Embeddings | function, "fields": [...]}``.

        Raises:
            InvalidInput: ``dims`` or ``embed`` missing or malformed, or ``embed`` async only.
        """
        dims = config.get("dims")
        if not isinstance(dims, int) or isinstance(dims, bool) or dims < 1:
            raise InvalidInput(f"index['dims'] must be a positive integer, not {dims!r}")
        embed = config.get("embed")
        if inspect.iscoroutinefunction(embed):
            raise InvalidInput("index['embed'] must embed synchronously (recall embeds inside a commit)")
        try:
            self._embeddings: Embeddings = ensure_embeddings(embed)
        except (ValueError, ImportError) as exc:
            raise InvalidInput(f"index['embed'] cannot embed: {exc}") from None
        fields = list(config.get("fields") or ["$"])
        self.dim = dims
        digest = hashlib.blake2b(json.dumps(fields).encode(), digest_size=4).hexdigest()
        self.model_id = f"langgraph-{type(self._embeddings).__name__}-{dims}-{digest}"
        self._fields = fields
        self._pending: dict[str, str] = {}

    def note(self, value: Mapping[str, Any], index: bool | list[str] | None) -> None:
        """Remember what to embed for an item about to be written (``index`` as a put takes it)."""
        if index is False:
            chosen = ""
        else:
            paths = self._fields if index is None or index is True else list(index)
            texts: list[str] = []
            for path in paths:
                texts += get_text_at_path(value, path if path == "$" else tokenize_path(path))
            chosen = "\n".join(texts)
        self._pending[_recall_text(value)] = chosen

    def __call__(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """One row per text; a text noted by :meth:`note` is embedded as its fields."""
        chosen = [self._pending.pop(text, text) for text in texts]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        rows = [row for row, text in enumerate(chosen) if text]
        if rows:
            vectors = np.asarray(self._embeddings.embed_documents([chosen[r] for r in rows]), np.float32)
            if vectors.shape != (len(rows), self.dim):
                raise InvalidInput(
                    f"index['embed'] returned vectors of shape {vectors.shape}; "
                    f"expected ({len(rows)}, {self.dim}) as index['dims'] says"
                )
            out[rows] = vectors
        return out


# -- provenance ---------------------------------------------------------------


def run_provenance() -> tuple[Provenance, dict[str, Any]]:
    """Provenance for a write from LangGraph's run config, and the commit meta.

    ``agent_step`` is the graph step, ``observation`` the thread id, ``tool_call``
    the node name (the run id when there is none), ``source`` ``"langgraph"``; the
    commit's meta holds the thread id, run id and checkpoint namespace. Outside a
    run (no config) only ``source`` is set.
    """
    try:
        config = get_config()
    except RuntimeError:  # not inside a runnable: nothing to say beyond the source
        return Provenance(source="langgraph"), {}
    configurable = config.get("configurable") or {}
    metadata = config.get("metadata") or {}

    def text(*values: Any) -> str | None:
        found = next((value for value in values if value not in (None, "")), None)
        return None if found is None else str(found)

    thread = text(configurable.get("thread_id"), metadata.get("thread_id"))
    run = text(config.get("run_id"), configurable.get("run_id"), metadata.get("run_id"))
    node = text(metadata.get("langgraph_node"))
    step = metadata.get("langgraph_step")
    provenance = Provenance(
        agent_step=step if isinstance(step, int) and not isinstance(step, bool) else None,
        observation=thread,
        tool_call=node if node is not None else run,
        source="langgraph",
    )
    commit_meta = {
        name: value
        for name, value in (
            ("thread_id", thread),
            ("run_id", run),
            ("checkpoint_ns", text(configurable.get("checkpoint_ns"))),
        )
        if value is not None
    }
    return provenance, commit_meta

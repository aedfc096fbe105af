"""LangGraph on Mnemosyne: a long-term store and a checkpointer with history.

``MnemosyneStore`` is a :class:`langgraph.store.base.BaseStore` (long-term memory);
``MnemosyneSaver`` a :class:`langgraph.checkpoint.base.BaseCheckpointSaver` (thread
state). Both need the ``langgraph`` extra (``pip install 'mnemosyne[langgraph]'``);
each is imported when first asked for, so one does not load the other's LangGraph parts.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mnemosyne.integrations.langgraph.saver import MnemosyneSaver
    from mnemosyne.integrations.langgraph.store import MnemosyneStore

__all__ = ["MnemosyneSaver", "MnemosyneStore"]

_WHERE = {"MnemosyneSaver": "saver", "MnemosyneStore": "store"}


def __getattr__(name: str) -> Any:
    """``MnemosyneSaver`` and ``MnemosyneStore``, imported on first use."""
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

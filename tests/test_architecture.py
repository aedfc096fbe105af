"""The architecture holds: one owner per keyspace, no private names across modules.

The layer rules themselves are ``import-linter`` contracts (``pyproject.toml``),
run by ``make test``; these tests check what import-linter cannot see.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LIBRARY = Path(__file__).resolve().parent.parent / "mnemosyne"
FACES = Path(__file__).resolve().parent.parent / "cli"

OWNERS: dict[str, set[str]] = {
    "store/objects.py": {"OBJECTS", "REDACTIONS"},
    "store/refs.py": {"REFS", "REFLOG"},
    "store/tenancy.py": {"META"},
    "store/settings.py": {"META"},
    "store/pending.py": {"META"},
    "store/remotes.py": {"META"},
    "index/graph.py": {"INDEX"},
    "index/changes.py": {"INDEX"},
    "index/recall_queue.py": {"RECALL"},
    "recall/postings.py": {"RECALL"},
    "recall/index.py": {"RECALL"},
    "recall/vectors.py": {"RECALL", "VECTORS"},
    "recall/reads.py": {"READS"},
    "store/kv/base.py": {"OBJECTS", "REFS", "REFLOG", "INDEX", "REDACTIONS", "RECALL", "VECTORS", "READS"},
    # A backend may name every keyspace: PostgreSQL caches OBJECTS values and has a table each.
    "store/kv/postgres_kv.py": {"OBJECTS"},
    "store/kv/postgres_conn.py": {"META"},
}
"""Which keyspaces each module may name (``kv/base`` defines and classifies them)."""


FOREIGN_PRIVATE = {
    # LangGraph's stores validate namespaces with this; ours must refuse exactly what
    # theirs refuse, so it uses the same function (the langgraph extra pins <2).
    "langgraph.store.base._validate_namespace",
}
"""Private names of other projects a face uses on purpose, each with its reason."""


def _modules(root: Path) -> list[Path]:
    return sorted(root.rglob("*.py"))


MODULES = _modules(LIBRARY) + _modules(FACES)


def _name(path: Path) -> str:
    return str(path.relative_to(path.parents[1]))


def _spaces_named(tree: ast.AST) -> set[str]:
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Space"
    }


@pytest.mark.parametrize(
    "path", _modules(LIBRARY) + _modules(FACES), ids=lambda p: str(p.relative_to(p.parents[1]))
)
def test_only_a_keyspaces_owner_names_it(path: Path) -> None:
    named = _spaces_named(ast.parse(path.read_text()))
    relative = str(path.relative_to(LIBRARY)) if path.is_relative_to(LIBRARY) else None
    allowed = OWNERS.get(relative or "", set())
    assert named <= allowed, f"{path.name} names {sorted(named - allowed)}, which it does not own"


def test_every_keyspace_has_an_owner() -> None:
    from mnemosyne.store.kv.base import Space

    owned = set().union(*(spaces for name, spaces in OWNERS.items() if name != "store/kv/base.py"))
    assert owned == {space.name for space in Space}


@pytest.mark.parametrize(
    "path", _modules(LIBRARY) + _modules(FACES), ids=lambda p: str(p.relative_to(p.parents[1]))
)
def test_no_module_imports_another_modules_private_names(path: Path) -> None:
    tree = ast.parse(path.read_text())
    private = [
        f"{node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__")
    ]
    assert [name for name in private if name not in FOREIGN_PRIVATE] == []
    # Nor reaches into another object's private attributes (self._x and cls._x are its own).
    reached = [
        f"{ast.unparse(node.value)}.{node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"})
    ]
    assert reached == []

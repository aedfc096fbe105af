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
    "store/object_store.py": {"OBJECTS", "REDACTIONS"},
    "store/refs.py": {"REFS", "REFLOG"},
    "store/tenancy.py": {"META"},
    "store/settings.py": {"META"},
    "store/pending.py": {"META"},
    "store/remote_config.py": {"META"},
    "store/tokens.py": {"META"},
    "index/graph.py": {"INDEX"},
    "index/changes.py": {"INDEX"},
    "index/recall_queue.py": {"RECALL"},
    "recall/postings.py": {"RECALL"},
    "recall/postings_writer.py": {"RECALL"},
    "recall/recall_index.py": {"RECALL"},
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
    # A forked child that reads a damaged store ends without the parent's atexit handlers
    # and finalizers (store/kv/apart.py): the documented use of os._exit.
    "os._exit",
}
"""Private names of other projects a face uses on purpose, each with its reason."""


def _modules(root: Path) -> list[Path]:
    return sorted(root.rglob("*.py"))


MODULES = _modules(LIBRARY) + _modules(FACES)


def _name(path: Path) -> str:
    return str(path.relative_to(path.parents[1]))


def _dotted(folder: Path) -> str:
    """The dotted name of a package folder of the library or the command line."""
    if folder.is_relative_to(LIBRARY):
        return ".".join(("mnemosyne", *folder.relative_to(LIBRARY).parts))
    return ".".join(("mnemo_cli", *folder.relative_to(FACES).parts))


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
    own_package = _dotted(path.parent)
    private = [
        f"{node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name.startswith("_")
        and not alias.name.startswith("__")
        # A private module of the importer's own package is that package's to use.
        and not (node.module == own_package and (path.parent / f"{alias.name}.py").is_file())
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


LAYERS = ("model", "store", "index", "history", "recall", "admin", "api")
"""The library's layer packages, bottom up (``pyproject.toml`` holds their import contract)."""


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or not (Tarjan), larger than one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(start: str) -> None:
        # Iterative, so a long chain of imports cannot exhaust the recursion limit.
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, pending = work[-1]
            for target in pending:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[module] = min(low[module], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[module])
                if low[module] == index[module]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == module:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return groups


def _import_graph() -> dict[str, set[str]]:
    """Every import between the library's modules, those inside functions and for typing included."""
    import grimp

    built = grimp.build_graph("mnemosyne", "mnemo_cli")
    return {
        module: {
            target for target in built.find_modules_directly_imported_by(module) if target in built.modules
        }
        for module in built.modules
    }


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert _strongly_connected(graph) == [["a", "b", "c"]]


def test_no_module_imports_itself_back() -> None:
    # grimp reads every import statement, at module level, in functions and under
    # TYPE_CHECKING: a cycle hidden in a function is still a cycle to a reader.
    assert _strongly_connected(_import_graph()) == []


def test_api_classes_have_one_base_at_most_and_no_api_class_but_resource() -> None:
    # Repo holds its parts as attributes: no mixins, no partial classes sharing private state.
    # Resource (close, and use as a context manager) is the one base api/ classes share.
    trees = {path: ast.parse(path.read_text()) for path in sorted((LIBRARY / "api").glob("*.py"))}
    api_classes = {
        node.name for tree in trees.values() for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
    }
    mixed = []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = [ast.unparse(base) for base in node.bases]
            if len(bases) > 1 or any(base in api_classes - {"Resource"} for base in bases):
                mixed.append(f"{path.name}:{node.name}({', '.join(bases)})")
    assert mixed == []


def test_a_module_name_says_its_layer() -> None:
    # Two modules of one name in two layers (two objects.py, two remotes.py) leave a reader
    # unsure where they are; a leading underscore (private to its package) does not make a new name.
    seen: dict[str, list[str]] = {}
    for layer in LAYERS:
        for path in sorted((LIBRARY / layer).rglob("*.py")):
            if path.name != "__init__.py":
                seen.setdefault(path.stem.lstrip("_"), []).append(str(path.relative_to(LIBRARY)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}


# -- the tests reach the library through its public names --------------------------------

TESTS = Path(__file__).resolve().parent
LIBRARY_PACKAGES = ("mnemosyne", "mnemo_cli")

PRIVATE_REACHES: set[tuple[str, str]] = {
    # An MCP SDK that is installed but fails to import, which no test environment has.
    ("test_serve_mcp_on_demand.py", "McpOnDemand._built"),
    # The handle's object store, whose decode cache test_object_cache bounds: no public path leads there.
    ("support/internals.py", "repo._handle"),
    # The handle's vector matrices, whose approximate rows test_approximate and test_recall count.
    ("support/internals.py", "repo._recall._vectors"),
    # The best-first walk is checked row by row against a sort, which a search could not show.
    ("test_recall.py", "semantic._best_first"),
    # The process's stem cache holds words of memories; that erasure empties it no search can show.
    ("test_recall_quality.py", "text_module._STEMS"),
}
"""``(file under tests/, expression)`` of each reach into a private name of the library, and why.

A test reaches a private name only to check a mechanism no public behaviour shows;
everything else goes through public names (and the hooks the library keeps for tests,
such as ``ObjectStore.cache_contents``).
"""


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _is_library(module: str) -> bool:
    return module.split(".")[0] in LIBRARY_PACKAGES


def _foreign_names(nodes: list[ast.AST]) -> set[str]:
    """Names bound by imports from outside the library (``os`` in ``os._exit`` is not ours)."""
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names if not _is_library(a.name)}
        elif isinstance(node, ast.ImportFrom) and not _is_library(node.module or ""):
            names |= {a.asname or a.name for a in node.names}
    return names


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _private_reaches(tree: ast.AST) -> set[str]:
    """Private names of the library the module's code reaches, as ``expression`` text."""
    nodes = list(ast.walk(tree))  # walked once, not three times: walking was most of the cost
    foreign = _foreign_names(nodes)

    def ours(node: ast.expr) -> bool:
        root = _root(node)
        return not (isinstance(root, ast.Name) and (root.id in {"self", "cls"} or root.id in foreign))

    reached: set[str] = set()
    attributes = [
        node
        for node in nodes
        if isinstance(node, ast.Attribute) and _is_private(node.attr) and ours(node.value)
    ]
    inner = {id(node.value) for node in attributes}
    # Of a chain (repo._recall._vectors) the whole chain is one reach.
    reached |= {ast.unparse(node) for node in attributes if id(node) not in inner}
    for node in nodes:
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            args = node.args
            if name in {"setattr", "delattr", "getattr", "hasattr"} and args:
                if len(args) > 1 and isinstance(args[1], ast.Constant) and isinstance(args[1].value, str):
                    if _is_private(args[1].value) and ours(args[0]):
                        reached.add(f"{ast.unparse(args[0])}.{args[1].value}")
                elif isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
                    # monkeypatch.setattr("package.module.name", value)
                    target = args[0].value
                    if _is_library(target) and any(_is_private(part) for part in target.split(".")):
                        reached.add(target)
        elif isinstance(node, ast.ImportFrom) and _is_library(node.module or ""):
            for alias in node.names:
                if any(_is_private(part) for part in (*(node.module or "").split("."), alias.name)):
                    reached.add(f"{node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            reached |= {
                a.name for a in node.names if _is_library(a.name) and any(map(_is_private, a.name.split(".")))
            }
    return reached


def _test_modules() -> list[Path]:
    return sorted(TESTS.rglob("*.py"))


def test_tests_reach_no_private_name_of_the_library_but_the_listed_ones() -> None:
    found = {
        (str(path.relative_to(TESTS)), reach)
        for path in _test_modules()
        for reach in _private_reaches(ast.parse(path.read_text()))
    }
    assert sorted(found - PRIVATE_REACHES) == []
    # An entry nothing needs any more goes too: the list stays what the tests do.
    assert sorted(PRIVATE_REACHES - found) == []


def test_the_private_reach_finder_sees_every_form() -> None:
    source = """
import os
from mnemosyne.admin import transfer
from mnemosyne.api._handle import Handle
from mnemosyne.recall.semantic import _best_first
import mnemosyne.api._remotes

def test(repo, monkeypatch):
    self._mine, cls._theirs, os._exit, repo.__class__, repo.public.name
    repo._recall._vectors()
    monkeypatch.setattr(transfer, "_store", None)
    monkeypatch.setattr("mnemosyne.admin.transfer._plan", None)
    getattr(repo, "_handle")
"""
    assert _private_reaches(ast.parse(source)) == {
        "mnemosyne.api._handle.Handle",
        "mnemosyne.recall.semantic._best_first",
        "mnemosyne.api._remotes",
        "repo._recall._vectors",
        "transfer._store",
        "mnemosyne.admin.transfer._plan",
        "repo._handle",
    }

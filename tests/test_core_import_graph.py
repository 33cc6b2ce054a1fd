"""The core's modules import one another without circles.

An import circle makes a module's names depend on which module was imported first (a
name read while its module is half-initialised is missing) and ties the modules of the
circle into one room. Only imports that run when a module is imported count: an import
inside a function runs when it is called, and one under ``if TYPE_CHECKING:`` never.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

import relbench

PACKAGE = Path(relbench.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(test: ast.expr) -> bool:
    """Whether an ``if`` test is ``TYPE_CHECKING`` or ``typing.TYPE_CHECKING``."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _module_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The imports a module runs when it is imported: at module level, in ``try`` and
    ``if`` blocks (but not ``if TYPE_CHECKING:``), never inside a function or class body."""
    found, pending = [], list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If):
            pending += node.orelse if _type_checking(node.test) else node.body + node.orelse
        elif isinstance(node, ast.Try):
            pending += node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body]
        elif isinstance(node, ast.With):
            pending += node.body
    return found


def _imported(node: ast.Import | ast.ImportFrom, here: str, modules: set[str]) -> set[str]:
    """The relbench modules an import statement of module ``here`` loads."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names} & modules
    base = node.module or ""
    if node.level:  # relative: from the package of ``here``
        package = here.split(".")[:-node.level] if not here.endswith("__init__") else here.split(".")
        base = ".".join([*package, base] if base else package)
    names = {f"{base}.{alias.name}" for alias in node.names}
    return ({base} | names) & modules


def import_graph() -> nx.DiGraph:
    """The graph of module-level imports between the modules of the relbench package."""
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(p) for p in paths}
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for path in paths:
        here = _module_name(path)
        for node in _module_level_imports(ast.parse(path.read_text(), str(path))):
            graph.add_edges_from((here, target) for target in _imported(node, here, modules) if target != here)
    return graph


def test_the_graph_sees_module_level_imports_only():
    """The parser counts what runs at import and nothing else (so the check can fail)."""
    tree = ast.parse("import relbench.a\nfrom relbench import b\nfrom typing import TYPE_CHECKING\n"
                     "if TYPE_CHECKING:\n    from relbench import c\n"
                     "try:\n    from relbench.d import x\nexcept ImportError:\n    pass\n"
                     "def f():\n    from relbench import e\n")
    modules = {f"relbench.{m}" for m in "abcde"}
    found = set().union(*(_imported(n, "relbench.z", modules) for n in _module_level_imports(tree)))
    assert found == {"relbench.a", "relbench.b", "relbench.d"}


def test_the_core_has_no_import_circle():
    graph = import_graph()
    assert graph.number_of_edges() > 20  # the graph was read
    cycles = sorted(sorted(c) for c in nx.simple_cycles(graph))
    assert not cycles, f"import circles among relbench modules: {cycles}"

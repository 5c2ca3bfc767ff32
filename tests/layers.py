"""Import graph of a source folder, read with ``ast`` (nothing is imported), and its cycles.

Every import counts, also those inside functions: a lazy import hides a cycle from Python
at load time, not from the design. Imports under ``if TYPE_CHECKING:`` are left out (they
never run) unless asked for. Shared by the layer tests of each package (``tests/*/test_layers.py``).
"""

from __future__ import annotations

import ast
from pathlib import Path


def module_name(path: Path, folder: Path, package: str) -> str:
    parts = list(path.relative_to(folder).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([package, *parts])


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, type_checking: bool) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node) and not type_checking:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _known(name: str, modules: set[str]) -> str | None:
    """``name`` or its longest prefix that is a module of the graph."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(folder: Path, package: str, skip: tuple[str, ...] = (),
                 type_checking: bool = False) -> dict[str, set[str]]:
    """Module -> the modules of the same tree it imports. ``skip``: subfolders left out;
    ``type_checking``: count imports under ``if TYPE_CHECKING:`` too."""
    return packages_graph({package: folder}, skip, type_checking)


def packages_graph(packages: dict[str, Path], skip: tuple[str, ...] = (),
                   type_checking: bool = False) -> dict[str, set[str]]:
    """One graph over several folders, each mapped to a package name (setup.py's package_dir:
    ``targets/`` is ``edgekit.targets``), so cycles across them are seen too."""
    files = {module_name(p, folder, package): p
             for package, folder in packages.items() for p in sorted(folder.rglob("*.py"))
             if not any(part in skip or part.startswith(".")
                        for part in p.relative_to(folder).parts[:-1])}
    modules = set(files)
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in _imports(ast.parse(path.read_text(), str(path)), type_checking):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = name if is_package else name.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names]
            for target in targets:
                known = _known(target, modules)
                if known and known != name:
                    edges.add(known)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def imports_of(graph: dict[str, set[str]], prefix: str) -> set[str]:
    """Every module that modules named ``prefix``/``prefix.*`` import."""
    return {t for m, ts in graph.items() if m == prefix or m.startswith(prefix + ".") for t in ts}

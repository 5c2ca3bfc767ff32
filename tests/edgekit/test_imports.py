"""The on-device package's import graph has no cycle, lazy (function-level) and typing-only
(``if TYPE_CHECKING``) imports included: a cycle hidden behind an import inside a function or
a type annotation is still two modules that depend on each other.
And ``edgekit.load`` shows its options (a real signature, the fields of RuntimeOptions)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

import edgekit
import edgekit.model
from edgekit.session import RuntimeOptions

ROOT = Path(__file__).resolve().parents[2]
# the folders setup.py maps into the edgekit namespace on a device (not edgekit.converters)
PACKAGES = {"edgekit": ROOT / "edgekit", "edgekit.targets": ROOT / "targets"}


def modules() -> dict[str, Path]:
    found = {}
    for prefix, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((prefix, *parts))] = path
    return found


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Modules of the graph that ``name`` imports anywhere in its source."""
    tree = ast.parse(path.read_text())
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                package = name if is_package else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}" if base else package
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                       for alias in node.names]
        for target in targets:
            while target and target not in known:  # a name inside a module: the module
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_cycle_in_the_device_package() -> None:
    known = modules()
    assert "edgekit.model" in known and "edgekit.targets.schema" in known
    graph = {name: imports_of(name, path, known) for name, path in known.items()}
    assert "edgekit.tuner" in graph["edgekit.model"]  # the walk sees real edges
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_lazy_cycle(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("import b\n")
    (tmp_path / "b.py").write_text("def f():\n    from a import x\n")  # lazy
    known = {"a": tmp_path / "a.py", "b": tmp_path / "b.py"}
    graph = {n: imports_of(n, p, known) for n, p in known.items()}
    assert find_cycle(graph) == ["a", "b", "a"]
    (tmp_path / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                   "    import a\n")
    graph = {n: imports_of(n, p, known) for n, p in known.items()}
    assert find_cycle(graph) == ["a", "b", "a"]


def test_load_shows_its_options() -> None:
    fields = {f.name: f.default for f in dataclasses.fields(RuntimeOptions)}
    for load in (edgekit.load, edgekit.model.load):
        params = inspect.signature(load).parameters
        assert list(params)[:3] == ["path", "backend", "threads"]
        assert not any(p.kind is p.VAR_KEYWORD for p in params.values())  # no **options
        assert {n: p.default for n, p in params.items() if n in fields} == fields
        # trusted_keys: which artifacts load at all, not how a loaded one runs
        assert set(params) == {"path", "backend", "trusted_keys", *fields}
        assert params["trusted_keys"].default is None

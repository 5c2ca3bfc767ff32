"""The converters' layers (docs/architecture.md, "Layers"): no import cycle, and each layer
imports only from the layers below it. Read with ast, so nothing heavy is imported."""

from __future__ import annotations

from pathlib import Path

from ..conftest import ROOT
from ..layers import find_cycle, import_graph

PACKAGE = "edgekit.converters"


def graph() -> dict[str, set[str]]:
    return import_graph(ROOT / "converters", PACKAGE)


def test_the_walker_finds_a_cycle_hidden_behind_a_lazy_import(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..a import x\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\n"
                              "if TYPE_CHECKING:\n    from .a import y\n")
    found = import_graph(pkg, "pkg")
    assert found["pkg.a"] == {"pkg.sub.b"} and found["pkg.c"] == set()
    assert find_cycle(found) == ["pkg.a", "pkg.sub.b", "pkg.a"]
    assert import_graph(pkg, "pkg", type_checking=True)["pkg.c"] == {"pkg.a"}


def test_converters_have_no_import_cycle() -> None:
    assert find_cycle(graph()) is None


def test_no_import_cycle_counting_type_only_imports() -> None:
    # a cycle behind `if TYPE_CHECKING` is still two modules that depend on each other
    # (the guard and its report shared their outcome types so: search/guard_outcome.py now)
    assert find_cycle(import_graph(ROOT / "converters", PACKAGE, type_checking=True)) is None


# docs/architecture.md, "Layers": a module may import its own layer and the ones before it
LAYERS = [
    ("contracts", ["context", "graph", "pipeline"]),
    ("helpers", ["core", "executor", "pytorch"]),
    ("libraries", ["estimate", "tflite", "pruning", "metrics", "emulation", "inputs", "bundle",
                   "report", "ptq"]),
    ("stages", ["stages"]),
    ("search", ["search"]),
    ("API", ["", "api", "summary"]),
    ("matrix", ["matrix"]),
    ("commands", ["commands"]),
]


def layer_of(module: str) -> int:
    rest = module.removeprefix(PACKAGE).removeprefix(".")
    head = rest.split(".")[0]
    for index, (_, members) in enumerate(LAYERS):
        if head in members:
            return index
    raise AssertionError(f"{module} is in no layer of docs/architecture.md")


def test_each_layer_imports_only_the_layers_before_it() -> None:
    upward = [(m, t) for m, targets in graph().items() for t in targets
              if layer_of(t) > layer_of(m)]
    assert upward == []


def test_the_estimator_is_layered_inside() -> None:
    g = graph()
    est = f"{PACKAGE}.estimate"
    # types import nothing; the host-rate cache sits above the cost model, never below it
    assert g[f"{est}.types"] == set()
    assert f"{est}.host_rates" not in g[f"{est}.cost"] and f"{est}.cost" in g[f"{est}.host_rates"]
    # the orchestrator is on top: only the package's own __init__ imports it
    assert {m for m, ts in g.items() if f"{est}.estimator" in ts} == {est}

"""The on-device package's import graph has no cycle, lazy (function-level) and typing-only
(``if TYPE_CHECKING``) imports included: a cycle hidden behind an import inside a function or
a type annotation is still two modules that depend on each other. Each folder imports only
the folders below it (docs/architecture.md, "On the device").
And ``edgekit.load`` shows its options (a real signature, the fields of RuntimeOptions)."""

from __future__ import annotations

import inspect

import edgekit
import edgekit.model
from edgekit.runtime.options import RuntimeOptions

from ..conftest import ROOT
from ..layers import find_cycle, packages_graph

# the folders setup.py maps into the edgekit namespace on a device (not edgekit.converters)
PACKAGES = {"edgekit": ROOT / "edgekit", "edgekit.targets": ROOT / "targets"}

# docs/architecture.md, "On the device": lowest first; a module imports its own layer and
# the ones before it, never one after it (typing-only imports included)
LAYERS = [
    ("base", ["errors", "tempfiles", "targets"]),
    ("device", ["device"]),
    ("trust", ["trust"]),
    ("artifact", ["artifact"]),
    ("numerics", ["numerics"]),
    ("backends", ["backends"]),
    ("runtime", ["runtime"]),
    ("adapt", ["adapt"]),
    ("batching", ["batching"]),
    ("API", ["model", ""]),  # edgekit.load, Model (edgekit/__init__.py re-exports lazily)
    ("ops", ["ops"]),
    ("commands", ["commands"]),
    ("CLI", ["cli", "__main__"]),
]
ROOT_MODULES_AT_MOST = 10


def device_graph() -> dict[str, set[str]]:
    return packages_graph(PACKAGES, type_checking=True)


def layer_of(module: str) -> int:
    head = module.removeprefix("edgekit").removeprefix(".").split(".")[0]
    for index, (_, members) in enumerate(LAYERS):
        if head in members:
            return index
    raise AssertionError(f"{module} is in no layer of docs/architecture.md")


def test_no_import_cycle_in_the_device_package() -> None:
    # typing-only imports count: a cycle behind `if TYPE_CHECKING` is still two modules
    # that depend on each other
    graph = device_graph()
    assert "edgekit.model" in graph and "edgekit.targets.schema" in graph
    assert "edgekit.adapt.tuner" in graph["edgekit.model"]  # the walk sees real edges
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_each_folder_imports_only_the_folders_below_it() -> None:
    graph = device_graph()
    upward = sorted((m, t) for m, targets in graph.items() for t in targets
                    if layer_of(t) > layer_of(m))
    assert upward == []
    # the rule can fail: the composer sits above the tuner and the batcher
    assert layer_of("edgekit.model") > layer_of("edgekit.adapt.tuner") > layer_of(
        "edgekit.runtime.session")


def test_the_root_holds_a_few_modules_and_folders_name_the_parts() -> None:
    root = sorted(p.stem for p in (ROOT / "edgekit").glob("*.py"))
    assert len(root) <= ROOT_MODULES_AT_MOST, root
    folders = {p.name for p in (ROOT / "edgekit").iterdir()
               if (p / "__init__.py").is_file()}
    assert folders == {members[0] for _, members in LAYERS[1:] if members[0] not in root} - {""}


def test_load_shows_its_options() -> None:
    fields = RuntimeOptions.keywords()  # the flat keywords, each with its default
    assert {"threads", "allow_spinning", "max_batch", "power_root", "tuner"} <= set(fields)
    for load in (edgekit.load, edgekit.model.load):
        params = inspect.signature(load).parameters
        assert list(params)[:4] == ["path", "options", "backend", "threads"]
        assert not any(p.kind is p.VAR_KEYWORD for p in params.values())  # no **options
        assert {n: p.default for n, p in params.items() if n in fields} == fields
        # trusted_keys, pin: which artifacts load at all, not how a loaded one runs
        assert set(params) == {"path", "options", "backend", "trusted_keys", "pin", *fields}
        assert params["trusted_keys"].default is None and params["pin"].default is None
    assert edgekit.load is edgekit.model.load  # written once
    assert edgekit.RuntimeOptions is RuntimeOptions

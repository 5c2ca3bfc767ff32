"""The on-device package's import graph has no cycle, lazy (function-level) and typing-only
(``if TYPE_CHECKING``) imports included: a cycle hidden behind an import inside a function or
a type annotation is still two modules that depend on each other.
And ``edgekit.load`` shows its options (a real signature, the fields of RuntimeOptions)."""

from __future__ import annotations

import dataclasses
import inspect

import edgekit
import edgekit.model
from edgekit.runtime.session import RuntimeOptions

from ..conftest import ROOT
from ..layers import find_cycle, packages_graph

# the folders setup.py maps into the edgekit namespace on a device (not edgekit.converters)
PACKAGES = {"edgekit": ROOT / "edgekit", "edgekit.targets": ROOT / "targets"}


def test_no_import_cycle_in_the_device_package() -> None:
    # typing-only imports count: a cycle behind `if TYPE_CHECKING` is still two modules
    # that depend on each other
    graph = packages_graph(PACKAGES, type_checking=True)
    assert "edgekit.model" in graph and "edgekit.targets.schema" in graph
    assert "edgekit.adapt.tuner" in graph["edgekit.model"]  # the walk sees real edges
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_load_shows_its_options() -> None:
    fields = {f.name: f.default for f in dataclasses.fields(RuntimeOptions)}
    for load in (edgekit.load, edgekit.model.load):
        params = inspect.signature(load).parameters
        assert list(params)[:3] == ["path", "backend", "threads"]
        assert not any(p.kind is p.VAR_KEYWORD for p in params.values())  # no **options
        assert {n: p.default for n, p in params.items() if n in fields} == fields
        # trusted_keys, pin: which artifacts load at all, not how a loaded one runs
        assert set(params) == {"path", "backend", "trusted_keys", "pin", *fields}
        assert params["trusted_keys"].default is None and params["pin"].default is None

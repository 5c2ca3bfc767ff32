"""User metrics and hooks named ``module:function`` (``pkg.mod:fn`` or ``path/to/file.py:fn``).

A user metric is called ``fn(float_outputs, int8_outputs, labels)`` with the lists of
output arrays (samples on axis 0) and the labels or None. It returns either a number (a
score, higher is better, in 0..1) or a ``MetricResult`` for full control. For a number,
the function is called once more with the float outputs in both places: that baseline
(float against itself without labels, float against labels with them) minus the int8
score, x 100, is the ``drop`` in points.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from pathlib import Path

from edgekit.errors import UserError

from .base import Labels, MetricResult, Outputs, check_pair


def load_callable(spec: str, what: str = "metric") -> Callable[..., object]:
    """Import ``module:function`` (or ``file.py:function``); a UserError names what failed."""
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise UserError(f"{what} {spec!r}: expected 'module:function' or 'file.py:function'")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise UserError(f"{what} {spec!r}: no file {path}")
            loader = importlib.util.spec_from_file_location(path.stem, path)
            if loader is None or loader.loader is None:
                raise UserError(f"{what} {spec!r}: cannot import {path}")
            module = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except UserError:
        raise
    except Exception as exc:  # the user's module failed on import: say so, keep the cause
        raise UserError(f"{what} {spec!r}: importing {module_name} failed: {exc}") from exc
    function = getattr(module, attr, None)
    if not callable(function):
        raise UserError(f"{what} {spec!r}: {module_name} has no callable {attr!r}")
    return function


def _number(spec: str, value: object) -> float | MetricResult:
    if isinstance(value, MetricResult):
        return value
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise UserError(f"metric {spec!r} returned {type(value).__name__}; expected a number "
                        "(higher is better) or a MetricResult") from exc


def user_metric(spec: str) -> Callable[..., MetricResult]:
    """A metric function wrapping the user's ``module:function``."""
    function = load_callable(spec)

    def metric(reference: Outputs, candidate: Outputs, labels: Labels | None = None) -> MetricResult:
        check_pair(spec, reference, candidate)
        value = _number(spec, function(list(reference), list(candidate), labels))
        if isinstance(value, MetricResult):
            return value
        # the float model scored by the same function gives the baseline: against itself
        # (agreement, ideally 1) without labels, its own accuracy with them
        baseline = _number(spec, function(list(reference), list(reference), labels))
        base = baseline.score if isinstance(baseline, MetricResult) else baseline
        return MetricResult(spec, value, "score", True, (base - value) * 100, base if labels is not None else None)

    return metric

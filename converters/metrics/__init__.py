"""Task metrics: how much of the task int8 keeps, not only how close its numbers are.

``get_metric(name, **options)`` returns a function ``(float_outputs, int8_outputs,
labels=None) -> MetricResult`` (contract in ``base.py``). ``name`` is one of ``METRICS``
or a user ``module:function``. ``choose_default(outputs, has_labels)`` picks one from the
float outputs and says why. Per-output and per-slice figures (worst slice SQNR, decisions
changed) and the packed-output detector live in ``slices.py`` and ``packed.py``.

    from edgekit.converters.metrics import get_metric, choose_default
    choice = choose_default(float_outputs, has_labels=labels is not None)
    result = get_metric(choice.name)(float_outputs, int8_outputs, labels)
    result.drop   # points lost: what --max-accuracy-drop bounds
"""

from __future__ import annotations

import functools

from edgekit.errors import UserError

# modules: their metric is the function of the same name
from . import cells, ctc, dense, detection, regions, signal, sqnr, top1
from .base import Labels, Metric, MetricResult, Outputs
from .choose import DefaultMetric, choose_default
from .user import load_callable, user_metric

METRICS: dict[str, Metric] = {"top1": top1.top1, "detection": detection.detection, "ctc": ctc.ctc,
                              "sqnr": sqnr.sqnr, "map_iou": dense.map_iou, "embedding": dense.embedding,
                              "tags": dense.tags, "regression": dense.regression, "cells": cells.cells,
                              "regions": regions.regions, "signal": signal.signal}
# options each built-in metric accepts (CLI flags map onto these)
OPTIONS: dict[str, frozenset[str]] = {
    "top1": frozenset(),
    "detection": frozenset({"postprocess", "conf", "iou"}),
    "ctc": frozenset({"blank"}),
    "map_iou": frozenset({"threshold", "min_iou"}),
    "regions": frozenset({"threshold", "min_score", "iou"}),
    "embedding": frozenset(),
    "tags": frozenset(),
    "cells": frozenset({"threshold"}),
    "regression": frozenset(),
    "signal": frozenset(),
    "sqnr": frozenset(),
}


def get_metric(name: str, **options: object) -> Metric:
    """The metric called ``name`` with ``options`` bound; a UserError names the allowed set.

    ``postprocess`` (detection) may be a callable or a ``module:function`` string."""
    if ":" in name:
        if options:
            raise UserError(f"metric {name!r}: a user metric takes no options, got {sorted(options)}")
        return user_metric(name)
    if name not in METRICS:
        raise UserError(f"unknown metric {name!r}: expected one of {', '.join(METRICS)} or module:function")
    unknown = set(options) - OPTIONS[name]
    if unknown:
        allowed = ", ".join(sorted(OPTIONS[name])) or "none"
        raise UserError(f"metric {name!r} has no option {', '.join(sorted(unknown))}; its options: {allowed}")
    if isinstance(options.get("postprocess"), str):
        options["postprocess"] = load_callable(str(options["postprocess"]), "postprocess")
    return functools.partial(METRICS[name], **options) if options else METRICS[name]


__all__ = ["METRICS", "DefaultMetric", "Labels", "Metric", "MetricResult", "Outputs", "choose_default",
           "get_metric", "load_callable"]

"""The decisions a plain build takes after ``validate``, as stages of the one ``STAGES`` order.

Each may change the model that ships (the accuracy guard rebuilds layers at a higher precision;
the speed choices ship float where int8 is slower under ``--objective latency``), so each is a
stage: named, ordered, timed and recorded in the manifest like the others. They live beside the
search because they share its guard and scorer; ``pipeline.STAGES`` names them lazily. A
budget-fitting search takes these decisions itself among its candidates, so its plans leave
them out (``pipeline.plan``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from ..context import BuildContext
from ..pipeline import Stage


class _Decision(Stage):
    """A decision function of ``search/`` run as a stage."""

    requires = frozenset({"float_path", "outputs", "quant_path", "val", "validation"})
    provides = frozenset({"quant_path", "quantization", "validation"})
    decide: ClassVar[Callable[[BuildContext], None]]

    def run(self, ctx: BuildContext) -> None:
        began = time.perf_counter()
        type(self).decide(ctx)
        # the build's timing line names the decision itself (tools/benchmarks/bench_build.py reads it)
        ctx.timings.seconds[self.name] = round(time.perf_counter() - began, 3)


def _enforce_accuracy(ctx: BuildContext) -> None:
    from .autoguard import enforce_accuracy

    enforce_accuracy(ctx)


def _choose_by_speed(ctx: BuildContext) -> None:
    from .speed_choice import choose_by_speed

    choose_by_speed(ctx)


def _choose_layers_by_speed(ctx: BuildContext) -> None:
    from .layer_speed import choose_layers_by_speed

    choose_layers_by_speed(ctx)


class AccuracyDecision(_Decision):
    """Judge int8 against the budget on the evidence; on a miss run the guard (or refuse)."""

    name = "accuracy_decision"
    decide = staticmethod(_enforce_accuracy)


class SpeedChoice(_Decision):
    """Report an int8 model slower than float; under ``--objective latency`` ship float."""

    name = "speed_choice"
    decide = staticmethod(_choose_by_speed)


class LayerSpeed(_Decision):
    """Name the layers int8 makes slower; under ``--objective latency`` ship them float."""

    name = "layer_speed"
    requires = frozenset({"quant_path"})
    provides = frozenset({"quant_path", "quantization"})
    decide = staticmethod(_choose_layers_by_speed)

"""The contract every task metric follows: float and int8 outputs in, a ``MetricResult`` out.

A metric is a function ``metric(reference, candidate, labels=None) -> MetricResult``:

* ``reference``: the float model's outputs, one array per graph output, samples on axis 0;
* ``candidate``: the int8 model's outputs in the same order and shapes;
* ``labels``: optional ground truth in the metric's own form (class ids for ``top1``,
  per-image boxes and classes for ``detection``, symbol sequences for ``ctc``).

With labels a metric scores both models against the truth and ``drop`` is what int8 lost
against float; without labels it scores the int8 model's agreement with float and ``drop``
is the disagreement. ``drop`` is in points (percent of the task's score) so one accuracy
budget (``--max-accuracy-drop``) bounds every task; ``None`` for metrics that are not a
share (SQNR in dB), which a budget in points cannot bound.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .evidence import PerSample

Outputs = Sequence[np.ndarray]
# per-task ground truth: class ids, (boxes, classes) per image, symbol sequences, ...
Labels = np.ndarray | Sequence[object] | tuple[Sequence[np.ndarray], Sequence[np.ndarray]]


@dataclass(frozen=True)
class MetricResult:
    name: str                       # registry name or module:function
    score: float                    # the int8 model's headline figure
    unit: str                       # "share" (0..1), "dB", "CER" ...
    higher_is_better: bool
    drop: float | None              # points lost against float; None: not a share
    float_score: float | None = None  # the float model's figure against labels, when labels came
    details: dict[str, float] = field(default_factory=dict)
    # the drop's per-sample parts (``evidence.PerSample``): what its interval is computed from
    per_sample: PerSample | None = None

    def summary(self) -> str:
        head = f"{self.name}: {self.score:.4g} {self.unit}"
        if self.float_score is not None:
            head += f" (float {self.float_score:.4g})"
        if self.drop is not None:
            head += f", drop {self.drop:.2f} points"
        return head


Metric = Callable[..., MetricResult]


def check_pair(name: str, reference: Outputs, candidate: Outputs) -> None:
    """Same number of outputs with the same shapes, or a ValueError naming both."""
    ref_shapes = [tuple(np.shape(a)) for a in reference]
    got_shapes = [tuple(np.shape(a)) for a in candidate]
    if ref_shapes != got_shapes or not ref_shapes:
        raise ValueError(f"metric {name}: float outputs {ref_shapes} and int8 outputs {got_shapes} "
                         "must be non-empty and of the same shapes")

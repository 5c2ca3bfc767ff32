"""Pruning: structured for torch sources, unstructured sparsity for ONNX sources.

``structured`` removes channels from a torch module with torch-pruning (multiples of 8,
L2-magnitude importance), uniformly or at per-group widths chosen by ``widths`` from each
group's measured sensitivity and estimated latency share; ``distill`` and ``recover`` distil the pruned model towards the dense one and
re-estimates BatchNorm statistics on the calibration inputs (no labels); ``sparsity`` zeroes
small weights of an ONNX graph, which shrinks the zip-deflated artifact. The build stage
that applies them is ``edgekit.converters.stages.prune``. torch is imported inside functions.
"""

from __future__ import annotations

from .distill import RecoveryReport, distill
from .recover import reestimate_batchnorm, steps_for
from .sparsity import SparsityReport, sparsify
from .structured import ROUND_TO, StructuredReport, kept_channels, prune_structured

__all__ = ["ROUND_TO", "RecoveryReport", "SparsityReport", "StructuredReport", "distill",
           "kept_channels", "prune_structured", "reestimate_batchnorm", "sparsify", "steps_for"]

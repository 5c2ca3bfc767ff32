"""Each model output's real shape and the axis that holds its samples, measured by running it.

An exporter's declared output shapes cannot be trusted for either: ddddocr declares
``[1, 'seqlen']`` for CTC logits that are ``[T, N, C]``; silero-vad declares its recurrent
state ``['?', '?', '?']`` for ``[2, N, 128]``. Every join of per-run outputs (the runner, the
.tflite parity check, the test vectors, the device's row-by-row runs) needs the samples' axis,
so the build measures it once, after the inputs are pinned:

* one sample gives the real shape; its batch axis must be one of the axes of size 1;
* when that is not simply axis 0 alone, two samples (the inputs' batch dims freed in a copy
  of the model when it fixes them) show which axis grew from 1 to 2, the rest unchanged;
* when the model cannot run two samples, one candidate is taken as it is; among several, the
  output's declared dim sharing an input's batch symbol, else axis 0 when it is one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from edgekit.converters.context import Dataset

FREED = "edgekit_samples"


def batch_axis(one: tuple[int, ...], two: tuple[int, ...] | None, hint: int | None) -> int:
    """The samples' axis of an output that is ``one`` for one sample and ``two`` for two
    (None: not measured); ``hint``: the axis its declared shape names by a batch symbol."""
    candidates = [a for a, d in enumerate(one) if d == 1]
    if two is not None and len(two) == len(one):
        grown = [a for a in range(len(one)) if one[a] == 1 and two[a] == 2]
        same = all(one[a] == two[a] for a in range(len(one)) if a not in grown)
        if len(grown) == 1 and same:
            return grown[0]
    if len(candidates) == 1:
        return candidates[0]
    if hint in candidates:
        return int(hint)  # type: ignore[arg-type]  # hint is an int when in candidates
    return 0


def declared_hint(inputs: list[dict[str, Any]], spec: dict[str, Any]) -> int | None:
    """The axis of ``spec``'s declared shape named like an input's batch dim (a named symbol,
    not '?'), if any."""
    symbols = {str(i["shape"][i.get("batch_axis", 0)]) for i in inputs
               if len(i["shape"]) > i.get("batch_axis", 0)
               and not isinstance(i["shape"][i.get("batch_axis", 0)], int)} - {"?", ""}
    return next((a for a, d in enumerate(spec["shape"]) if str(d) in symbols), None)


def _freed(model: Any, data: Dataset) -> bytes:
    """``model`` with every input's batch dim and every output's dims symbolic."""
    from edgekit.converters.graph.shapes import batch_freed

    return batch_freed(model, data.axes, data.arrays, FREED, outputs=True).SerializeToString()


def _two_samples(model: Any, data: Dataset) -> list[tuple[int, ...]] | None:
    """Output shapes for two samples, or None when the model cannot run them."""
    from edgekit.converters.core.runner import session

    pair = data.take(np.array([0, min(1, len(data) - 1)]))
    try:
        sess = session(_freed(model, data), threads=1, quiet=True)
        return [tuple(v.shape) for v in sess.run(None, pair.feeds(0, 2))]
    except Exception:  # noqa: BLE001 - a model fixed at batch 1 inside (a Reshape): no answer
        return None


def measure_outputs(model: Any, inputs: list[dict[str, Any]], outputs: list[dict[str, Any]],
                    data: Dataset) -> dict[str, int]:
    """Set each output spec's ``shape`` to what the model gives (its batch dim written as the
    first input's) and ``batch_axis`` when it is not 0; return ``{output: axis}`` for those.
    ``model``: the onnx.ModelProto with the inputs pinned; ``data``: samples for it."""
    from edgekit.converters.core.runner import session

    sess = session(model.SerializeToString(), threads=1, quiet=True)
    names = [o.name for o in sess.get_outputs()]
    one = [tuple(v.shape) for v in sess.run(None, data.feeds(0, 1))]
    settled = all(len(s) and [a for a, d in enumerate(s) if d == 1] in ([0], []) for s in one)
    two = None if settled else _two_samples(model, data)
    first = inputs[0]
    batch_dim = first["shape"][first.get("batch_axis", 0)] if first["shape"] else 1
    axes: dict[str, int] = {}
    for spec in outputs:
        if spec["name"] not in names:
            continue
        j = names.index(spec["name"])
        shape = one[j]
        if not shape:
            continue  # a scalar: refused before (io_spec.refuse_scalar_outputs)
        axis = batch_axis(shape, two[j] if two else None, declared_hint(inputs, spec))
        dims: list[int | str] = [int(d) for d in shape]
        if dims[axis] == 1:
            dims[axis] = batch_dim
        spec["shape"] = dims
        if axis:
            spec["batch_axis"] = axis
            axes[spec["name"]] = axis
        else:
            spec.pop("batch_axis", None)
    return axes

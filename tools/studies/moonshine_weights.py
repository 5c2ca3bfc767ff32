"""Moonshine's encoder with only its matrix weights in int8: how much of its transcripts survive
before any activation is quantized (docs/measurements/moonshine-int8.md, section 6).

Two variants of the suite's encoder, each scored by the suite's transcript metric on its
held-out chunks against the float encoder:
- ``weights``: every MatMul weight rounded to int8 per output channel (symmetric, max-abs) and
  stored back as float: the weights' own rounding, nothing else;
- ``dynamic``: onnxruntime's ``quantize_dynamic`` (int8 weights per channel, uint8 activations
  quantized per tensor at run time), the usual CPU path for transformer encoders.
Both start from onnxruntime's ``quant_pre_process`` (it folds the exporter's ``weight + 0``
Adds, without which no MatMul has a constant weight).

    EDGEKIT_REALZOO_WORK=DIR python -m tools.studies.moonshine_weights
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np


def main() -> None:
    import onnx
    from onnx import numpy_helper
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from tools.realzoo.evaluate import run_onnx
    from tools.realzoo.materialize import materialize, source_path
    from tools.realzoo.metrics import interval
    from tools.realzoo.registry import MODELS

    model = MODELS["moonshine_encoder"]
    sets, source = materialize(model), source_path(model)
    reference = run_onnx(source, sets.val, {}, model.consts)
    with tempfile.TemporaryDirectory() as tmp:
        pre, weights, dynamic = (Path(tmp) / n for n in ("pre.onnx", "weights.onnx", "dynamic.onnx"))
        quant_pre_process(str(source), str(pre), skip_symbolic_shape=True)
        graph = onnx.load(str(pre))
        inits = {t.name: t for t in graph.graph.initializer}
        names = [n.input[1] for n in graph.graph.node if n.op_type == "MatMul" and n.input[1] in inits]
        for name in names:
            w = numpy_helper.to_array(inits[name]).astype(np.float32)  # [K, N]: channels on axis 1
            step = np.abs(w).max(axis=0, keepdims=True) / 127.0
            rounded = np.clip(np.round(w / np.where(step == 0, 1, step)), -127, 127) * step
            inits[name].CopyFrom(numpy_helper.from_array(rounded.astype(np.float32), name))
        onnx.save(graph, str(weights))
        quantize_dynamic(str(pre), str(dynamic), weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul", "Gemm"])
        for label, path in ((f"int8 weights alone ({len(names)} MatMuls)", weights),
                            ("onnxruntime quantize_dynamic", dynamic)):
            got = run_onnx(path, sets.val, {}, model.consts)
            scores = np.asarray(model.metric.score(got, reference, sets.truth), np.float64)
            print(f"{label}: {interval(scores).text()}")


if __name__ == "__main__":
    main()

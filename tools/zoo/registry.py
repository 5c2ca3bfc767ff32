"""The zoo's catalogue: one ``ZooEntry`` per model (factory, example inputs, I/O names, dynamic
axes, exporter, batch axes and the calibration-data shape), and ``write_onnx`` for each."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from . import (
    audio_cnn,
    classic,
    crnn,
    dbnet,
    efficientnet,
    mobilenetv3,
    mtcnn,
    resnet,
    shufflenet,
    squeezenet,
    vad,
    yolov8,
)
from .common import DEFAULT_OPSET, TORCHSCRIPT_OPSET, export_onnx

if TYPE_CHECKING:
    import torch
    from torch import nn

# an input spec: (name, shape with batch 1, kind) where kind is "normal", "unit" (-1..1),
# "audio" (+-0.5), "sr16k" (int64 16000) or "state" (small normal)
InputSpec = tuple[str, tuple[int, ...], str]


@dataclass(frozen=True)
class ZooEntry:
    name: str
    factory: Callable[[], nn.Module]
    inputs: tuple[InputSpec, ...]
    outputs: tuple[str, ...]
    note: str  # design followed, reductions from the reference, weights
    dynamic_axes: dict[str, dict[int, str]] = field(default_factory=dict)  # input -> axes
    exporter: str = "dynamo"  # the one that works for this model (common.export_onnx)
    batch_axes: dict[str, int | None] = field(default_factory=dict)  # default 0; None: none
    build_from: str = "onnx"  # "torch": benchmarks build from the nn.Module itself
    trained: bool = False
    export_batch: int = 1  # >1 where the batch is dynamic: torch.export fixes size-1 dims
    # scalar inputs the build freezes (--const): a rank-0 input has no sample axis to feed
    consts: dict[str, int | float] = field(default_factory=dict)

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(n for n, _, _ in self.inputs)

    @property
    def opset(self) -> int:
        return DEFAULT_OPSET if self.exporter == "dynamo" else TORCHSCRIPT_OPSET

    def batch_axis(self, name: str) -> int | None:
        return self.batch_axes.get(name, 0)

    def build_options(self) -> dict[str, dict]:
        """What ``edgekit.converters.build`` needs to read this entry's calibration data:
        the non-zero batch axes (``--batch-axis``) and the frozen scalars (``--const``)."""
        axes = {n: a for n, a in self.batch_axes.items() if a and n not in self.consts}
        return {"batch_axes": axes, "consts": dict(self.consts)}

    def example_inputs(self, seed: int = 0) -> tuple[torch.Tensor, ...]:
        """Seeded example inputs (batch 1), in the order of ``inputs``."""
        import torch

        gen = torch.Generator().manual_seed(seed)
        made = []
        for _, shape, kind in self.inputs:
            if kind == "sr16k":
                made.append(torch.tensor(16000, dtype=torch.int64))
            elif kind == "unit":
                made.append(torch.rand(shape, generator=gen) * 2 - 1)
            elif kind == "audio":
                made.append(torch.rand(shape, generator=gen) - 0.5)
            elif kind == "state":
                made.append(0.1 * torch.randn(shape, generator=gen))
            else:
                made.append(torch.randn(shape, generator=gen))
        return tuple(made)

    def calib_shape(self, samples: int) -> dict[str, tuple[int, ...]]:
        """Shape of each input's calibration array holding ``samples`` samples: stacked along
        the input's batch axis; an input with no batch axis (``sr``) gets a leading one."""
        shapes = {}
        for name, shape, _ in self.inputs:
            axis = self.batch_axis(name)
            if axis is None:
                shapes[name] = (samples, *shape)
            else:
                shapes[name] = (*shape[:axis], samples, *shape[axis + 1:])
        return shapes

    def calib_data(self, samples: int, seed: int = 0) -> dict[str, np.ndarray]:
        """``samples`` seeded example inputs per input, laid out as ``calib_shape`` says."""
        rows = [self.example_inputs(seed + i) for i in range(samples)]
        data = {}
        for j, name in enumerate(self.input_names):
            axis = self.batch_axis(name)
            arrays = [r[j].numpy() for r in rows]
            data[name] = (np.stack(arrays) if axis is None
                          else np.concatenate(arrays, axis=axis))
        return data

    def batched_inputs(self, batch: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
        """``batch`` example inputs joined along each input's batch axis (an input with no
        batch axis, like ``sr``, is shared: the first sample's)."""
        import torch

        rows = [self.example_inputs(seed + i) for i in range(batch)]
        return tuple(rows[0][j] if self.batch_axis(n) is None
                     else torch.cat([r[j] for r in rows], dim=self.batch_axis(n))
                     for j, n in enumerate(self.input_names))

    def write_onnx(self, path: str | Path, module: nn.Module | None = None) -> Path:
        """Export the model (or ``module``, an instance of it) to a self-contained ONNX file."""
        return export_onnx(module if module is not None else self.factory(),
                           self.batched_inputs(self.export_batch), path,
                           input_names=self.input_names,
                           output_names=self.outputs, dynamic_axes=self.dynamic_axes,
                           exporter=self.exporter, opset=self.opset)


def _image(name: str = "input", size: int = 224) -> tuple[InputSpec, ...]:
    return ((name, (1, 3, size, size), "normal"),)


HW = {2: "height", 3: "width"}

ENTRIES: dict[str, ZooEntry] = {e.name: e for e in (
    ZooEntry("mobilenetv2_like", classic.mobilenetv2_like, _image(), ("output",),
             "MobileNetV2 1.0x (Sandler et al. 2018), 1000 classes, random weights"),
    ZooEntry("plain_cnn", classic.plain_cnn, _image(size=64), ("output",),
             "VGG-ish 5-stage conv/ReLU/maxpool, 10 classes, random weights"),
    ZooEntry("transformer_block", classic.transformer_block,
             (("input", (1, 16, 64), "normal"),), ("output",),
             "2-block pre-norm encoder, MHA + GELU MLP, random weights"),
    ZooEntry("mobilenetv3_small", mobilenetv3.mobilenetv3_small, _image(), ("output",),
             "MobileNetV3-Small 1.0x (Howard et al. 2019): HardSwish, SE with HardSigmoid"),
    ZooEntry("mobilenetv3_large", mobilenetv3.mobilenetv3_large, _image(), ("output",),
             "MobileNetV3-Large 1.0x (Howard et al. 2019): HardSwish, SE with HardSigmoid"),
    ZooEntry("resnet18", resnet.resnet18, _image(), ("output",),
             "ResNet18 (He et al. 2016), 1000 classes, random weights"),
    ZooEntry("shufflenetv2", shufflenet.shufflenetv2, _image(), ("output",),
             "ShuffleNetV2 1.0x (Ma et al. 2018): channel split + shuffle, random weights"),
    ZooEntry("squeezenet", squeezenet.squeezenet, _image(), ("output",),
             "SqueezeNet 1.1 (Iandola et al. 2016): Fire modules, ceil-mode pools"),
    ZooEntry("efficientnet_b0", efficientnet.efficientnet_b0, _image(), ("output",),
             "EfficientNet-B0 (Tan & Le 2019): MBConv, SiLU, SE (Sigmoid gate)"),
    ZooEntry("yolov8n", yolov8.yolov8n, _image("images", 320), ("output0",),
             "YOLOv8n-style (ultralytics v8 design, n scale), 80 classes, 320x320 (reference "
             "640); packed [1,84,2100] xywh+scores; TorchScript export with dynamic H/W as "
             "ultralytics does", dynamic_axes={"images": HW}, exporter="torchscript"),
    ZooEntry("dbnet", dbnet.dbnet, _image("x", 320), ("maps",),
             "DBNet-style text detector, light MobileNet-like backbone (16..96 ch), DB FPN, "
             "ConvTranspose/BN head; 320x320, dynamic H/W; TorchScript export (dynamo folds "
             "the head's BatchNorms away, which published DBNet files do not)",
             dynamic_axes={"x": HW}, exporter="torchscript"),
    ZooEntry("crnn", crnn.crnn, (("x", (1, 3, 32, 128), "normal"),), ("probs",),
             "CRNN/CTC (Shi et al. 2016), channels /4, 2x BiLSTM(64), LayerNorm written out, "
             "97 classes; 32x128, dynamic width (T = W/4 + 1)",
             dynamic_axes={"x": {3: "width"}}, exporter="torchscript"),
    ZooEntry("silero_like_vad", vad.silero_like_vad,
             (("input", (1, vad.CHUNK), "audio"), ("sr", (), "sr16k"),
              ("state", (2, 1, vad.HIDDEN), "state")), ("prob", "stateN"),
             "Silero-VAD-v5-shaped: Conv1d STFT, Conv1d encoder, LSTM cell; int64 sr selects "
             "the front end through an If; state [2,N,128] has its batch on axis 1",
             dynamic_axes={"input": {0: "batch"}, "state": {1: "batch"}},
             batch_axes={"sr": None, "state": 1}, export_batch=2, consts={"sr": 16000}),
    ZooEntry("mtcnn_pnet", mtcnn.mtcnn_pnet, (("input", (1, 3, 120, 160), "unit"),),
             ("boxes", "probs"),
             "MTCNN PNet with REAL weights (facenet-pytorch wheel): PRelu, ceil-mode pool, "
             "Softmax head; 120x160 example, dynamic H/W (image pyramid)",
             dynamic_axes={"input": HW}, trained=True),
    ZooEntry("crepe_tiny", audio_cnn.crepe_tiny, (("input", (1, audio_cnn.FRAME), "audio"),),
             ("pitch",),
             "CREPE-tiny-style pitch CNN (Kim et al. 2018): forward does x[:, None, :, None]; "
             "unfused BN after ReLU; benchmarks build it from the nn.Module",
             build_from="torch"),
)}

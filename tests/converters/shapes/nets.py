"""Small real-looking models for the shape and input work of a build (issue 13): written
here, exported with the dynamic axes their published counterparts use."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn


class GridDetector(nn.Module):
    """A YOLO-style head in miniature: a strided backbone, and box centres from a grid built
    with the feature map's own size (Shape -> Range -> Expand in the exported ONNX)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 4, 3, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.body(x)
        h, w = f.shape[2], f.shape[3]
        ys = torch.arange(h, dtype=torch.float32).view(1, 1, h, 1).expand(1, 1, h, w)
        xs = torch.arange(w, dtype=torch.float32).view(1, 1, 1, w).expand(1, 1, h, w)
        return f + torch.cat([xs, ys, xs, ys], dim=1) / 8.0


class Vad(nn.Module):
    """A voice-activity net in the Silero manner: a float chunk, an int64 sample rate, and a
    GRU state [layers, N, hidden] whose samples are on axis 1."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Linear(64, 16)
        self.gru = nn.GRU(16, 16, num_layers=2)
        self.out = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor, sr: torch.Tensor,
                state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        gain = sr.to(torch.float32) / 16000.0
        h = torch.relu(self.enc(x * gain))[None]
        y, new_state = self.gru(h, state)
        return torch.sigmoid(self.out(y[0])), new_state


class AudioCnn(nn.Module):
    """A 1-D audio CNN whose forward lifts [N, L] into the [N, 1, L, 1] its Conv2d takes."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 8, (9, 1), (4, 1), (4, 0))
        self.fc = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = torch.relu(self.conv(x[:, None, :, None]))
        return self.fc(f.mean(dim=(2, 3)))


def export_detector(path: Path) -> Path:
    torch.manual_seed(0)
    torch.onnx.export(GridDetector().eval(), (torch.randn(1, 3, 32, 48),), str(path),
                      input_names=["images"], output_names=["boxes"], opset_version=17,
                      dynamic_axes={"images": {0: "batch", 2: "height", 3: "width"},
                                    "boxes": {0: "batch", 2: "h", 3: "w"}}, dynamo=False)
    return path


def export_vad(path: Path) -> Path:
    torch.manual_seed(0)
    args = (torch.randn(1, 64), torch.tensor([16000], dtype=torch.int64), torch.zeros(2, 1, 16))
    torch.onnx.export(Vad().eval(), args, str(path), input_names=["x", "sr", "state"],
                      output_names=["prob", "state_out"], opset_version=17,
                      dynamic_axes={"x": {0: "batch"}, "state": {1: "batch"},
                                    "prob": {0: "batch"}, "state_out": {1: "batch"}},
                      dynamo=False)
    return path


def images(path: Path, count: int, height: int, width: int, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    np.savez(path, images=rng.random((count, 3, height, width), dtype=np.float32))
    return path


def export_static_detector(path: Path, height: int, width: int) -> Path:
    """The same detector (same seed, same weights) exported at one fixed size."""
    torch.manual_seed(0)
    torch.onnx.export(GridDetector().eval(), (torch.randn(1, 3, height, width),), str(path),
                      input_names=["images"], output_names=["boxes"], opset_version=17,
                      dynamo=False)
    return path


def if_on_sample_rate(path: Path) -> Path:
    """An ONNX graph that branches on its int64 ``sr`` input (``If``: x*2 at 16 kHz, else
    x*3), as exported models with data-dependent control flow do."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def branch(name: str, k: float) -> onnx.GraphProto:
        return helper.make_graph(
            [helper.make_node("Mul", ["x", f"{name}_k"], [f"{name}_y"])], name, [],
            [helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, [1, 4])],
            initializer=[numpy_helper.from_array(np.array(k, np.float32), f"{name}_k")])

    nodes = [helper.make_node("Equal", ["sr", "rate"], ["eq"]),
             helper.make_node("Squeeze", ["eq"], ["cond"]),
             helper.make_node("If", ["cond"], ["y"], then_branch=branch("t", 2.0),
                              else_branch=branch("e", 3.0)),
             helper.make_node("Relu", ["y"], ["out"])]
    graph = helper.make_graph(
        nodes, "if_sr", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4]),
                         helper.make_tensor_value_info("sr", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 4])],
        initializer=[numpy_helper.from_array(np.array([16000], np.int64), "rate")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path

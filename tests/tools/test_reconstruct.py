"""Block reconstruction (tools/studies/reconstruct.py) on a real graph: the committed digits
CNN with each ReLU written as SiLU (x * Sigmoid(x)) and two dead first-conv channels (bias
-400: the SiLU maps them to 0, but min-max stretches the conv output's grid over them, as
YOLOv8n's widest SiLU inputs are stretched), quantized by onnxruntime from min-max ranges,
real digits. The learned grids, written back as ranges and quantized again by the
same onnxruntime call, must bring the model's output closer to float than min-max's grids on
digits that neither calibration nor reconstruction saw."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from tests.conftest import DIGITS_ONNX

CALIB, HELD_OUT = slice(0, 128), slice(400, 540)
DEAD_CHANNELS = 2
FIRST_BLOCK = {"node_conv2d", "node_relu", "node_relu_gate", "node_conv2d_1", "node_relu_1", "node_relu_1_gate",
               "node_max_pool2d"}


def _silu_digits() -> onnx.ModelProto:
    model = onnx.load(str(DIGITS_ONNX))
    nodes = []
    for node in model.graph.node:
        if node.op_type != "Relu":
            nodes.append(node)
            continue
        gate = node.output[0] + "_gate"
        nodes.append(helper.make_node("Sigmoid", [node.input[0]], [gate], name=node.name + "_gate"))
        nodes.append(helper.make_node("Mul", [node.input[0], gate], [node.output[0]], name=node.name))
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    bias = next(i for i in model.graph.initializer if i.name == model.graph.node[0].input[2])
    values = numpy_helper.to_array(bias).copy()
    values[:DEAD_CHANNELS] = -400.0
    bias.CopyFrom(numpy_helper.from_array(values, bias.name))
    return model


def _quantized(float_path: Path, table: Path, out: Path) -> onnx.ModelProto:
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    quantize_static(str(float_path), str(out), None, quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    calibrate_method=CalibrationMethod.MinMax, calibration_cache_path=str(table),
                    extra_options={"WeightSymmetric": True, "ActivationSymmetric": False})
    return onnx.load(str(out))


def _minmax_table(float_path: Path, samples: np.ndarray, table: Path) -> None:
    from onnxruntime.quantization.calibrate import (
        CalibrationMethod,
        create_calibrator,
        save_tensors_data,
    )

    calibrator = create_calibrator(str(float_path), None, augmented_model_path=str(table.with_suffix(".aug.onnx")),
                                   calibrate_method=CalibrationMethod.MinMax)

    class Reader:
        def __init__(self) -> None:
            self.items = iter([{"image": samples[i:i + 1]} for i in range(len(samples))])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.items, None)

    calibrator.collect_data(Reader())
    save_tensors_data(calibrator.compute_data(), table)


def _output_error(model: onnx.ModelProto, float_model: onnx.ModelProto, x: np.ndarray) -> float:
    import onnxruntime as ort

    def run(m: onnx.ModelProto) -> np.ndarray:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(m.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return np.concatenate([session.run(None, {"image": x[i:i + 1]})[0] for i in range(len(x))])

    want = run(float_model)
    return float(((run(model) - want) ** 2).mean() / (want ** 2).mean())


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, ) -> tuple[Path, onnx.ModelProto, onnx.ModelProto, np.ndarray]:
    with np.load(DIGITS_ONNX.parent / "digits.npz") as data:
        x = data["x"].astype(np.float32)
    folder = tmp_path_factory.mktemp("reconstruct")
    float_path = folder / "silu.onnx"
    float_model = _silu_digits()
    onnx.save(float_model, str(float_path))
    _minmax_table(float_path, x[CALIB], folder / "ranges.json")
    return folder, float_model, _quantized(float_path, folder / "ranges.json", folder / "minmax.onnx"), x


def test_learned_grids_bring_unseen_outputs_closer_to_float(built: tuple) -> None:
    from tools.studies.reconstruct import Settings, reconstruct

    folder, float_model, minmax, x = built
    learned = reconstruct(minmax, float_model, x[CALIB], Settings(iters=40, batch=32, check_every=10),
                          block_of=lambda name: "first" if name in FIRST_BLOCK else "head")
    assert [b.name for b in learned.blocks] == ["first", "head"]
    assert all(b.held_out_after <= b.held_out_before for b in learned.blocks)
    table = json.loads((folder / "ranges.json").read_text())
    for name, (low, high) in learned.ranges.items():
        table["data"][name]["lowest"]["data"] = [low]
        table["data"][name]["highest"]["data"] = [high]
    (folder / "learned.json").write_text(json.dumps(table))
    rebuilt = _quantized(folder / "silu.onnx", folder / "learned.json", folder / "learned.onnx")

    scales = {i.name: numpy_helper.to_array(i) for i in rebuilt.graph.initializer}
    for name, (scale, zero) in learned.quantizers.items():  # the writer's grids are the learned ones
        assert scales[name] == pytest.approx(scale, rel=1e-5)
        assert int(scales[name.replace("_scale", "_zero_point")]) == zero
    before = _output_error(minmax, float_model, x[HELD_OUT])
    after = _output_error(rebuilt, float_model, x[HELD_OUT])
    print(f"held-out output error vs float: min-max {before:.3g}, learned {after:.3g}")
    assert after < 0.8 * before, (before, after)


def test_grids_of_fixed_output_kernels_are_not_learned(built: tuple) -> None:
    from tools.studies.reconstruct import Settings, reconstruct

    _, float_model, minmax, x = built
    learned = reconstruct(minmax, float_model, x[CALIB][:16], Settings(iters=2, batch=8, check_every=1),
                          block_of=lambda name: "all")
    # LiteRT fixes a Sigmoid's output grid and the input's grid is the data's: neither is learned
    assert not any(name.endswith("_gate_scale") or name == "image_scale" for name in learned.quantizers)
    assert any(name.startswith("conv2d") for name in learned.quantizers)


def test_sensitivity_weights_decide_which_errors_count() -> None:
    import torch

    from tools.studies.reconstruct import _loss, _Weighted

    want = torch.ones(2, 2, 3, 3)
    got = want.clone()
    got[:, 1] += 1.0  # every error is in channel 1
    index = np.arange(2)
    only_channel_0 = np.zeros((2, 2, 3, 3), np.float32)
    only_channel_0[:, 0] = 1.0
    plain = float(_loss({"t": got}, {"t": want}, index))
    weighted = float(_loss({"t": got}, {"t": _Weighted(want, None, 0.0, only_channel_0)}, index))
    assert plain == pytest.approx(0.5)
    assert weighted == 0.0

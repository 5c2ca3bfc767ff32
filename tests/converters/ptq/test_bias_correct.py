"""Empirical bias correction and AdaRound remove the output error that biased weight rounding causes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from edgekit.converters.context import Dataset
from edgekit.converters.core.runner import run_dataset
from edgekit.converters.ptq.bias_correct import correct_if_it_pays
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

from .nets import biased_conv, random_conv


class _Reader(CalibrationDataReader):
    def __init__(self, x: np.ndarray) -> None:
        self.items = iter({"input": x[i:i + 1]} for i in range(len(x)))

    def get_next(self):  # noqa: ANN202 - onnxruntime's interface
        return next(self.items, None)


def test_bias_correction_reduces_the_mean_output_error(tmp_path: Path) -> None:
    x = np.random.default_rng(0).random((32, 16, 4, 4)).astype(np.float32)
    float_path, int8_path = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(biased_conv(), str(float_path))
    quantize_static(str(float_path), str(int8_path), _Reader(x), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    extra_options={"WeightSymmetric": True})
    data = Dataset({"input": x})
    reference = run_dataset(str(float_path), data)[0]
    shift_before = np.abs((run_dataset(str(int8_path), data, exact_int8=True)[0] - reference).mean())
    report = correct_if_it_pays(int8_path, float_path, data)
    shift_after = np.abs((run_dataset(str(int8_path), data, exact_int8=True)[0] - reference).mean())
    assert report["layers"] == 1 and report["kept"]
    assert report["output_mse_after"] < report["output_mse_before"]
    assert shift_before > 0.01  # 15 weights rounded down by 0.4 steps, inputs ~0.5: ~0.024
    assert shift_after < shift_before / 4


def test_adaround_learns_a_rounding_with_less_output_error(tmp_path: Path) -> None:
    from edgekit.converters.ptq.adaround import adaround

    x = np.random.default_rng(0).random((32, 16, 4, 4)).astype(np.float32)
    float_path, int8_path = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(random_conv(), str(float_path))
    quantize_static(str(float_path), str(int8_path), _Reader(x), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    extra_options={"WeightSymmetric": True})
    report = adaround(int8_path, float_path, Dataset({"input": x}), seconds=120, steps=150)
    assert report["layers"] == 1 and report["kept"]
    # nearest rounding vs learned rounding of one 3x3 conv: 0.0042 -> 0.0031 when written
    assert report["output_mse_after"] < 0.9 * report["output_mse_before"]


def test_sequential_correction_removes_the_shift_that_clipped_inputs_cause(tmp_path: Path) -> None:
    """Calibrated on inputs half as large as the data, the int8 model clips the input: a mean
    shift the weight rounding does not explain. The sequential mode measures it layer by layer
    (conv1, then the depthwise conv2 behind the ReLU) and moves the biases to cancel it."""
    from .nets import conv_act_depthwise

    x = np.random.default_rng(1).random((32, 3, 6, 6)).astype(np.float32)
    float_path, int8_path = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(conv_act_depthwise("Relu"), str(float_path))
    quantize_static(str(float_path), str(int8_path), _Reader(x * 0.5), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    extra_options={"WeightSymmetric": True})
    data = Dataset({"input": x})
    reference = run_dataset(str(float_path), data)[0]

    def worst_channel_shift() -> float:
        got = run_dataset(str(int8_path), data, exact_int8=True)[0]
        return float(np.abs((got - reference).mean(axis=(0, 2, 3))).max())

    before = worst_channel_shift()
    report = correct_if_it_pays(int8_path, float_path, data, modes=("weights", "sequential"))
    assert report["kept"] and report["mode"] == "sequential" and report["layers"] == 2
    assert report["tried"]["sequential"] < report["tried"]["weights"]
    assert worst_channel_shift() < before / 4


def test_the_error_before_correcting_pairs_an_output_whose_samples_are_on_axis_1(tmp_path: Path) -> None:
    """The means run 8 samples at a time; an output with the samples on axis 1 (a recurrent
    state's layout, [channels, N, ...] here) cannot be joined from those runs the way
    ``run_dataset`` joins its own: the error before correcting must still be the one
    ``run_dataset``'s int8 outputs give (12 samples: runs of 8 and 4 failed to concatenate)."""
    from edgekit.converters.ptq.bias_correct import output_mse

    model = biased_conv()
    model.graph.node.append(onnx.helper.make_node("Transpose", ["output"], ["by_channel"], perm=[1, 0, 2, 3]))
    model.graph.output.append(onnx.helper.make_tensor_value_info("by_channel", onnx.TensorProto.FLOAT, None))
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"  # runs of 8 where fixed runs 1
    x = np.random.default_rng(0).random((12, 16, 4, 4)).astype(np.float32)
    float_path, int8_path = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(model, str(float_path))
    quantize_static(str(float_path), str(int8_path), _Reader(x), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    extra_options={"WeightSymmetric": True})
    data = Dataset({"input": x})
    reference = [r.astype(np.float64) for r in run_dataset(str(float_path), data)]
    expected = output_mse(int8_path.read_bytes(), reference, data)
    report = correct_if_it_pays(int8_path, float_path, data)
    assert report["layers"] == 1 and report["samples"] == 12
    assert report["output_mse_before"] == expected > 0


def test_channel_sums_of_one_sample_runs_match_the_multi_axis_sum_bit_for_bit() -> None:
    """The fast [C, rest] sum of a batch-1 run must give the very float64 figures the multi-axis
    reduction gives, or the corrected int32 biases (and the shipped bytes) could move."""
    from edgekit.converters.ptq.bias_correct import _channel_sum

    rng = np.random.default_rng(0)
    for shape in [(1, 32, 112, 112), (1, 96, 56, 56), (1, 1280, 7, 7), (1, 8, 5), (3, 16, 9, 9), (4, 10)]:
        value = (rng.standard_normal(shape) * 7).astype(np.float32)
        axes = tuple(i for i in range(value.ndim) if i != 1)
        np.testing.assert_array_equal(_channel_sum(value), value.sum(axis=axes, dtype=np.float64))


def test_adaround_first_learns_only_the_first_layers(tmp_path: Path) -> None:
    """``first=1`` rounds the first conv only (where EfficientNet-Lite0's noise is amplified
    most): the second conv's int8 weights stay those of nearest rounding, however long the
    time bound."""
    from edgekit.converters.ptq.adaround import adaround
    from onnx import numpy_helper

    from .nets import conv_act_depthwise

    x = np.random.default_rng(0).random((16, 3, 6, 6)).astype(np.float32)
    float_path, int8_path = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(conv_act_depthwise("Relu", 8), str(float_path))
    quantize_static(str(float_path), str(int8_path), _Reader(x), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    extra_options={"WeightSymmetric": True})

    def int8_weights() -> dict[str, np.ndarray]:
        return {t.name: numpy_helper.to_array(t) for t in onnx.load(str(int8_path)).graph.initializer
                if t.data_type == onnx.TensorProto.INT8}

    before = int8_weights()
    report = adaround(int8_path, float_path, Dataset({"input": x}), seconds=120, steps=100,
                      first=1, samples=16)
    after = int8_weights()
    assert report["of"] == 1 and report["layers"] == 1 and report["samples"] == 16
    second = next(name for name in before if name.startswith("w2"))
    assert np.array_equal(before[second], after[second])


def test_adaround_windows_are_slices_of_the_whole_conv_output() -> None:
    """AdaRound of a large conv learns on windows of its padded input: each window's conv
    (padding now zero) must equal a slice of the whole image's conv output, for strides,
    kernel sizes and asymmetric padding alike (EfficientNet's stem pads 0,0,1,1)."""
    import torch
    from edgekit.converters.ptq import adaround as ada

    rng = np.random.default_rng(1)
    for stride, k, pads in ((2, 3, [0, 0, 1, 1]), (1, 3, [1, 1, 1, 1]), (2, 5, [1, 1, 2, 2])):
        w = rng.normal(size=(4, 3, k, k)).astype(np.float32)
        x = rng.normal(size=(2, 3, 70, 66)).astype(np.float32)
        layer = {"node": onnx.helper.make_node("Conv", ["x", "w"], ["y"]), "w": w, "bias": None,
                 "attrs": {"pads": pads, "strides": [stride, stride]}}
        whole = ada._forward(layer, torch.from_numpy(x), torch.from_numpy(w)).numpy()
        cropped, x_q, x_f = ada._windows(layer, x, 2 * x)
        assert x_q.shape[0] == 2 * ada.WINDOWS and np.allclose(x_f, 2 * x_q)  # the same windows of both
        got = ada._forward(cropped, torch.from_numpy(x_q), torch.from_numpy(w)).numpy()
        assert got.shape[2:] == (ada.WINDOW, ada.WINDOW)
        for j, window in enumerate(got):
            full = whole[j // ada.WINDOWS]
            assert any(np.allclose(full[:, y:y + ada.WINDOW, c:c + ada.WINDOW], window, atol=1e-4)
                       for y in range(full.shape[1] - ada.WINDOW + 1)
                       for c in range(full.shape[2] - ada.WINDOW + 1))


def test_adaround_scales_a_gemm_without_transb_along_its_output_axis(tmp_path: Path) -> None:
    """skl2onnx writes an MLP's Gemm as ``x @ W`` with W [in, out] (no transB): onnxruntime's
    per-channel scales lie along axis 1. AdaRound divided along axis 0: an internal error on a
    64x32 layer (sklearn_mlp_digits), the wrong scales on a square one."""
    from edgekit.converters.ptq.adaround import adaround
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = (rng.standard_normal((12, 5)) * np.array([0.01, 0.1, 1.0, 3.0, 10.0])).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["input", "w", "b"], ["output"], name="fc")], "mlp",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [None, 12])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [None, 5])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.zeros(5, np.float32), "b")])
    float_path, int8_path = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(float_path))
    x = rng.random((64, 12)).astype(np.float32)
    quantize_static(str(float_path), str(int8_path), _Reader(x), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    extra_options={"WeightSymmetric": True})
    report = adaround(int8_path, float_path, Dataset({"input": x}), seconds=60, steps=100)
    assert report["layers"] == 1
    assert report["output_mse_after"] <= report["output_mse_before"] * 1.01

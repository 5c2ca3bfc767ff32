"""A float .tflite whose weights are float16 behind DEQUANTIZE (MediaPipe 0.10.14's face mesh
and palm detector) converts, and any tflite2onnx failure is a typed error naming the op
(issue 30: both were internal errors, exit 1). The .tflite files are written here with the
TFLite schema's object API, in the structure of the real models: a PRELU whose rank-3 alpha
is DEQUANTIZE(float16 constant), and two PADs sharing one paddings constant
(``pose_landmark_full.tflite``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgekit.errors import UnsupportedModelError

pytest.importorskip("tflite2onnx")
SHAPE = [1, 4, 4, 3]


def _flatbuffer(tensors: list[tuple[str, list[int], int, np.ndarray | None]],
                ops: list[tuple[int, list[int], list[int]]], inputs: list[int],
                outputs: list[int]) -> bytes:
    """A one-subgraph .tflite: tensors (name, shape, TensorType, constant data or None),
    builtin ops (code, input indexes, output indexes)."""
    import flatbuffers
    from edgekit.converters.tflite.schema import Op, Padding, S

    model = S.ModelT()
    model.version = 3
    model.buffers = [S.BufferT()]
    codes = sorted({code for code, _, _ in ops})
    model.operatorCodes = []
    for code in codes:
        entry = S.OperatorCodeT()
        entry.builtinCode, entry.deprecatedBuiltinCode, entry.version = code, min(code, 127), 1
        model.operatorCodes.append(entry)
    graph = S.SubGraphT()
    graph.tensors = []
    for name, shape, kind, data in tensors:
        tensor = S.TensorT()
        tensor.name, tensor.shape, tensor.type = name.encode(), list(shape), kind
        if data is not None:
            buffer = S.BufferT()
            buffer.data = np.frombuffer(np.ascontiguousarray(data).tobytes(), np.uint8)
            model.buffers.append(buffer)
            tensor.buffer = len(model.buffers) - 1
        graph.tensors.append(tensor)
    graph.operators = []
    for code, ins, outs in ops:
        op = S.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = codes.index(code), ins, outs
        if code == Op.CONV_2D:  # 1x1, stride 1
            options = S.Conv2DOptionsT()
            options.padding, options.strideH, options.strideW = Padding.VALID, 1, 1
            op.builtinOptionsType, op.builtinOptions = S.BuiltinOptions.Conv2DOptions, options
        graph.operators.append(op)
    graph.inputs, graph.outputs = inputs, outputs
    model.subgraphs = [graph]
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def prelu_with_fp16_alpha() -> bytes:
    """x [1, 4, 4, 3] -> CONV_2D 1x1 -> PRELU(alpha = DEQUANTIZE(float16 [1, 1, 3])) -> y
    (the Conv gives the PReLU's tensors the NHWC layout tflite2onnx then moves to NCHW)."""
    from edgekit.converters.tflite.schema import Op, TType

    alpha = np.array([[[0.25, -0.5, 0.125]]], np.float16)
    weight = np.random.default_rng(0).normal(size=(3, 1, 1, 3)).astype(np.float32)
    return _flatbuffer(
        [("x", SHAPE, TType.FLOAT32, None), ("w", [3, 1, 1, 3], TType.FLOAT32, weight),
         ("b", [3], TType.FLOAT32, np.zeros(3, np.float32)),
         ("conv", SHAPE, TType.FLOAT32, None),
         ("alpha_fp16", [1, 1, 3], TType.FLOAT16, alpha),
         ("alpha", [1, 1, 3], TType.FLOAT32, None), ("y", SHAPE, TType.FLOAT32, None)],
        [(Op.CONV_2D, [0, 1, 2], [3]), (Op.DEQUANTIZE, [4], [5]), (Op.PRELU, [3, 5], [6])],
        [0], [6])


def two_pads_sharing_paddings() -> bytes:
    """x -> PAD -> CONV_2D 1x1 -> PAD -> y, both PADs reading one paddings constant (the
    Conv gives their tensors a layout, so tflite2onnx reorders the paddings)."""
    from edgekit.converters.tflite.schema import Op, TType

    pads = np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32)
    weight = np.random.default_rng(0).normal(size=(3, 1, 1, 3)).astype(np.float32)
    return _flatbuffer(
        [("x", SHAPE, TType.FLOAT32, None), ("pads", [4, 2], TType.INT32, pads),
         ("mid", [1, 6, 6, 3], TType.FLOAT32, None), ("w", [3, 1, 1, 3], TType.FLOAT32, weight),
         ("b", [3], TType.FLOAT32, np.zeros(3, np.float32)),
         ("conv", [1, 6, 6, 3], TType.FLOAT32, None), ("y", [1, 8, 8, 3], TType.FLOAT32, None)],
        [(Op.PAD, [0, 1], [2]), (Op.CONV_2D, [2, 3, 4], [5]), (Op.PAD, [5, 1], [6])], [0], [6])


def test_fp16_weights_behind_dequantize_convert_and_match_litert(tmp_path: Path) -> None:
    import onnxruntime as ort
    from ai_edge_litert.interpreter import Interpreter
    from edgekit.converters.tflite.source import tflite_to_onnx

    source = tmp_path / "prelu.tflite"
    source.write_bytes(prelu_with_fp16_alpha())
    before = source.read_bytes()
    notes = tflite_to_onnx(source, tmp_path / "prelu.onnx")  # IndexError (exit 1) before
    assert any("1 float16 weights" in n for n in notes), notes
    x = np.random.default_rng(0).uniform(-1, 1, SHAPE).astype(np.float32)
    interpreter = Interpreter(model_path=str(source))
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    want = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
    assert (want < 0).any() and (want > 0).any()  # both sides of the PReLU are exercised
    session = ort.InferenceSession(str(tmp_path / "prelu.onnx"),
                                   providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"x": x})[0], want, rtol=1e-6, atol=1e-6)
    assert source.read_bytes() == before  # the source is never modified
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prelu.onnx", "prelu.tflite"]


def test_a_tflite2onnx_failure_is_a_typed_error_naming_the_op(tmp_path: Path) -> None:
    from edgekit.converters.tflite.source import tflite_to_onnx

    source = tmp_path / "pads.tflite"
    source.write_bytes(two_pads_sharing_paddings())
    # tflite2onnx 0.4.1 rewrites the shared paddings once per PAD and then indexes the 1-D
    # result as [n, 2]: an IndexError, which was an internal error
    with pytest.raises(UnsupportedModelError,
                       match=r"pads\.tflite: tflite2onnx .* cannot convert this model "
                             r"\(at op .*\(Pad\)\): IndexError"):
        tflite_to_onnx(source, tmp_path / "pads.onnx")
    assert not (tmp_path / "pads.onnx").exists()

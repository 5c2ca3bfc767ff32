"""How far an int8 model's outputs move when its float ops compute in another order: the
model's own share of the cross-ISA tolerance (``tolerance.py``).

Its int8 convolutions and matrix products give the same bytes on both sides (an exact int32
sum on Arm, exact enough in float32 on the host's unfused path: EfficientNet-Lite0 all-int8
matched bit for bit on the emulated A72). Its other int8 ops do not: onnxruntime on Arm runs an
int8 Add, Mul, Sigmoid or Softmax as its own QLinear kernel (another order of the scale
products, a lookup table from another exp), where the host dequantizes, computes in float and
quantizes; a result near a rounding tie flips a step, and YOLOv8n's 58 int8 SiLUs (Sigmoid and
Mul) moved its all-int8 ONNX output up to 20 steps from the host on the emulated A72 (97.5%
within one step) while its .tflite matched bit for bit: so they are nudged as float ops are
(``SAME_BYTES_INT8``). A float op the guard kept (any op not between DequantizeLinear inputs and
QuantizeLinear readers: a Conv, a LayerNorm's ReduceMean/Sub/Pow/Div, a HardSwish's Mul, a
Softmax, an LSTM) computes in another order, with other fused multiply-adds and other
polynomial approximations on Arm, and where its result lands near a rounding tie of a later
QuantizeLinear, one step flips; inside a deep net that flip can grow on its way to the
output: EfficientNet-Lite0 with a float stem Conv landed 96.9-98.5% within one step on the
emulated A72 where the zoo's depth rule asked 98%; PP-OCRv4 rec (133 float ops: HardSwish,
LayerNorm, SE blocks) moved its softmax 30 steps on one test vector where the rule, which
nudged only float Conv/Gemm/MatMul, asked at most 21.

``jittered`` scales each float op's result by ``1 +- c x 2^-24`` with an independent random
sign per element, ``c`` the op's worst-case float32 error in units of roundoff: ``K`` for a
K-term sum (Conv, Gemm, MatMul, pooling, ReduceMean, Softmax's normaliser, a recurrent
cell's gate sums: Higham's deterministic bound ``gamma_K ~ K u``; the summation order on Arm
is not random, so the typical ``sqrt(K)`` is not a bound), ``TRANSCENDENTAL_ULPS`` more where
it evaluates exp/tanh/erf (an approximation on every kernel set), 1 for other rounded
arithmetic (Add, Mul, Div, Sqrt...), 0 for exact ops (Relu, Clip, Max, moves of data).
``jitter_moves`` runs the test vectors through the model and ``DRAWS`` such copies (other
signs) on the host's exact path and keeps each element's largest move: what moves there is
what another evaluation order moves. The host and the board can each be that far from the
exact result, so ``tolerance.py`` allows twice it (the triangle inequality).
"""

from __future__ import annotations

from typing import Any

import numpy as np

UNIT_ROUNDOFF = 2.0 ** -24  # float32
SEED = 0
DRAWS = 3  # independent sign draws; each element keeps its largest move
# W3C WebNN's conformance tests allow float32 sigmoid 32 + 2 ULP across backends
# (web-platform-tests webnn/conformance_tests/sigmoid): the spread of exp-based kernels
TRANSCENDENTAL_ULPS = 34
_REDUCING = {"Conv", "ConvTranspose", "Gemm", "MatMul"}
# int8 kernels whose bytes match across ISAs (an exact int32 sum, one requantizing multiply);
# an int8 op of any other kind computes in another order on Arm (module doc)
SAME_BYTES_INT8 = _REDUCING
_POOLING = {"GlobalAveragePool", "ReduceMean", "AveragePool", "ReduceSum"}
_RECURRENT = {"LSTM", "GRU", "RNN"}
_TRANSCENDENTAL = {"Exp", "Log", "Sigmoid", "Tanh", "Erf", "Gelu", "Softmax", "LogSoftmax",
                   "Pow", "Softplus", "Elu", "Selu", "Mish", "HardSwish"} | _RECURRENT
# no rounding: comparisons, selections and moves of data
_EXACT = {"Relu", "Clip", "Max", "Min", "MaxPool", "GlobalMaxPool", "ReduceMax", "ReduceMin",
          "Reshape", "Transpose", "Concat", "Slice", "Gather", "GatherElements", "Squeeze",
          "Unsqueeze", "Flatten", "Identity", "Split", "Pad", "Shape", "Size", "Cast", "Expand",
          "Tile", "QuantizeLinear", "DequantizeLinear", "Constant", "ArgMax", "ArgMin", "Where",
          "Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Not", "And", "Or",
          "Abs", "Neg", "Floor", "Ceil", "Round", "Sign", "Dropout", "DepthToSpace",
          "SpaceToDepth", "TopK", "NonZero", "ConstantOfShape", "Range"}
FLOAT = 1  # onnx.TensorProto.FLOAT


def reduction_length(node: Any, inits: dict[str, Any], shapes: dict[str, tuple[int, ...]],
                     producer: dict[str, Any]) -> int:
    """Terms each output element of ``node`` sums (1 for elementwise ops)."""
    def weight_shape(name: str) -> tuple[int, ...] | None:
        dq = producer.get(name)
        source = dq.input[0] if dq is not None and dq.op_type == "DequantizeLinear" else name
        return tuple(inits[source].dims) if source in inits else shapes.get(name)

    if node.op_type in ("Conv", "ConvTranspose"):
        w = weight_shape(node.input[1])
        return int(np.prod(w[1:])) if w else 1
    if node.op_type in ("Gemm", "MatMul"):
        a = shapes.get(node.input[0])
        return int(a[-1]) if a else 1
    if node.op_type in _RECURRENT:  # each gate sums the input and the hidden state
        w, r = weight_shape(node.input[1]), weight_shape(node.input[2])
        return int((w[-1] if w else 0) + (r[-1] if r else 0)) or 1
    if node.op_type in ("Softmax", "LogSoftmax"):
        x = shapes.get(node.input[0])
        axis = next((a.i for a in node.attribute if a.name == "axis"), -1)
        return int(x[axis]) if x else 1
    if node.op_type in _POOLING:
        x = shapes.get(node.input[0])
        if node.op_type == "AveragePool":
            kernel = next((list(at.ints) for at in node.attribute if at.name == "kernel_shape"),
                          [1])
            return int(np.prod(kernel))
        return int(np.prod(x[2:])) if x and len(x) > 2 else 1
    return 1


def rounding_units(node: Any, inits: dict[str, Any], shapes: dict[str, tuple[int, ...]],
                   producer: dict[str, Any]) -> float:
    """The worst-case float32 error of ``node``'s result in units of roundoff (module doc)."""
    if node.op_type in _EXACT:
        return 0.0
    terms = reduction_length(node, inits, shapes, producer)
    extra = TRANSCENDENTAL_ULPS if node.op_type in _TRANSCENDENTAL else 0.0
    return float(max(1, terms) + extra)


def is_int8_op(node: Any, producer: dict[str, Any], readers: dict[str, list[Any]],
               constants: set[str]) -> bool:
    """Every computed input dequantized from int8 and every reader a QuantizeLinear: an int8
    kernel on both sides."""
    computed = [i for i in node.input if i and i not in constants]
    from_int8 = all(producer.get(i) is not None and producer[i].op_type == "DequantizeLinear"
                    for i in computed)
    outs = [r for o in node.output for r in readers.get(o, [])]
    return from_int8 and bool(outs) and all(r.op_type == "QuantizeLinear" for r in outs)


def _shapes_and_types(model: Any) -> tuple[dict[str, tuple[int, ...]], dict[str, int]]:
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # noqa: BLE001 - shapes only refine K and the signs; types gate the nudge
        inferred = model.graph
    infos = [*inferred.input, *inferred.value_info, *inferred.output]
    shapes = {vi.name: tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
              for vi in infos if all(d.HasField("dim_value") for d in vi.type.tensor_type.shape.dim)}
    types = {vi.name: vi.type.tensor_type.elem_type for vi in infos}
    return shapes, types


def jittered(model: Any, seed: int = SEED) -> Any:
    """A copy of the QDQ ``model`` with the result of each float op and each int8 op outside
    ``SAME_BYTES_INT8`` scaled by ``1 +- rounding_units x 2^-24`` (see the module doc); None
    when there is none."""
    import onnx
    from onnx import helper, numpy_helper

    graph = model.graph
    constants = {t.name for t in graph.initializer} | {
        o for n in graph.node if n.op_type == "Constant" for o in n.output}
    producer = {o: n for n in graph.node for o in n.output}
    readers: dict[str, list[Any]] = {}
    for n in graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    targets = {i for i, n in enumerate(graph.node) if n.op_type not in _EXACT
               and not (n.op_type in SAME_BYTES_INT8 and is_int8_op(n, producer, readers, constants))}
    if not targets:
        return None  # int8 convolutions alone: nothing to nudge (and no shape inference to pay)
    shapes, types = _shapes_and_types(model)
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    graph = copy.graph
    inits = {t.name: t for t in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    rng = np.random.default_rng(seed)
    nodes = []
    for position, node in enumerate(graph.node):
        nodes.append(node)
        if position not in targets:
            continue
        units = rounding_units(node, inits, shapes, producer)
        for index, name in enumerate(node.output):
            if not name or types.get(name) != FLOAT:
                continue
            # an independent sign per element where the shape is known (errors of separate
            # results do not share a direction), one per tensor otherwise
            shape = shapes.get(name) or ()
            signs = rng.choice([-1.0, 1.0], size=shape) if shape else rng.choice([-1.0, 1.0])
            factor = 1.0 + signs * units * UNIT_ROUNDOFF
            raw = f"{name}_edgekit_exact"
            node.output[index] = raw
            graph.initializer.append(numpy_helper.from_array(
                np.asarray(factor, np.float32), f"{name}_edgekit_jitter_factor"))
            nodes.append(helper.make_node("Mul", [raw, f"{name}_edgekit_jitter_factor"], [name],
                                          name=f"{name}_edgekit_jitter"))
    if len(nodes) == len(graph.node):
        return None
    del graph.node[:]
    graph.node.extend(nodes)
    return copy


def jitter_moves(model: Any, feeds: dict[str, np.ndarray], outputs: list[str],
                 axes: dict[str, int] | None = None) -> dict[str, np.ndarray]:
    """Per output, each element's largest |jittered - recorded| over ``DRAWS`` sign draws on
    ``feeds`` (one sample at a time, on each input's batch axis: ``axes``), in the output's
    own units, all on the host's exact int8 path."""
    from edgekit.converters.core.runner import one_by_one, session

    draws = [m for m in (jittered(model, SEED + d) for d in range(DRAWS)) if m is not None]
    if not draws:
        return {}
    base = session(model.SerializeToString(), threads=1, exact_int8=True)
    names = [n for n in outputs if n in {o.name for o in base.get_outputs()}]
    samples = one_by_one(feeds, axes)
    recorded = [base.run(names, sample) for sample in samples]
    found: dict[str, list[np.ndarray]] = {}
    for nudged in draws:
        moved = session(nudged.SerializeToString(), threads=1, exact_int8=True)
        for sample, ours in zip(samples, recorded, strict=True):
            for n, a, b in zip(names, ours, moved.run(names, sample), strict=True):
                if np.issubdtype(np.asarray(a).dtype, np.number):
                    found.setdefault(n, []).append(
                        np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).reshape(-1))
    per_draw = {n: np.split(np.concatenate(rows), len(draws)) for n, rows in found.items()}
    return {n: np.max(np.stack(parts), axis=0) for n, parts in per_draw.items()}

"""Offline estimate of a model on a target: size, work, memory, latency and energy.

    from edgekit.converters.estimate import estimate
    est = estimate("model.onnx", "rpi4")
    est.variants["int8"].latency_s[4]      # seconds per inference at 4 threads
    print(est.table())

Both variants are always estimated: ``float32`` (every Q/DQ stripped) and ``int8`` (a QDQ
model as stored, or what quantize_static would make of a float model).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from edgekit.errors import UnsupportedModelError

from .cost import CostModel, power_w
from .graph import load_model, read_graph
from .host_rates import load_or_calibrate
from .liveness import peak_activations
from .ops import KINDS, Op, build_ops
from .tflite_graph import TFLiteModel, read_tflite, tflite_bytes
from .types import Graph


@dataclass
class Variant:
    precision: str
    params: int
    macs: int  # conv, depthwise and gemm multiply-accumulates
    element_ops: int  # everything else (elementwise, pooling, normalization...)
    macs_by_kind: dict[str, int]
    weight_bytes: int
    activation_bytes: int  # peak of live activations
    peak_op: str
    ram_bytes: int  # weights (as held while loading) + activations + runtime overhead
    kernels: int  # kernel calls after fusion
    latency_s: dict[int, float] = field(default_factory=dict)  # threads -> seconds
    power_w: dict[int, float] = field(default_factory=dict)
    energy_j: dict[int, float] = field(default_factory=dict)
    latency_by_kind: dict[str, float] = field(default_factory=dict)  # at the profile's threads


@dataclass
class Estimate:
    model: str
    target: str
    method: str
    source: str
    threads: list[int]
    stored: str  # precision as stored: float32 or int8
    stored_bytes_by_dtype: dict[str, int]
    stored_params_by_dtype: dict[str, int]
    variants: dict[str, Variant]
    warnings: list[str] = field(default_factory=list)
    # ops the cost model cannot cost: {"ops": [{name, op, reason}], "node_share",
    # "host_share" (None: not measurable here), "costed_as": "host-timed" | "not costed"}
    uncosted: dict[str, Any] = field(default_factory=dict)

    @property
    def judges_latency(self) -> bool:
        """False when ops that are not costed leave the latency (and power, energy) short."""
        return self.uncosted.get("costed_as", "host-timed") == "host-timed"

    def cannot_judge(self, flag: str) -> str:
        """What to say of a budget (``--max-latency-ms``) this estimate cannot judge."""
        return (f"cannot judge {flag}: {100 * self.uncosted['node_share']:.1f}% of the graph "
                f"({len(self.uncosted['ops'])} of its nodes: "
                f"{', '.join(sorted({o['op'] for o in self.uncosted['ops']}))}) not costed")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for variant in data["variants"].values():
            for key in ("latency_s", "power_w", "energy_j"):
                variant[key] = {str(k): v for k, v in variant[key].items()}
        return data

    def table(self) -> str:
        from .table import format_table

        return format_table(self)


def analyse(graph: Graph, model: CostModel, threads: list[int],
            profile: Any, share: float = 0.0) -> tuple[Variant, list[Op]]:
    """One variant: graph (read at its precision) -> kernel calls -> figures. ``share``: the
    part of a run the uncosted ops take on the host; the latency is the costed ops' scaled up
    by it (``uncosted.py``)."""
    precision = graph.precision
    ops = build_ops(graph)
    weights = {w for op in ops if op.kind != "alias" for w in op.weight_names}
    weight_bytes = sum(graph.info(w).nbytes for w in weights)
    # parameters: weights and biases, not quantization scales or int64 shape constants
    params = sum(graph.info(w).numel for w in weights
                 if w not in graph.qparams and graph.info(w).itemsize != 8)
    live = peak_activations(graph, ops)
    by_kind: Counter[str] = Counter()
    for op in ops:
        by_kind[op.kind] += op.macs
    macs = sum(by_kind[k] for k in KINDS if k != "elementwise")
    variant = Variant(
        precision=precision, params=params, macs=macs, element_ops=by_kind["elementwise"],
        macs_by_kind={k: by_kind[k] for k in KINDS}, weight_bytes=weight_bytes,
        activation_bytes=live.peak_bytes, peak_op=live.peak_op,
        ram_bytes=model.ram_bytes(weight_bytes, live.peak_bytes),
        kernels=sum(1 for op in ops),
    )
    costed = [op for op in ops if not op.uncosted]
    for t in threads:
        seconds = model.latency(costed, t) / (1.0 - share)
        variant.latency_s[t] = seconds
        variant.power_w[t] = power_w(profile, t)
        variant.energy_j[t] = variant.power_w[t] * seconds
    variant.latency_by_kind = model.latency_by_kind(costed, threads[-1])
    if share:
        variant.latency_by_kind["uncosted"] = variant.latency_s[threads[-1]] * share
    return variant, ops


def estimate(source: Any, target: Any = "rpi4", threads: list[int] | None = None,
             calibrate: bool = True,
             input_shapes: dict[str, tuple[int, ...]] | None = None) -> Estimate:
    """Estimate ``source`` (ONNX or ``.tflite`` path, ``.edgekit`` path or ModelProto) on
    ``target``; an artifact is read through its ONNX model, else through its ``.tflite``.

    ``threads`` defaults to 1 and the profile's thread count. ``calibrate=False`` makes the
    ``host`` target fail instead of running the micro-benchmark when nothing is cached.
    ``input_shapes`` pins symbolic input dims ({name: dims}, as a build's ``--input-shape``);
    open dims left are costed at 1 past the batch, and a warning names them.
    """
    from edgekit.targets import Profile, load_profile

    profile = target if isinstance(target, Profile) else load_profile(target)
    tflite = tflite_bytes(source)
    if tflite is not None:
        return _estimate_tflite(TFLiteModel(tflite, str(source)), str(source), profile,
                                cost_model_for(profile, calibrate), threads, input_shapes)
    model_proto = load_model(source)
    open_dims = _open_dims(model_proto, input_shapes or {})
    if input_shapes:
        from edgekit.converters.graph.io_spec import describe_io, named_shapes
        from edgekit.converters.graph.shapes import pin_inputs

        model_proto = pin_inputs(model_proto, named_shapes(input_shapes,
                                                           describe_io(model_proto)[0]))
    cost = cost_model_for(profile, calibrate)
    if threads is None:
        threads = sorted({1, profile.threads})
    stored_bytes: Counter[str] = Counter()
    stored_params: Counter[str] = Counter()
    from onnx import helper

    for init in model_proto.graph.initializer:
        try:
            dtype = str(helper.tensor_dtype_to_np_dtype(init.data_type))
        except (KeyError, TypeError, ValueError):
            dtype = f"onnx:{init.data_type}"
        count = 1
        for dim in init.dims:
            count *= int(dim)
        stored_params[dtype] += count
        stored_bytes[dtype] += count * helper.tensor_dtype_to_np_dtype(init.data_type).itemsize \
            if not dtype.startswith("onnx:") else 0
    stored = "int8" if any(n.op_type == "DequantizeLinear" for n in model_proto.graph.node) \
        else "float32"
    variants: dict[str, Variant] = {}
    warnings: list[str] = [
        f"input {name!r} has symbolic dim(s) {dims} past the batch, costed at 1: pass "
        f"--input-shape {name}=DIMS for the size it will run at" for name, dims in open_dims]
    graphs = {p: read_graph(model_proto, p) for p in ("float32", "int8")}
    uncosted = _uncosted(model_proto, graphs["float32"])
    share = (uncosted.get("host_share") or 0.0) if uncosted.get("costed_as") == "host-timed" else 0.0
    for precision, graph in graphs.items():
        variants[precision] = analyse(graph, cost, threads, profile, share)[0]
        if graph.unknown_shapes and precision == "float32":
            warnings.append(
                f"{len(graph.unknown_shapes)} tensor(s) without an inferred shape (e.g. "
                f"{graph.unknown_shapes[0]!r}): their bytes and MACs are not counted")
    if uncosted:
        warnings.append(_uncosted_line(uncosted))
    name = str(source) if not hasattr(source, "graph") else (model_proto.graph.name or "<model>")
    return Estimate(model=name, target=profile.name, method=cost.method, source=cost.source,
                    threads=list(threads), stored=stored,
                    stored_bytes_by_dtype=dict(stored_bytes),
                    stored_params_by_dtype=dict(stored_params), variants=variants,
                    warnings=warnings, uncosted=uncosted)


def _uncosted(model_proto: Any, graph: Graph) -> dict[str, Any]:
    """The ops of ``graph`` the cost model cannot cost, their share of the graph's nodes and
    of a run on this host (``uncosted.host_share``); empty when every op is costed."""
    from .uncosted import host_share

    found = [n for n in graph.nodes if n.uncosted]
    if not found:
        return {}
    indexes = [int(n.name.rpartition("#")[2]) for n in found]
    measured = host_share(model_proto, indexes)
    usable = measured is not None and measured.usable
    return {"ops": [{"name": n.name.rpartition("#")[0], "op": n.op_type, "reason": n.uncosted}
                    for n in found],
            "node_share": len(found) / max(1, len(graph.nodes)),
            "host_share": None if measured is None else round(measured.share, 4),
            "costed_as": "host-timed" if usable else "not costed"}


def _uncosted_line(uncosted: dict[str, Any]) -> str:
    ops = uncosted["ops"]
    kinds = ", ".join(sorted({f"{o['op']} ({o['reason']})" for o in ops}))
    head = f"{len(ops)} op(s) the cost model cannot cost: {kinds}"
    share = uncosted["host_share"]
    if uncosted["costed_as"] == "host-timed":
        return (f"{head}; timed on this host (onnxruntime, 1 thread) at {100 * share:.1f}% of a "
                "run and scaled with the rest of the model to the target")
    measured = ("could not be run on this host" if share is None
                else f"take {100 * share:.0f}% of a run on this host, too much to scale from")
    return (f"{head}; NOT COSTED ({measured}): they are {100 * uncosted['node_share']:.1f}% of "
            "the graph's nodes, and the latency, power and energy figures leave them out")


def cost_model_for(profile: Any, calibrate: bool) -> CostModel:
    """The profile's cost model; ``host`` reads (or, with ``calibrate``, measures) its rates."""
    benchmark = profile.cost_model is not None and profile.cost_model.method == "benchmark"
    return CostModel.from_profile(profile, load_or_calibrate(run=calibrate) if benchmark else None)


def _estimate_tflite(model: TFLiteModel, name: str, profile: Any, cost: CostModel,
                     threads: list[int] | None,
                     input_shapes: dict[str, tuple[int, ...]] | None) -> Estimate:
    """A ``.tflite`` (or a tflite-only artifact): shapes are fixed in the file, so
    ``input_shapes`` may only repeat them."""
    fixed = dict(zip(model.input_names(), (model.shape(i) for i in model.graph.inputs),
                     strict=True))
    for key, dims in (input_shapes or {}).items():
        if key not in fixed or tuple(dims) != fixed[key]:
            raise UnsupportedModelError(
                f"{name}: a .tflite model has fixed input shapes {fixed}; --input-shape "
                f"{key}={'x'.join(map(str, dims))} differs (estimate the source ONNX model "
                "to cost another size)")
    threads = threads or sorted({1, profile.threads})
    variants = {p: analyse(read_tflite(model, p), cost, threads, profile)[0]
                for p in ("float32", "int8")}
    stored_bytes, stored_params = model.stored()
    return Estimate(model=name, target=profile.name, method=cost.method, source=cost.source,
                    threads=list(threads), stored=model.stored_precision(),
                    stored_bytes_by_dtype=stored_bytes, stored_params_by_dtype=stored_params,
                    variants=variants, warnings=[])


def _open_dims(model: Any, pinned: dict[str, tuple[int, ...]]) -> list[tuple[str, list[str]]]:
    """Inputs not in ``pinned`` with symbolic dims past axis 0, and those dims' names."""
    initializers = {i.name for i in model.graph.initializer}
    found = []
    for vi in model.graph.input:
        if vi.name in initializers or vi.name in pinned:
            continue
        dims = [d.dim_param or "?" for d in list(vi.type.tensor_type.shape.dim)[1:]
                if not d.HasField("dim_value") or d.dim_value <= 0]
        if dims:
            found.append((vi.name, dims))
    return found

"""Activation steps learned by block reconstruction (BRECQ / QDrop, LSQ+ steps), a study.

Min-max ranges pick each activation's grid from that tensor alone; YOLOv8n's int8 error is
their noise compounded along the backbone (docs/measurements/yolo-int8.md). Here the steps
and zero points of a QDQ model's activation quantizers are learned jointly, block by block,
by what they do to the block's output: the loss is the MSE between the block's fake-quantized
output and the float model's, each block fed its predecessors' *quantized* outputs (so one
block's error is not carried into the next one's target), with QDrop (each element skips
quantization with probability ``drop`` while training) for a flatter optimum. A held-out
share of the samples picks the best state of each block (the min-max start included, so a
block never ends worse than min-max on them). Weights stay as built (nearest rounding).

Optional loss weightings (study knobs, docs/measurements/yolo-reconstruct.md): per output
channel, a saliency map's focus, or per-element sensitivities (BRECQ's Fisher diagonal).
None of them made YOLOv8n's held-out detections better than min-max's; this is not a build stage.

What is learned is a range per owning tensor (``Learned.ranges``): written into the build's
min-max range table, the same quantizer and writer emit the model (no new op).
"""

from __future__ import annotations

import graphlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from edgekit.errors import UnsupportedModelError

from .reconstruct_graph import FakeQuant, Node, QdqGraph, key_of, scale_name

FIXED_OUTPUT_OPS = frozenset({"Sigmoid", "Softmax"})  # LiteRT fixes their output grid (1/256)
MODEL_BLOCK = re.compile(r"^/model\.(\d+)/")  # Ultralytics modules: /model.N/...


def ultralytics_block(name: str) -> str | None:
    """``/model.N/...`` -> ``model.N`` (zero-padded so blocks sort), other names: None."""
    found = MODEL_BLOCK.match(name)
    return f"model.{int(found.group(1)):03d}" if found else None


@dataclass(frozen=True)
class Settings:
    iters: int = 60  # optimizer steps per block
    batch: int = 4
    drop: float = 0.5  # QDrop probability
    held_out: float = 0.25  # share of the samples that only picks each block's best state
    check_every: int = 10  # steps between held-out checks
    lr_step: float = 0.01  # Adam on log(step / min-max step)
    lr_zero: float = 0.1  # Adam on the zero point's shift, in steps
    seed: int = 0
    per_channel_loss: bool = False  # each output channel (axis 1) weighed by its own float power
    only: tuple[str, ...] = ()  # blocks to learn (the others keep their start grids); () = all
    focus: float = 0.0  # spatial outputs' error weighed by 1 + focus * the sample's ``saliency`` there


@dataclass
class BlockReport:
    name: str
    nodes: int
    learned: int  # quantizers learned in this block
    held_out_before: float  # held-out block-output error / float power (NSR), min-max grids
    held_out_after: float
    seconds: float

    def db(self) -> tuple[float, float]:
        return (-10 * np.log10(max(self.held_out_before, 1e-30)), -10 * np.log10(max(self.held_out_after, 1e-30)))


@dataclass
class Learned:
    quantizers: dict[str, tuple[float, int]]  # scale initializer -> (scale, zero point)
    ranges: dict[str, tuple[float, float]]  # owning tensor -> the range giving that grid
    blocks: list[BlockReport] = field(default_factory=list)
    seconds: float = 0.0


def partition(graph: QdqGraph, block_of: Callable[[str], str | None]) -> list[tuple[str, list[Node]]]:
    """The graph's nodes as blocks in dependency order. A compute node's block is ``block_of``
    its name (else its first input's producer's); a Q/DQ node belongs to the block making the
    tensor it quantizes (the graph input's to the block reading it)."""
    producer = {o: n for n in graph.nodes for o in n.outputs}
    readers: dict[str, list[Node]] = {}
    for n in graph.nodes:
        for i in n.inputs:
            readers.setdefault(i, []).append(n)
    key: dict[str, str] = {}

    def of(node: Node, seen: frozenset[str] = frozenset()) -> str:
        if node.name in key:
            return key[node.name]
        qdq = node.op in ("QuantizeLinear", "DequantizeLinear")
        found = None if qdq else block_of(node.name)
        source = producer.get(node.inputs[0]) if node.inputs else None
        if found is None and source is not None and source.name not in seen:
            found = of(source, seen | {node.name})
        if found is None:  # a quantizer of the graph input: the block reading it
            users = [u for o in node.outputs for u in readers.get(o, []) if u.name not in seen]
            found = min((of(u, seen | {node.name}) for u in users), default="input")
        key[node.name] = found
        return found

    blocks: dict[str, list[Node]] = {}
    for node in graph.nodes:
        blocks.setdefault(of(node), []).append(node)
    order = graphlib.TopologicalSorter({b: set() for b in blocks})
    made_by = {o: of(n) for n in graph.nodes for o in n.outputs}
    for name, nodes in blocks.items():
        for n in nodes:
            order.add(name, *(made_by[i] for i in n.inputs if i in made_by and made_by[i] != name))
    try:
        ordered = list(order.static_order())
    except graphlib.CycleError as exc:
        raise UnsupportedModelError(f"reconstruction: blocks {exc.args[1]} read each other's outputs both ways; "
                                    f"a block must be a contiguous part of the graph") from exc
    return [(name, _topological(blocks[name])) for name in ordered]


def _topological(nodes: list[Node]) -> list[Node]:
    made = {o: n.name for n in nodes for o in n.outputs}
    order = graphlib.TopologicalSorter({n.name: {made[i] for i in n.inputs if i in made} for n in nodes})
    by_name = {n.name: n for n in nodes}
    return [by_name[name] for name in order.static_order()]


def float_name(name: str) -> str:
    from .reconstruct_graph import DQ_SUFFIX, Q_SUFFIX

    return name.removesuffix(DQ_SUFFIX).removesuffix(Q_SUFFIX)


def _boundaries(blocks: list[tuple[str, list[Node]]], graph_outputs: set[str], consts: set[str]
                ) -> tuple[list[list[str]], list[list[str]]]:
    """Per block: the tensors it reads from before it, and those it gives to later blocks."""
    made_in = {o: b for b, (_, nodes) in enumerate(blocks) for n in nodes for o in n.outputs}
    read_later: dict[str, int] = {}
    inputs: list[list[str]] = []
    for b, (_, nodes) in enumerate(blocks):
        own = {o for n in nodes for o in n.outputs}
        wanted = [i for n in nodes for i in n.inputs if i and i not in own and i not in consts]
        inputs.append(list(dict.fromkeys(wanted)))
        for i in wanted:
            read_later[i] = max(read_later.get(i, -1), b)
    outputs = [[o for n in nodes for o in n.outputs
                if (o in read_later and read_later[o] > b) or o in graph_outputs] for b, (_, nodes) in enumerate(blocks)]
    del made_in
    return inputs, outputs


def reconstruct(qdq: object, float_model: object, samples: np.ndarray, settings: Settings = Settings(),
                block_of: Callable[[str], str | None] = ultralytics_block,
                progress: Callable[[str], None] | None = None,
                start: dict[str, tuple[float, int]] | None = None,
                saliency: np.ndarray | None = None,
                sensitivity: dict[str, np.ndarray] | None = None) -> Learned:
    """Learn the activation grids of ``qdq`` (an onnx QDQ model of ``float_model``) on
    ``samples`` (its one input, ``[N, ...]``), block by block. Neither model is modified.
    ``start``: grids (scale initializer -> scale, zero point) to begin from instead of the model's.
    ``saliency``: ``[N, H, W]`` per sample, where its output matters (a detector: the float
    model's best class score per input pixel); with ``settings.focus`` it weighs every
    ``[N, C, h, w]`` block output's error there (pooled to ``h, w`` by max).
    ``sensitivity``: per float tensor name, an array of its shape weighing each element's error
    (BRECQ's Fisher-diagonal variant: the squared gradient of what the output is judged by)."""
    from edgekit.converters.core.expose import with_outputs

    began = time.perf_counter()
    torch.manual_seed(settings.seed)
    rng = np.random.default_rng(settings.seed)
    graph = QdqGraph(qdq)
    for name, (scale, zero) in (start or {}).items():
        graph.quantizers[key_of(name)].start_at(scale, zero)
    blocks = partition(graph, block_of)
    input_name = qdq.graph.input[0].name  # type: ignore[attr-defined]
    outputs_of = {o.name for o in qdq.graph.output}  # type: ignore[attr-defined]
    consts = set(graph.consts) | set(graph.arrays)
    block_inputs, block_outputs = _boundaries(blocks, outputs_of, consts)
    wanted = sorted({float_name(t) for ts in (*block_inputs, *block_outputs) for t in ts} - {input_name})
    reference = _run_float(with_outputs(float_model, wanted, only=True), samples, wanted)
    reference[input_name] = samples.astype(np.float32)
    count = len(samples)
    order = rng.permutation(count)
    held = order[:max(1, int(round(count * settings.held_out)))]
    train = order[len(held):] if count > len(held) else held
    quantized: dict[str, np.ndarray] = {input_name: samples.astype(np.float32)}
    frozen = _frozen(graph, input_name)
    done: set[str] = set(frozen)
    reports = []
    for b, (name, nodes) in enumerate(blocks):
        tick = time.perf_counter()
        keys = list(dict.fromkeys(graph.scale_of[o] for n in nodes if n.op == "QuantizeLinear"
                                  for o in n.outputs))
        learn = [k for k in keys if k not in done]
        ins, outs = block_inputs[b], block_outputs[b]
        targets = {o: torch.from_numpy(reference[float_name(o)]) for o in outs}
        if saliency is not None and settings.focus > 0:
            targets = {o: _Weighted(t, saliency, settings.focus) for o, t in targets.items()}
        if sensitivity is not None:
            targets = {o: _Weighted(t, None, 0.0, sensitivity.get(float_name(o))) for o, t in targets.items()}
        feeds = {i: (torch.from_numpy(quantized[i]), torch.from_numpy(reference[float_name(i)])) for i in ins}
        before = after = _error(graph, nodes, feeds, targets, held, settings.per_channel_loss)
        if learn and outs and (not settings.only or name in settings.only):
            after = _train(graph, nodes, [graph.quantizers[k] for k in keys], [graph.quantizers[k] for k in learn],
                           feeds, targets, train, held, before, settings, rng)
        done.update(keys)
        with torch.no_grad():
            env = graph.run(nodes, {i: q for i, (q, _) in feeds.items()})
        for o in outs:
            quantized[o] = env[o].numpy()
        for i in ins:  # free what no later block reads
            if all(i not in later for later in block_inputs[b + 1:]):
                quantized.pop(i, None)
        reports.append(BlockReport(name, len(nodes), len(learn), before, after, time.perf_counter() - tick))
        if progress:
            low, high = reports[-1].db()
            progress(f"{name}: {len(learn)} grids learned, held-out block SQNR {low:.1f} -> {high:.1f} dB "
                     f"({reports[-1].seconds:.0f} s)")
    chosen = {scale_name(k): q.learned() for k, q in graph.quantizers.items() if k not in frozen}
    ranges = {scale_name(k).removesuffix("_scale"): q.range() for k, q in graph.quantizers.items()
              if k not in frozen}
    return Learned(chosen, ranges, reports, time.perf_counter() - began)


def _frozen(graph: QdqGraph, input_name: str) -> set[str]:
    """Grids not to learn: the model input's, and those LiteRT fixes (Sigmoid, Softmax outputs)."""
    fixed = set()
    for key in graph.quantizers:
        owner = scale_name(key).removesuffix("_scale")
        if owner == input_name or graph.owner_op.get(owner) in FIXED_OUTPUT_OPS:
            fixed.add(key)
    return fixed


def _run_float(model: object, samples: np.ndarray, names: list[str]) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options,  # type: ignore[attr-defined]
                                   providers=["CPUExecutionProvider"])
    feed = session.get_inputs()[0].name
    runs = [session.run(names, {feed: samples[i:i + 1].astype(np.float32)}) for i in range(len(samples))]
    return {n: np.concatenate([r[k] for r in runs]) for k, n in enumerate(names)}


def _loss(got: dict[str, torch.Tensor], targets: dict[str, torch.Tensor], index: np.ndarray,
          per_channel: bool = False) -> torch.Tensor:
    """Mean over the block's outputs (``per_channel``: over their channels, axis 1) of the
    error power relative to the float power: a packed output's 0..1 class scores weigh as much
    as its pixel box coordinates."""
    terms = []
    for o, t in targets.items():
        if isinstance(t, _Weighted):
            weight, want = t.weight[index], t.tensor[index]
            terms.append((weight * (got[o] - want) ** 2).mean() / (weight * want ** 2).mean().clamp_min(1e-12))
            continue
        want = t[index]
        axes = tuple(i for i in range(want.ndim) if i != 1) if per_channel and want.ndim > 1 else tuple(range(want.ndim))
        terms.append((((got[o] - want) ** 2).mean(axes) / (want ** 2).mean(axes).clamp_min(1e-12)).mean())
    return torch.stack(terms).mean()


class _Weighted:
    """A block output's float target with its per-position loss weight (1 + focus * saliency)."""

    def __init__(self, tensor: torch.Tensor, saliency: np.ndarray | None, focus: float,
                 weight: np.ndarray | None = None) -> None:
        import torch.nn.functional as F  # noqa: N812

        self.tensor = tensor
        if weight is not None:
            self.weight = torch.from_numpy(weight.astype(np.float32))
        elif saliency is not None and tensor.ndim == 4:
            pooled = F.adaptive_max_pool2d(torch.from_numpy(saliency[:, None].astype(np.float32)), tensor.shape[2:])
            self.weight = 1.0 + focus * pooled
        else:
            self.weight = torch.ones((tensor.shape[0],) + (1,) * (tensor.ndim - 1))

    def __getitem__(self, index: np.ndarray) -> torch.Tensor:
        return self.tensor[index]


def _error(graph: QdqGraph, nodes: list[Node], feeds: dict[str, tuple[torch.Tensor, torch.Tensor]],
           targets: dict[str, torch.Tensor], index: np.ndarray, per_channel: bool = False) -> float:
    if not targets:
        return 0.0
    graph.eval()
    with torch.no_grad():
        env = graph.run(nodes, {i: q[index] for i, (q, _) in feeds.items()})
        return float(_loss(env, targets, index, per_channel))


def _train(graph: QdqGraph, nodes: list[Node], present: list[FakeQuant], learn: list[FakeQuant],
           feeds: dict[str, tuple[torch.Tensor, torch.Tensor]], targets: dict[str, torch.Tensor],
           train: np.ndarray, held: np.ndarray, best: float, settings: Settings,
           rng: np.random.Generator) -> float:
    """Adam on the block's new grids; returns the best held-out error, its state kept."""
    optimizer = torch.optim.Adam([{"params": [q.log_ratio for q in learn], "lr": settings.lr_step},
                                  {"params": [q.shift for q in learn], "lr": settings.lr_zero}])
    saved = [(q.log_ratio.detach().clone(), q.shift.detach().clone()) for q in learn]
    for step in range(1, settings.iters + 1):
        graph.train()
        for q in present:
            q.drop = settings.drop
        index = rng.choice(train, min(settings.batch, len(train)), replace=False)
        env = {}
        for name, (quant, real) in feeds.items():
            # QDrop on the block's inputs too: each element quantized or float at random
            keep = torch.rand_like(quant[index]) < settings.drop if settings.drop > 0 else None
            env[name] = quant[index] if keep is None else torch.where(keep, real[index], quant[index])
        loss = _loss(graph.run(nodes, env), targets, index, settings.per_channel_loss)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        for q in present:
            q.drop = 0.0
        if step % settings.check_every == 0 or step == settings.iters:
            error = _error(graph, nodes, feeds, targets, held, settings.per_channel_loss)
            if error < best:
                best = error
                saved = [(q.log_ratio.detach().clone(), q.shift.detach().clone()) for q in learn]
    with torch.no_grad():
        for q, (ratio, shift) in zip(learn, saved, strict=True):
            q.log_ratio.copy_(ratio)
            q.shift.copy_(shift)
    return best

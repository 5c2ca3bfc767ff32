"""Precision chosen by speed, per layer: the layers the target runs slower at int8 than float.

``speed_choice.py`` asks the question of the whole model; a model that int8 speeds up overall
can still hold layers that lose. On this 2-core AVX2 EPYC, ``edgekit calibrate-host`` measured
a 1-3 channel stem at 8.9 GMAC/s in int8 against 15.5 in float, and depthwise at 17 against
33; the published Pi 4 rates (``targets/rpi4.toml``) never have an int8 layer slower.

1. Candidates: the int8 model's MAC layers (conv, stem, depthwise, gemm) whose int8 kernel
   costs more on the target's cost model, at the profile's threads, than the same layer in
   float plus the two conversions a float layer between int8 neighbours adds (its input
   dequantized, its output quantized: one elementwise pass each). The build names them.
2. Under ``--objective latency``, each kind of candidate is rebuilt float as one group and
   timed against the int8 model: measured when the target is this machine, as the backend
   runs it (the estimate misses the runtime's layout changes), else by the estimator on each
   whole QDQ model, which costs the Q/DQ nodes the float layers add. Groups faster by at
   least ``MARGIN`` ship together, when the model stays within the accuracy budget; the
   manifest lists them (``precision_speed.layers``); a measured gain must show in two timings.
   On this x86 host the digits CNN's float stem ships float and the EfficientNet-Lite-style
   net stays int8 (``edgekit build --target host --objective latency``;
   docs/measurements/precision.md).
A measured choice depends on the machine it ran on, as the whole-model one does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from edgekit.errors import TargetError

from ..context import BuildContext

MAC_KINDS = ("stem", "conv", "depthwise", "gemm")
MARGIN = 0.02  # a group must save 2%: 1-thread CPU-time medians here move by about 1%
ROUNDS = 12  # interleaved blocks per timing (host_speed.BLOCK_S each)


def slower_layers(path: Path, profile: Any) -> dict[str, list[str]]:
    """{kind: node names} of the int8 model's MAC layers the target's cost model runs slower
    at int8 than at float with its two conversions. ``TargetError`` without a cost model (or
    ``host`` without its measured rates)."""
    import onnx

    from ..estimate import cost_model_for
    from ..estimate.graph import read_graph
    from ..estimate.ops import Op, build_ops

    cost = cost_model_for(profile, calibrate=False)
    named = {n.name for n in onnx.load(str(path)).graph.node if n.name}  # what keep_float takes
    threads = profile.threads
    int8_graph = read_graph(path, "int8")
    int8_ops = build_ops(int8_graph)
    float_ops = {op.name: op for op in build_ops(read_graph(path, "float32"))}
    cached = cost.cached(int8_ops)
    found: dict[str, list[str]] = {}
    for op in int8_ops:
        twin = float_ops.get(op.name)
        if not op.int8 or op.kind not in MAC_KINDS or twin is None:
            continue
        moved = sum(int8_graph.info(t).numel for t in op.inputs) + op.out_elems
        convert = Op(f"{op.name}/convert", "DequantizeLinear", "elementwise", False, moved,
                     moved, 5 * moved, 0)
        as_float = cost.op_seconds(twin, threads, cached) + cost.op_seconds(convert, threads)
        name = op.name.rpartition("#")[0]  # the estimator's "name#index"
        if cost.op_seconds(op, threads, cached) > as_float and name in named:
            found.setdefault(op.kind, []).append(name)
    return found


def time_ratio(ctx: BuildContext, base: Path, other: Path) -> tuple[float, str]:
    """(time of ``other`` / time of ``base``, where the figures come from)."""
    from edgekit.converters.core.runner import session
    from edgekit.converters.estimate.host_speed import paired

    from edgekit.device.cpu import exact_int8_needs_unfused

    from ..stages.quantize import runs_here

    if runs_here(ctx):
        exact = exact_int8_needs_unfused(bool(ctx.quantization.get("reduce_range")))
        feeds = {name: np.ascontiguousarray(a[:1]) for name, a in ctx.val.arrays.items()}
        runs = {k: session(p, threads=1, exact_int8=exact) for k, p in (("a", base), ("b", other))}
        a, b = paired(runs, feeds, ROUNDS)
        return b / a, "measured on this host (onnxruntime, 1 thread)"
    from ..estimate import estimate

    threads = ctx.profile.threads
    a, b = (estimate(str(p), ctx.profile, threads=[threads], calibrate=False)
            .variants["int8"].latency_s[threads] for p in (base, other))
    return b / a, f"estimated for {ctx.profile.name} ({threads} thread(s))"


def line(section: dict[str, Any]) -> str:
    """The summary's line for a manifest's ``precision_speed.layers``."""
    found = section["slower_at_int8"]
    text = (f"  int8 is slower than float for {sum(len(v) for v in found.values())} layer(s) "
            f"({', '.join(f'{len(v)} {k}' for k, v in found.items())}; {section['source']})")
    if not section["groups"]:
        return text + "; --objective latency would try them float"
    tried = ", ".join(f"{k} float {g['time_vs_int8']:.3f}x" for k, g in section["groups"].items())
    shipped = f"shipping {len(section['float'])} float" if section["float"] else "shipping int8"
    return f"{text}; tried ({tried} the int8 time): {shipped}"


def choose_layers_by_speed(ctx: BuildContext) -> None:
    """After the whole-model choice: name the layers int8 makes slower; under the latency
    objective ship the groups of them that measure (or estimate) faster float."""
    if ctx.quantization.get("shipped") == "float":  # the whole model already is
        return
    try:
        found = slower_layers(ctx.quant_path, ctx.profile)
    except TargetError:  # no cost model, or host rates never measured: nothing to say
        return
    if not found:
        return
    section: dict[str, Any] = {"slower_at_int8": found, "source": "estimated per layer for "
                               f"{ctx.profile.name}", "groups": {}, "float": []}
    mixed = ctx.quantization.get("mixed_precision") or {}
    if ctx.config.objective == "latency" and mixed.get("rung", "float") == "float":
        _try_groups(ctx, found, section)
    ctx.report(line(section))  # the summary's own line
    speed = ctx.extra_manifest.setdefault("precision_speed", {})
    speed["layers"] = section
    ctx.mark("precision_speed", "validation", "quant_path", "quantization", "extra_manifest")


def _try_groups(ctx: BuildContext, found: dict[str, list[str]], section: dict[str, Any]) -> None:
    from edgekit.converters.metrics.task_accuracy import Scorer

    from ..stages.validate import record_choice
    from .autoguard import rebuild

    method = ctx.validation["method"]
    earlier = sorted(set(ctx.quantization.get("keep_float") or []))  # the guard's, the user's
    chosen: list[str] = []
    path = ctx.quant_path
    for kind, names in found.items():
        trial = rebuild(ctx, method, earlier + names, kind, folder="speed-")
        ratio, source = time_ratio(ctx, ctx.quant_path, trial)
        if ratio <= 1 - MARGIN and source.startswith("measured"):
            # a second timing must agree: the digits CNN's float stem measured 1.049x in one
            # build and 0.966x in the next (this VM, 1 thread); one lucky timing ships nothing
            ratio = max(ratio, time_ratio(ctx, ctx.quant_path, trial)[0])
        faster = ratio <= 1 - MARGIN
        section["groups"][kind] = {"layers": len(names), "time_vs_int8": round(ratio, 3),
                                   "source": source, "kept": faster}
        ctx.report(f"    {kind} layers float: {ratio:.3f}x the int8 time ({source})"
                   + ("" if faster else f"; not {MARGIN:.0%} faster, kept int8"))
        if faster:
            chosen += names
            path = trial
    if not chosen:
        return
    if sum(g["kept"] for g in section["groups"].values()) > 1:  # each was timed alone
        path = rebuild(ctx, method, earlier + chosen, "all", folder="speed-")
        ratio, _ = time_ratio(ctx, ctx.quant_path, path)
        section["time_vs_int8"] = round(ratio, 3)
        if ratio > 1 - MARGIN:
            ctx.report(f"    together: {ratio:.3f}x the int8 time; shipping int8")
            return
    scorer = Scorer(ctx.config, ctx.float_path, ctx.val, [o["name"] for o in ctx.outputs])
    metrics, score = scorer.score(path)
    budget = ctx.validation.get("accuracy_budget") or {}
    if budget.get("checked") and score.drop > float(budget["limit"]):
        ctx.report(f"    {score.drop:.2f} points lost with them float, over the budget; shipping int8")
        return
    host_speed = ctx.validation.get("host_speed")  # the whole model's, kept for the summary
    guard = (ctx.quantization.get("mixed_precision") or {}).get("nodes", [])
    record_choice(ctx, path, method, metrics, score, scorer.task, ctx.validation["candidates"])
    if host_speed:
        ctx.validation["host_speed"] = host_speed
    ctx.quantization["keep_float"] = sorted(set(earlier) | set(chosen))
    ctx.quantization["mixed_precision"] = {"rung": "float", "nodes": sorted(set(guard) | set(chosen)),
                                           "reason": "accuracy and speed" if guard else "speed"}
    section["float"] = sorted(chosen)

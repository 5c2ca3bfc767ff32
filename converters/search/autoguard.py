"""The accuracy guard of a plain build: on by default, bounded by work, not seconds.

It acts only when the evidence says the budget is missed (the whole 95% interval past it,
``metrics.evidence``) or the artifact is worse than the reference PTQ beyond noise; a figure
whose interval straddles the budget ships, and the summary says how many samples would tell.

Then (``run_guard``):

1. candidates: the head's quantized tensors and the lowest local-SQNR ones, ``restore.CANDIDATES``
   of them (``search/restore.py``);
2. the ceiling: all of them (and every weight) restored to float at once, on the whole validation set, in the format
   the build ships (``shipped.py``). If even that misses, nothing the ladder can do with them meets
   the budget: no rebuild; the ranking below runs on the ``FAULT_SAMPLES`` worst samples only, to
   name the layer at fault in the exit 3 (seconds, not minutes);
3. the ranking: each restored alone on ``restore.SUBSET`` validation samples (the worst first),
   scored by the task metric;
4. rebuilds: the best 1, 2, 4 ... of them (at most ``--guard-steps``), each up the ladder
   ``ladder(profile)`` cheapest rung first (int16 activations for 16x8 ops, fp16 where the CPU has
   it, float: ``ptq/precision.py``), until one is no longer a miss and not worse than the reference.

The work is candidates x samples plus rebuilds x samples, the same on a busy or a quiet machine,
so the same inputs give the same artifact. ``--guard-time`` is only an outer safety limit: when it
cuts the work short the manifest and summary say so.

``enforce_accuracy(ctx)`` runs right after the validate stage of a plain build; if the guard finds
nothing, ``BudgetError`` (exit 3, the table, no artifact, the metric used and how to pick another)
unless ``--accept-accuracy-drop``, which ships the best attempt and says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from edgekit.converters.graph.check import check_stage
from edgekit.converters.metrics.task_accuracy import Scorer, TaskScore
from edgekit.converters.tflite.shipped import FORMAT_NAMES

from edgekit.errors import BudgetError

from ..context import BuildContext
from ..stages.quantize import QuantizeConfig
from . import widen
from .guard_outcome import Attempt, GuardOutcome
from .guard_report import Progress, at_fault, table

LADDER: tuple[str, ...] = ("int8", "int16", "fp16", "float")  # every rung, cheapest first
FAULT_SAMPLES = 2  # worst samples the ranking runs on when no rung can meet the budget (to name the layer)
# share of --guard-time the ranking may take; the rest is for rebuilds (on a MobileNetV2 the
# output-level measurement of every tensor alone takes longer than the whole bound)
RANK_SHARE = 0.4


def ladder(profile: Any) -> tuple[str, ...]:
    """The rungs this target has: fp16 only where its CPU has fp16 arithmetic."""
    return tuple(r for r in LADDER if r != "fp16" or profile.cpu.fp16)


def prefix_sizes(count: int) -> list[int]:
    """1, 2, 4, 8 ... and ``count``: few rebuilds, and the last one tries every ranked step."""
    sizes, k = [], 1
    while k < count:
        sizes.append(k)
        k *= 2
    return sizes + [count] if count else []


def ceiling_items(qdq: Any, float_model: Any, items: list[list[Any]]) -> list[Any]:
    """What the ceiling restores: every candidate and every quantized weight. The float rung
    makes whole nodes float, weights too; without them the ceiling was "activations float,
    weights int8", which on Moonshine (representative calibration) missed the budget by 0.14
    points where the float rung meets it, and the guard stopped as if nothing could."""
    from . import restore

    weights = [r for r in restore.restorables(qdq, float_model).values() if r.kind == "weight"]
    return [r for group in items for r in group] + weights


def covers_a_slow_span(too_slow: dict[str, list[set[str]]], rung: str, nodes: set[str]) -> bool:
    """Whether ``nodes`` at ``rung`` contain a span already over the latency budget there. Only
    the int16 / fp16 rungs grow slower with every node they take; more float nodes can be faster
    (fewer QUANTIZE/DEQUANTIZE at the span's edges, no int8 island between float layers):
    Moonshine's 511-node float span was estimated at 126 ms, the 604-node one at 45 ms."""
    return rung != "float" and any(over <= nodes for over in too_slow.get(rung, []))


def run_guard(ctx: BuildContext, method: str, qdq_path: Path, first: TaskScore, scorer: Scorer,
              acceptable: Callable[[TaskScore], bool]) -> GuardOutcome:
    """Restore the candidates that help the task most up the ladder until ``acceptable``."""
    import onnx

    from . import restore
    from .guard import nodes_of, rungs_for, steps

    config = ctx.config
    started = time.monotonic()
    outcome = GuardOutcome(rungs=ladder(ctx.profile))

    def cut() -> bool:
        if time.monotonic() - started > config.guard_time:
            outcome.timed_out = True
        return outcome.timed_out

    progress = Progress(config.quiet)
    ranges = ctx.ranges.get(method)
    if config.guard_time <= 0:  # no rebuild can happen: ranking would only cost time
        outcome.timed_out = True  # (4.7 of 28 s of an EfficientNet-Lite0 build, bench_build)
        ctx.report("  accuracy guard: off (--guard-time 0)")
        return outcome
    try:
        float_model, qdq = onnx.load(str(ctx.float_path)), onnx.load(str(qdq_path))
        items = restore.candidates(float_model, qdq, ctx.float_path, qdq_path, ctx.calib)
        outcome.candidates = len(items)
        progress(len(items) + 1 + config.guard_steps)
        if not items or cut():
            return outcome
        ceiling_path = ctx.workdir / "guard-ceiling.onnx"
        ceiling_path.write_bytes(restore.restored(qdq, float_model, ceiling_items(qdq, float_model, items)))
        outcome.ceiling = scorer.score(ceiling_path, None, ranges)[1]
        progress(0)
        outcome.hopeless = not acceptable(outcome.ceiling)
        # hopeless: no rebuild can help, but the refusal names the layer at fault, ranked on
        # the few worst samples (seconds: candidates x FAULT_SAMPLES runs, no rebuild)
        index = restore.worst_first(first.result.per_sample, len(ctx.val),
                                    FAULT_SAMPLES if outcome.hopeless else restore.SUBSET)
        subset = ctx.val.take(index)
        labels = None if subset.labels is None or not scorer.task.use_labels else subset.labels
        reference = [r[index] for r in scorer.reference]

        def figure(ref: list[Any], got: list[Any]) -> float:
            result = scorer.task.metric(ref, got, labels)
            return float(result.drop) if result.drop is not None else -float(result.score)

        outcome.subset = len(subset)
        # hopeless: the best of all, not the first good enough on two samples (it names the fault)
        enough = None if outcome.hopeless else scorer.task.budget(ctx.profile)[0]
        _base, ranking, outcome.runs = restore.rank(float_model, qdq, items, reference, subset, figure,
                                                    progress, cut, enough)
        outcome.ranked = len(ranking)
        outcome.ranking = ranking
        singles = {restore.name_of(group) for group in items if len(group) == 1}
        outcome.best_single = next((s for s in ranking if s.tensor in singles), None)
        if ranking:
            ctx.report("  accuracy guard: restoring alone helps most: " + ", ".join(
                f"{s.tensor} ({s.task_drop:.1f} pts)" for s in ranking[:3]))
        if outcome.hopeless:
            return outcome
        label_ops(ranking, ctx.float_path)
        plans = steps(ranking, max_steps=len(ranking))
        bound = widen.latency_bound(ctx, qdq_path)
        budget = scorer.task.budget(ctx.profile)[0]
        too_slow: dict[str, list[set[str]]] = {}  # rung -> node sets its rebuild was over the latency budget

        def attempt_at(names: list[str], nodes: list[str], k: int | str, rung: str) -> Attempt | None:
            """Rebuild ``nodes`` at ``rung`` and score it; None when the rung cannot rewrite the
            graph or breaks the latency budget (the next rung is tried)."""
            if covers_a_slow_span(too_slow, rung, set(nodes)):
                return None  # a superset of a span over the latency budget at this rung: over it too
            try:
                path = rebuild(ctx, method, nodes, k, rung)
                latency = widen.latency_ms(ctx, path) if bound is not None else None
                if latency is not None and latency > bound:
                    too_slow.setdefault(rung, []).append(set(nodes))
                    outcome.over_latency.append({"rung": rung, "nodes": len(nodes), "latency_ms": round(latency, 2),
                                                 "budget_ms": bound})
                    ctx.report(f"  accuracy guard: {len(names)} candidate(s) {rung} ({len(nodes)} nodes): "
                               f"estimated {latency:.0f} ms > the {bound:g} ms latency budget: not scored")
                    return None
                score = scorer.score(path, shipped_keep_float(ctx, nodes, rung), ranges)[1]
            except Exception as exc:  # noqa: BLE001 - a rung that cannot rewrite this graph: the next rung
                if rung == "float":
                    raise
                outcome.failed_rungs.append({"rung": rung, "nodes": len(nodes),
                                             "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
                ctx.warn(f"accuracy guard: the {rung} rung failed on {len(nodes)} node(s) "
                         f"({type(exc).__name__}); trying the next rung")
                return None
            made = Attempt(names, nodes, path, score, acceptable(score), rung, budget)
            outcome.attempts.append(made)
            progress(0)
            ctx.report(f"  accuracy guard: {len(names)} candidate(s) {rung} ({len(nodes)} nodes): "
                       f"{score.evidence.text()} -> {'within the budget' if made.met else 'over it'}")
            return made

        for k, size in enumerate(prefix_sizes(len(plans))):
            plan = plans[size - 1]
            for rung in rungs_for(plan, outcome.rungs):
                if outcome.rebuilds >= config.guard_steps or cut():
                    break
                made = attempt_at([p.tensor for p in plan], nodes_of(plan), k, rung)
                if made is not None and made.met:
                    break
            if outcome.met is not None or outcome.timed_out or outcome.rebuilds >= config.guard_steps:
                break
        if outcome.met is not None and outcome.met.score.evidence.verdict(budget) == "cannot tell":
            widen_fix(ctx, outcome, float_model, qdq, attempt_at, budget, cut)
    finally:
        progress.close()
        outcome.seconds = time.monotonic() - started
        ctx.timings.seconds["accuracy_guard"] = outcome.seconds
    return outcome


def widen_fix(ctx: BuildContext, outcome: GuardOutcome, float_model: Any, qdq: Any,
              attempt_at: Callable[..., Attempt | None], budget: float, cut: Callable[[], bool]) -> None:
    """The fix met the budget but its evidence cannot tell: widen it by each next stretch of
    activations at its rung, nearest first, keeping those that fit the latency budget, stay
    acceptable and leave the figure no worse, skipping the others (``widen.py``); the rebuilds
    left bound the work. The widest that held ships."""
    fix = outcome.met
    assert fix is not None
    covered = set(fix.nodes)
    for k, stretch in enumerate(widen.wider(covered, widen.segment_nodes(float_model, qdq))):
        if outcome.rebuilds >= ctx.config.guard_steps or cut():
            break
        nodes = sorted(covered | stretch)
        made = attempt_at([*fix.float_tensors, f"stretch +{k + 1}"], nodes, f"w{k}", fix.rung)
        if made is None or not made.met or made.score.drop > fix.score.drop:
            continue  # over the latency budget, or no better: a later stretch may still fit
        fix, covered = made, set(nodes)
        outcome.widened = made
        if made.score.evidence.verdict(budget) == "met":
            break


def shipped_keep_float(ctx: BuildContext, nodes: list[str], rung: str) -> list[str]:
    """The .tflite writer's keep_float for a guard attempt: the user's nodes, the attempt's
    at the fp16 / float rungs, and the packed outputs' Concats (split_packed.py: the writer must
    not give a packed output one int8 scale again; YOLOv8n kept 26% of its detections)."""
    from edgekit.converters.tflite.shipped import Shipped

    return Shipped(ctx).keep_float(nodes if rung in ("fp16", "float") else ())


def onnx_nodes(path: Path) -> dict[str, str]:
    """Node name -> op type of the float model (which rungs a plan's nodes can take)."""
    import onnx

    return {n.name: n.op_type for n in onnx.load(str(path), load_external_data=False).graph.node}


def label_ops(ranking: list[Any], float_path: Path) -> None:
    """Give each ranked tensor the op types of its fix set (``rungs_for`` reads them)."""
    model = onnx_nodes(float_path)
    for item in ranking:
        item.ops = {model.get(n, "") for n in item.nodes}


def rung_config(config: Any, nodes: list[str], rung: str) -> QuantizeConfig:
    """The quantize stage's config with ``nodes`` at ``rung`` (int16 / fp16 / float) and the
    user's ``--keep-float`` nodes float: the plain guard's rebuilds and the search's alike."""
    user = set(config.keep_float)
    float_nodes = user | set(nodes) if rung == "float" else user
    return QuantizeConfig(tuple(sorted(float_nodes)), config.per_channel,
                          int16=tuple(sorted(nodes)) if rung == "int16" else (),
                          fp16=tuple(sorted(set(nodes) - user)) if rung == "fp16" else (),
                          bias_correct=config.bias_correct, adaround=config.adaround)


def rebuild(ctx: BuildContext, method: str, nodes: list[str], k: int | str, rung: str = "float",
            folder: str = "guard") -> Path:
    """Quantize once more with ``nodes`` at ``rung`` (int16 / fp16 / float; the user's
    ``--keep-float`` nodes float), in its own folder."""
    from ..stages.quantize import Quantize

    sub = ctx.fork(f"{folder}{k}-{rung}")
    sub.ranges = {method: ctx.ranges[method]}
    sub.candidates = {}
    step = Quantize()
    step.config = rung_config(ctx.config, nodes, rung)
    step.run(sub)
    check_stage(step.name, sub)  # EDGEKIT_CHECK_GRAPHS=1 (tests): the rung's model is valid
    return sub.candidates[method]


def enforce_accuracy(ctx: BuildContext) -> None:
    """After validate: a miss (or worse than the reference beyond noise) runs the guard, then
    ships, or raises; anything else passes."""
    from ..metrics.evidence import compare
    from ..stages.validate import record_choice, reference_in

    check = ctx.validation.get("accuracy_budget") or {}
    worse = bool((check.get("versus_reference") or {}).get("worse"))
    if not check.get("checked") or (check.get("verdict") != "missed" and not worse):
        return
    config = ctx.config
    budget = float(check["limit"])
    method = ctx.validation["method"]
    scorer = Scorer.for_build(ctx)
    first_metrics, first = scorer.score(ctx.quant_path, ctx.quantization.get("keep_float") or [],
                                        ctx.ranges.get(method))

    def passable(score: TaskScore) -> bool:
        """No longer a miss on the evidence, and not worse than the reference beyond noise
        (the reference in the format the attempt was judged in)."""
        if score.evidence.verdict(budget) == "missed":
            return False
        reference = reference_in(ctx, score.format)
        parts = score.result.per_sample
        # outputs batched off axis 0 (silero's state [2, N, 128]) are joined on axis 0 by the
        # runner, so a graph the runner cannot batch yields other per-sample counts: no pairing
        comparable = reference is not None and parts is not None and len(parts) == len(reference)
        return not comparable or compare(parts, reference).low <= 0

    def acceptable(score: TaskScore) -> bool:
        """What the guard works for once it runs: the figure itself within the budget (a fix that
        only makes the evidence unsure would ship 14.6 points against a 5-point budget)."""
        return passable(score) and score.evidence.figure <= budget

    why = (f"int8 misses the {ctx.profile.name} {check['judged']} budget: {first.evidence.judged(budget)}"
           if check.get("verdict") == "missed" else
           f"int8 is worse than the reference PTQ beyond noise ({ctx.validation['reference_ptq']['line']})")
    ctx.report(f"  {why}; accuracy guard (work: {config.guard_steps} rebuilds at most, --guard-time "
               f"{config.guard_time:g} s outer limit)")
    outcome = run_guard(ctx, method, ctx.quant_path, first, scorer, acceptable)
    section = outcome.to_dict(budget, config.guard_time)
    section["int8_drop"] = round(first.drop, 4)  # the figure that started the guard
    section["basis"] = first.basis
    section["trigger"] = "missed" if check.get("verdict") == "missed" else "worse than reference"
    rows = table(first, outcome, budget)
    chosen = outcome.met or min((a for a in outcome.attempts if passable(a.score)),
                                key=lambda a: a.score.drop, default=None)
    missed = check.get("verdict") == "missed"
    if chosen is None and missed and not config.accept_accuracy_drop:
        raise BudgetError(
            f"int8 misses the {ctx.profile.name} {check['judged']} budget of {budget:g} points "
            f"(metric {scorer.task.name!r}, measured on {FORMAT_NAMES[first.format]}): "
            f"{first.evidence.judged(budget)}; reference PTQ on the same samples: "
            f"{(ctx.validation.get('reference_ptq') or {}).get('line', 'not scored')}; "
            f"{scorer.task.how_to_choose()}. The accuracy guard could not "
            f"meet it{at_fault(outcome)}; no artifact written. Pass --accept-accuracy-drop to ship it anyway, "
            "give labelled validation data (--val with labels) to judge accuracy, or set another budget "
            "(--max-accuracy-drop)", rows)
    shipped_passable = chosen is not None
    if chosen is None:
        best = outcome.best
        chosen = best if best is not None and best.score.drop < first.drop else None
    if chosen is not None:
        section["chosen"] = {"rung": chosen.rung, "nodes": len(chosen.nodes),
                             "verdict": chosen.score.evidence.verdict(budget)}
    candidates = ctx.validation["candidates"]
    if chosen is not None:
        keep_float = shipped_keep_float(ctx, chosen.nodes, chosen.rung)
        metrics, score = scorer.score(chosen.path, keep_float, ctx.ranges.get(method))
        record_choice(ctx, chosen.path, method, metrics, score, scorer.task, candidates)
        ctx.quantization["keep_float"] = keep_float
        ctx.quantization["mixed_precision"] = {"rung": chosen.rung, "nodes": chosen.nodes}
    else:
        record_choice(ctx, ctx.quant_path, method, first_metrics, first, scorer.task, candidates)
    if not shipped_passable and missed:
        section["accepted_drop"] = ctx.validation["accuracy_drop"]
        ctx.validation["accuracy_budget"]["accepted"] = True
        ctx.warn(f"accuracy drop ACCEPTED (--accept-accuracy-drop): {ctx.validation['accuracy_drop']:.2f} "
                 f"points, over the {ctx.profile.name} budget of {budget:g}")
        ctx.report(rows)
    elif not shipped_passable:
        ctx.warn("int8 stays worse than the reference PTQ beyond noise and the guard found no fix: "
                 + ctx.validation["accuracy_budget"]["line"])
    ctx.extra_manifest["accuracy_guard"] = section
    ctx.mark("accuracy_guard", "validation", "quant_path", "quantization", "extra_manifest")

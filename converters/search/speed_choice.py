"""Precision chosen by speed too: is int8 faster than float on the target, for this model?

Small models can lose at int8 (on this x86 host the digits CNN ran 0.56x: Quantize/Dequantize
and layout transposes outweigh tiny convolutions). The evidence is the measurement on this
machine when the target is the host (``host_speed.py``, taken by the validate stage), else the
estimator's figures for the target's cost model (``converters/estimate``) at the profile's
thread count. When int8 is slower the build says so (summary and manifest
``precision_speed``); with ``objective="latency"`` (``--objective latency``) it ships the
faster precision within the accuracy budget: float, whose drop is zero by definition.
"""

from __future__ import annotations

from typing import Any

from edgekit.converters.metrics.task_accuracy import Scorer

from edgekit.errors import UserError

from ..context import BuildContext

OBJECTIVES = ("accuracy", "latency")
# An estimate within 2% either way is no verdict: a model whose work stays float at int8 (a
# recurrent stack: onnxruntime quantizes no LSTM) differs only by its Q/DQ conversions (the
# 3-layer LSTM of tests/converters/test_estimate_uncosted.py: 29.1 vs 29.0 ms on rpi4).
ESTIMATE_MARGIN = 0.02


def evidence(ctx: BuildContext) -> dict[str, Any] | None:
    """int8 and float latency on the target for the whole model, and where they come from."""
    host = ctx.validation.get("host_speed")
    if host:
        return {"source": "measured on this host (onnxruntime, 1 thread)", "int8_ms": host["int8_ms"],
                "float_ms": host["float_ms"], "int8_speedup": host["int8_speedup"]}
    if ctx.profile.cost_model is None:
        return None
    from ..estimate import estimate

    try:
        est = estimate(str(ctx.float_path), ctx.profile, calibrate=False)
    except UserError:  # no host rates, or a graph the estimator cannot read: no claim
        return None
    if not est.judges_latency:  # ops not costed: neither side's latency is known
        ctx.warn(est.cannot_judge("whether int8 is faster than float"))
        return None
    threads = est.threads[-1]
    f, q = est.variants["float32"].latency_s[threads], est.variants["int8"].latency_s[threads]
    return {"source": f"estimated for {ctx.profile.name} ({est.method} cost model, {threads} thread(s))",
            "int8_ms": round(q * 1e3, 4), "float_ms": round(f * 1e3, 4), "int8_speedup": round(f / q, 3)}


def line(section: dict[str, Any]) -> str:
    text = (f"  int8 is SLOWER than float for this model: {section['int8_ms']:.3g} ms vs "
            f"{section['float_ms']:.3g} ms ({section['int8_speedup']:.2f}x, {section['source']})")
    if section["chosen"] == "float":
        return text + "; --objective latency: shipping float (within any accuracy budget)"
    return text + "; --objective latency would ship float instead"


def choose_by_speed(ctx: BuildContext) -> None:
    """After the accuracy guard of a plain build: report a slower int8, and under a latency
    objective ship float instead."""
    from ..stages.validate import record_choice

    objective = ctx.config.objective
    if objective not in OBJECTIVES:
        raise UserError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    found = evidence(ctx)
    slower_below = 1.0 - (ESTIMATE_MARGIN if found and found["source"].startswith("estimated") else 0.0)
    if found is None or found["int8_speedup"] >= slower_below:
        if found is not None:
            ctx.extra_manifest["precision_speed"] = {**found, "objective": objective, "chosen": "int8"}
        return
    section = {**found, "objective": objective, "chosen": "int8"}
    if objective == "latency":
        scorer = Scorer(ctx.config, ctx.float_path, ctx.val, [o["name"] for o in ctx.outputs])
        metrics, score = scorer.score(ctx.float_path)
        record_choice(ctx, ctx.float_path, ctx.validation["method"], metrics, score, scorer.task,
                      ctx.validation["candidates"])
        ctx.quantization["shipped"] = "float"
        section["chosen"] = "float"
    ctx.extra_manifest["precision_speed"] = section
    ctx.report(line(section))
    ctx.mark("precision_speed", "validation", "quant_path", "quantization", "extra_manifest")

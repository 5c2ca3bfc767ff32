"""Estimate: size, work, memory, latency and energy of the built model on the target.

Runs after quantization: the figures describe the int8 model that ships (and the float
model for comparison), and land in the manifest's ``estimate`` section so that a device
and the budget search can read them without re-deriving anything.
"""

from __future__ import annotations

from typing import Any

from edgekit.errors import UserError

from ..context import BuildContext
from ..pipeline import Stage


def summary(est: Any) -> dict[str, Any]:
    """The manifest's ``estimate`` section: one entry per variant, plain numbers."""
    variants = {}
    for precision, v in est.variants.items():
        variants[precision] = {
            "params": v.params,
            "macs": v.macs,
            "element_ops": v.element_ops,
            "weight_bytes": v.weight_bytes,
            "activation_bytes": v.activation_bytes,
            "ram_bytes": v.ram_bytes,
            "kernels": v.kernels,
            "latency_ms": {str(t): round(s * 1e3, 4) for t, s in v.latency_s.items()},
            "power_w": {str(t): round(w, 3) for t, w in v.power_w.items()},
            "energy_mj": {str(t): round(j * 1e3, 4) for t, j in v.energy_j.items()},
        }
    section = {"target": est.target, "cost_model": est.method, "source": est.source,
               "threads": est.threads, "variants": variants, "warnings": est.warnings}
    if est.uncosted:
        section["uncosted"] = est.uncosted
    return section


class Estimate(Stage):
    name = "estimate"
    requires = frozenset({"float_path"})
    provides = frozenset({"extra_manifest"})

    def params(self, ctx: BuildContext) -> dict[str, Any]:
        section = ctx.extra_manifest.get("estimate", {})
        return {"cost_model": section.get("cost_model"), "threads": section.get("threads")}

    def applies(self, ctx: BuildContext) -> bool:
        return ctx.quant_path is not None or ctx.float_path is not None

    def run(self, ctx: BuildContext) -> None:
        from ..estimate import estimate

        source = ctx.quant_path or ctx.float_path
        if ctx.profile.cost_model is None:
            ctx.warn(f"target {ctx.profile.name!r} has no [cost_model]: no latency estimate")
            return
        try:
            # a build never stops for half a minute of host calibration: without a cached
            # one it says how to make it (`edgekit estimate --target host` runs it itself)
            est = estimate(str(source), ctx.profile, calibrate=False)
        except UserError as exc:  # no cost model, or a graph it cannot read: never a failed build
            ctx.warn(f"no estimate: {exc}")
            return
        section = summary(est)
        ctx.extra_manifest["estimate"] = section
        shipped = est.variants["int8"]
        threads = est.threads[-1]
        ctx.report(f"  int8: {shipped.macs / 1e6:.1f} M MACs, RAM (load + run) "
                   f"{shipped.ram_bytes / 2**20:.2f} MB, "  # as `edgekit estimate` and inspect print it
                   f"{shipped.latency_s[threads] * 1e3:.2f} ms at {threads} thread(s), "
                   f"{shipped.energy_j[threads] * 1e3:.2f} mJ/inference on {est.target}")
        for warning in est.warnings:
            ctx.warn(warning)

"""Readable text table of an ``Estimate`` (what ``edgekit estimate`` prints)."""

from __future__ import annotations

from typing import Any


def _count(value: float) -> str:
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.2f} {unit}"
    return f"{value:.0f}"


def _mb(value: float) -> str:
    return f"{value / 2**20:.2f} MB"


def _ms(value: float) -> str:
    return f"{value * 1e3:.3f} ms" if value < 0.01 else f"{value * 1e3:.1f} ms"


def _mj(value: float) -> str:
    return f"{value * 1e3:.3f} mJ" if value < 0.01 else f"{value * 1e3:.1f} mJ"


def format_table(est: Any) -> str:
    variants = [est.variants[p] for p in ("float32", "int8")]
    stored = ", ".join(f"{dtype} {_count(count)} ({_mb(est.stored_bytes_by_dtype.get(dtype, 0))})"
                       for dtype, count in sorted(est.stored_params_by_dtype.items()))
    lines = [
        f"model    {est.model}  (stored as {est.stored})",
        f"target   {est.target}  cost model: {est.method}",
        f"         {est.source}",
        f"stored   {stored or 'no initializers'}",
        "",
    ]
    rows: list[tuple[str, list[str]]] = [
        ("parameters", [_count(v.params) for v in variants]),
        ("MACs (conv+gemm)", [_count(v.macs) for v in variants]),
        ("  conv / depthwise", [f"{_count(v.macs_by_kind['conv'] + v.macs_by_kind['stem'])} / "
                                f"{_count(v.macs_by_kind['depthwise'])}" for v in variants]),
        ("  gemm", [_count(v.macs_by_kind["gemm"]) for v in variants]),
        ("element ops", [_count(v.element_ops) for v in variants]),
        ("kernel calls", [str(v.kernels) for v in variants]),
        ("weight memory", [_mb(v.weight_bytes) for v in variants]),
        ("peak activations", [_mb(v.activation_bytes) for v in variants]),
        ("RAM (load + run)", [_mb(v.ram_bytes) for v in variants]),
    ]
    for t in est.threads:
        label = f"{t} thread{'s' if t > 1 else ''}"
        rows.append((f"latency, {label}", [_ms(v.latency_s[t]) for v in variants]))
    for t in est.threads:
        label = f"{t} thread{'s' if t > 1 else ''}"
        rows.append((f"energy/inf, {label}",
                     [f"{_mj(v.energy_j[t])} @ {v.power_w[t]:.2f} W" for v in variants]))
    width = max(len(r[0]) for r in rows) + 2
    cols = [max(len(r[1][i]) for r in rows + [("", ["float32", "int8"])]) + 2 for i in range(2)]
    lines.append(" " * width + "float32".rjust(cols[0]) + "int8".rjust(cols[1]))
    for label, values in rows:
        lines.append(label.ljust(width) + "".join(v.rjust(c) for v, c in zip(values, cols, strict=True)))
    lines.append("")
    lines.append(f"peak activations at: float32 {variants[0].peak_op or '-'}; "
                 f"int8 {variants[1].peak_op or '-'}")
    for warning in est.warnings:
        lines.append(f"warning: {warning}")
    return "\n".join(lines)

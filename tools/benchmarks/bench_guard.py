"""The default-on accuracy guard on every tools/zoo model: the budget met, or exit 3; never a shipped miss.

Each zoo model is built for rpi4 as a *plain* build: the guard on (``--guard-time``, default
180 s), no ``accept_accuracy_drop`` (unlike ``bench_zoo``'s coverage rows). Calibration and
validation are seeded example inputs of the zoo entry (disjoint seeds), saved as .npz, so the
build treats them as real data and enforces the profile's accuracy budget. Per model it prints:
the task metric and the plain int8 drop against the budget, whether the guard ran, what it
moved (tensors, nodes, rung of every attempt), the final drop, the outcome (met / exit 3) and
the guard's time against its bound. A row "SHIPPED MISS" (exit 0, budget missed, not accepted)
would be a bug; the last line counts them.

What the figures mean: every zoo model but mtcnn_pnet has seeded *random* weights, so the float
model's decisions are arbitrary (no task accuracy is claimed). The metric still means what it
says: agreement of the int8 model with the float model on the same inputs (top-1 agreement,
or (1 - cosine) x 100 / SQNR for non-classifiers), which is what quantization can lose.

    python tools/benchmarks/bench_guard.py                            # every zoo model
    python tools/benchmarks/bench_guard.py --models plain_cnn,resnet18 --val 64
    python tools/benchmarks/bench_guard.py --models mobilenetv2_like --outlier 300   # a real int8 miss

``--outlier S`` (mobilenetv2_like only) scales one channel of the last bottleneck's linear
output by S and the next 1x1 conv's input weights by 1/S: the float function is the same, but one
per-tensor int8 scale must now span an S-times wider range, so int8 genuinely loses; this is
the MobileNet-size miss the guard's time bound is measured on (README, Accuracy you can trust).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tools")]  # tools.* packages, and the zoo as ``zoo``
import zoo  # noqa: E402


@dataclass
class Row:
    name: str
    weights: str
    metric: str = "-"
    int8_drop: float | None = None
    budget: float | None = None
    guard: str = "no"          # "no" (int8 met it) | "yes"
    moved: list[str] = field(default_factory=list)  # per attempt: "k tensors/n nodes rung drop"
    final_drop: float | None = None
    outcome: str = "-"         # "met" | "exit 3" | "SHIPPED MISS" | an error type
    guard_s: float | None = None
    bound_s: float = 0.0
    build_s: float = 0.0
    note: str = ""


def with_outlier(module: Any, scale: float) -> Any:
    """mobilenetv2_like with channel 0 of the last bottleneck's output ``scale`` times larger and
    the following 1x1 conv's weights for it ``scale`` times smaller: same float function."""
    import torch

    bn = module.features[-2].conv[-1][-1]  # the last inverted residual's projection: conv, BN
    head = module.features[-1][0]     # the 1x1 conv (320 -> 1280) reading that output
    if not isinstance(bn, torch.nn.BatchNorm2d) or not isinstance(head, torch.nn.Conv2d):
        raise TypeError("--outlier expects mobilenetv2_like's layout (features[-2].conv[-1][-1] "
                        f"BatchNorm2d, features[-1][0] Conv2d); got {type(bn).__name__}, "
                        f"{type(head).__name__}")
    with torch.no_grad():
        bn.weight[0] *= scale
        bn.bias[0] *= scale
        head.weight[:, 0] /= scale
    return module


ROW = re.compile(r"^\s+(?P<build>\S.*?)\s+(?P<drop>-?[\d.]+)\s+(met|MISSED)$")
GUARD_SECONDS = re.compile(r"(?:after (\d+) s;|, (\d+) s\)$)")
MISS_LINE = re.compile(r"accuracy budget: \S+ > (?P<budget>\S+) points \((?P<basis>.*?)\)")


def parse_table(table: str) -> tuple[float | None, list[str], float | None]:
    """From the exit-3 table: the plain int8 drop, one line per guard attempt, the guard's seconds."""
    rows = [m for m in map(ROW.match, table.splitlines()) if m]
    seconds = next((float(m.group(1) or m.group(2)) for m in map(GUARD_SECONDS.search, table.splitlines())
                    if m), None)
    moved = [f"{m['build']} -> {float(m['drop']):.2f}" for m in rows[1:]]
    return (float(rows[0]["drop"]) if rows else None), moved, seconds


def bench_one(name: str, work: Path, args: argparse.Namespace) -> Row:
    from edgekit.converters import build

    from edgekit.errors import BudgetError

    entry = zoo.entry(name)
    row = Row(name, "real" if entry.trained else "random", bound_s=args.guard_time)
    module = entry.factory()
    if args.outlier:
        module = with_outlier(module, args.outlier)
        row.note = f"outlier channel x{args.outlier:g}"
    onnx_path = entry.write_onnx(work / f"{name}.onnx", module)
    calib, val = work / f"{name}.calib.npz", work / f"{name}.val.npz"
    np.savez(calib, **entry.calib_data(args.calib, seed=100))
    np.savez(val, **entry.calib_data(args.val, seed=10_000))
    source = module if entry.build_from == "torch" else str(onnx_path)
    example = entry.example_inputs() if entry.build_from == "torch" else None
    lines: list[str] = []
    options: dict[str, Any] = {"metric": args.metric} if args.metric else {}
    if entry.build_from == "torch":
        options["random_weights"] = True  # the zoo's seeded init is the model, on purpose
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = build(source, example, target=args.target, calib=str(calib), val=str(val),
                           output=work / f"{name}.edgekit", report=lines.append, seed=0,
                           guard_time=args.guard_time, **entry.build_options(), **options)
    except BudgetError as exc:
        row.build_s = time.perf_counter() - start
        row.outcome, row.guard = "exit 3", "yes"
        row.int8_drop, row.moved, row.guard_s = parse_table(exc.table)
        miss = next((m for m in map(MISS_LINE.search, lines) if m), None)
        if miss:
            row.budget, row.metric = float(miss["budget"]), miss["basis"]
        return row
    except Exception as exc:  # noqa: BLE001 - the table reports every failure, by type
        row.build_s = time.perf_counter() - start
        row.outcome = type(exc).__name__
        row.note = (str(exc).strip().splitlines() or [""])[0][:140]
        return row
    row.build_s = time.perf_counter() - start
    v = result.manifest["validation"]
    budget = v.get("accuracy_budget", {})
    row.metric, row.budget, row.final_drop = v["metric"]["name"], budget.get("limit"), v["accuracy_drop"]
    guard = result.manifest.get("accuracy_guard")
    if guard:
        row.guard, row.int8_drop, row.guard_s = "yes", guard.get("int8_drop"), result.timings.get("accuracy_guard")
        row.moved = [f"{len(a['float_tensors'])} tensor(s)/{len(a['nodes'])} node(s) {a['rung']} "
                     f"-> {a['drop']:.2f}" for a in guard["attempts"]]
    else:
        row.int8_drop = v["accuracy_drop"]
    if not budget.get("checked"):
        row.outcome = "unchecked"
    elif budget.get("met"):
        row.outcome = "met"
    else:
        row.outcome = "accepted" if budget.get("accepted") else "SHIPPED MISS"
    return row


def export(name: str, folder: Path, args: argparse.Namespace) -> None:
    """Write the model and its data for a CLI build (``--export``): progress bar on a TTY."""
    entry = zoo.entry(name)
    module = with_outlier(entry.factory(), args.outlier) if args.outlier else entry.factory()
    folder.mkdir(parents=True, exist_ok=True)
    onnx_path = entry.write_onnx(folder / f"{name}.onnx", module)
    np.savez(folder / "calib.npz", **entry.calib_data(args.calib, seed=100))
    np.savez(folder / "val.npz", **entry.calib_data(args.val, seed=10_000))
    print(f"edgekit build {onnx_path} --target {args.target} --calib {folder / 'calib.npz'} "
          f"--val {folder / 'val.npz'} -o {folder / (name + '.edgekit')}")


def fmt(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def print_table(rows: list[Row], load: tuple[float, float, float]) -> None:
    print(f"\nrpi4, plain builds (guard on), load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'model':<18}{'weights':<8}{'metric':<16}{'int8 drop':>10}{'budget':>8}{'guard':>7}"
          f"{'final drop':>12}  {'outcome':<13}{'guard s':>8}{'bound':>7}{'build s':>9}")
    for r in rows:
        print(f"{r.name:<18}{r.weights:<8}{r.metric[:15]:<16}{fmt(r.int8_drop):>10}{fmt(r.budget, 'g'):>8}"
              f"{r.guard:>7}{fmt(r.final_drop):>12}  {r.outcome:<13}{fmt(r.guard_s, '.0f'):>8}"
              f"{r.bound_s:>7.0f}{r.build_s:>9.0f}")
    for r in rows:
        for attempt in r.moved:
            print(f"  {r.name}: guard moved {attempt}")
        if r.note:
            print(f"  {r.name}: {r.note}")
    shipped = [r.name for r in rows if r.outcome == "SHIPPED MISS"]
    print(f"shipped misses: {len(shipped)}{' ' + ', '.join(shipped) if shipped else ''}; "
          f"over the time bound: {sum(1 for r in rows if (r.guard_s or 0) > r.bound_s)}")
    print("weights 'random': seeded random init; the metric is agreement with the float model, "
          "not task accuracy")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated zoo names (default: all)")
    parser.add_argument("--target", default="rpi4")
    parser.add_argument("--guard-time", type=float, default=180.0, help="the build's --guard-time")
    parser.add_argument("--calib", type=int, default=32, help="calibration samples per model")
    parser.add_argument("--val", type=int, default=48, help="validation samples per model")
    parser.add_argument("--metric", help="the build's --metric (default: chosen from the outputs)")
    parser.add_argument("--outlier", type=float, default=0.0,
                        help="mobilenetv2_like only: an outlier channel this many times larger")
    parser.add_argument("--export", type=Path, metavar="DIR",
                        help="write the model(s) and their .npz data to DIR and print the build "
                             "command instead of building (a CLI build shows the progress bar)")
    args = parser.parse_args(argv)
    names = [n for n in args.models.split(",") if n] or list(zoo.ENTRIES)
    for n in names:
        zoo.entry(n)  # unknown names fail before any work
    if args.outlier and names != ["mobilenetv2_like"]:
        parser.error("--outlier applies to --models mobilenetv2_like only")
    if args.export:
        for name in names:
            export(name, args.export, args)
        return 0
    logging.getLogger().setLevel(logging.ERROR)  # onnxruntime quantization's advice per model
    rows = []
    for name in names:
        with tempfile.TemporaryDirectory(prefix="bench-guard-") as tmp:
            try:
                row = bench_one(name, Path(tmp), args)
            except Exception as exc:  # noqa: BLE001 - export trouble: report, go on
                row = Row(name, "-", outcome="bench failed", note=f"{type(exc).__name__}: {exc}"[:160])
        rows.append(row)
        print(f"[{name}: {row.outcome}, int8 {fmt(row.int8_drop)} -> {fmt(row.final_drop)}, "
              f"guard {fmt(row.guard_s, '.0f')} s, build {row.build_s:.0f} s]"
              + "".join(f"\n  moved {m}" for m in row.moved), file=sys.stderr, flush=True)
    print_table(rows, os.getloadavg())
    return 1 if any(r.outcome == "SHIPPED MISS" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

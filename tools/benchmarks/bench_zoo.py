"""Build every zoo model for the default target and tabulate what shipped (issue 13 "Must show").

    python tools/benchmarks/bench_zoo.py [--models NAME,NAME] [--quick] [--target rpi4] [--guarded]

Per model: export it (tools/zoo, the entry's exporter and dynamic axes; models marked
``build_from="torch"`` are handed to the build as nn.Modules), write calibration data laid out
as the entry says, run ``edgekit.converters.build`` with the target's defaults and the entry's
``build_options()`` (its ``--batch-axis`` and ``--const`` values), then read the artifact.

Coverage and accuracy are measured apart. A random-weight model says nothing about accuracy,
and the accuracy guard would keep its most "sensitive" layers float, hiding what the writer
covers; so by default random-weight models are built as coverage runs: no guard
(``guard_time=0``) and ``accept_accuracy_drop=True``, the plain int8 model as written. Trained
models (PNet) keep the guard. ``--guarded`` builds every model with the guard. Columns:
  run       "coverage" (random weights, guard off: coverage and speed only) or "guarded"
  built     yes, or the error type (an "InternalError" is a crash the build must never have)
  format    the model format the artifact ships (tflite, or onnx after a fallback)
  float     ops left in float inside the int8 .tflite (op types), "-" when none shipped; a
            packed output's Concat kept float on purpose (converters/ptq/split_packed.py: boxes in
            pixels beside 0..1 scores must not share one int8 scale) only joins DEQUANTIZEd
            int8 branches: a float data move, not float compute, shown apart as "+N move"
  parity    LiteRT vs onnxruntime int8 on held-out samples: share of output elements within
            one quantization step (worst int8 output), from the build's own check; outputs
            the .tflite gives in float (after a float op) have no step and are skipped
  i8/f32 Nt int8 (shipped model, edgekit's backend) over fp32 (float ONNX, onnxruntime)
            median batch-1 latency at N threads, runs interleaved; below 1.0 = int8 faster
  build s   wall time of the build call
Random-weight models measure coverage and speed only, not accuracy. The summary line counts
strictly: "N/15 no float ops" leaves out only recurrent cells (LSTM/GRU, no integer LiteRT
kernel), and names each one it excepts; a kept-float packed Concat counts against the row and
is named apart. Fallback reasons and errors are listed under the table, one line each.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tools")]  # tools.* packages, and the zoo as ``zoo``
import zoo  # noqa: E402

RECURRENT = {"LSTM", "GRU", "RNN"}


@dataclass
class Row:
    name: str
    run: str = "coverage"
    built: str = "no"
    shipped: str = "-"
    float_ops: str = "-"
    float_kinds: dict[str, int] = field(default_factory=dict)  # op type -> count left float
    moves: dict[str, int] = field(default_factory=dict)  # packed-output Concats kept float
    parity: float | None = None
    ratios: dict[int, float] = field(default_factory=dict)
    build_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def backend_for(artifact_path: Path, threads: int):
    """The shipped int8 model on edgekit's own backend (LiteRT or onnxruntime)."""
    from edgekit.artifact.archive import read_artifact
    from edgekit.backends import BackendOptions, TensorSpec

    artifact = read_artifact(artifact_path)
    manifest = artifact.manifest
    entry = manifest["models"][0]
    ins = [TensorSpec.from_manifest(i) for i in manifest["inputs"]]
    outs = [TensorSpec.from_manifest(o) for o in manifest["outputs"]]
    opts = BackendOptions(threads=threads)
    blob = artifact.read(entry["path"])
    if entry["format"] == "tflite":
        from edgekit.backends.litert import LiteRTBackend

        return LiteRTBackend(blob, ins, outs, opts, entry=entry)
    from edgekit.backends.onnxruntime import OnnxRuntimeBackend

    return OnnxRuntimeBackend(blob, ins, outs, opts)


def fp32_session(path: Path, threads: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return sess


def int8_parity(manifest: dict) -> float | None:
    """The build's LiteRT-vs-onnxruntime share within one step, worst over the outputs the
    .tflite gives in int8; a float output (no ``outputs_quantization`` scale) is skipped."""
    check = manifest.get("validation", {}).get("tflite", {})
    scaled = manifest["models"][0].get("outputs_quantization", {})
    steps = [v["within_1_step"] for name, v in check.items()
             if isinstance(v, dict) and (scaled.get(name) or {}).get("scale")]
    return min(steps) if steps else None


def interleaved_ratio(int8, fp32, feeds: dict[str, np.ndarray],
                      feeds32: dict[str, np.ndarray], rounds: int) -> float:
    """Median int8 latency over median fp32 latency, runs alternating (``feeds32``: the
    same inputs as the float ONNX file names them, frozen ``--const`` inputs included)."""
    for _ in range(2):  # warm-up: weight packing, kernel plans
        int8.run(feeds)
        fp32.run(None, feeds32)
    t8, t32 = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        int8.run(feeds)
        t8.append(time.perf_counter() - start)
        start = time.perf_counter()
        fp32.run(None, feeds32)
        t32.append(time.perf_counter() - start)
    return statistics.median(t8) / statistics.median(t32)


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:160]


def bench_one(name: str, work: Path, args: argparse.Namespace) -> Row:
    from edgekit.converters import build

    entry = zoo.entry(name)
    row = Row(name, run="guarded" if args.guarded or entry.trained else "coverage")
    coverage = {"accept_accuracy_drop": True, "guard_time": 0.0} if row.run == "coverage" else {}
    module = entry.factory()
    onnx_path = work / f"{name}.onnx"
    entry.write_onnx(onnx_path, module)
    npz = work / f"{name}.calib.npz"
    np.savez(npz, **entry.calib_data(args.samples, seed=100))
    source = module if entry.build_from == "torch" else str(onnx_path)
    example = entry.example_inputs() if entry.build_from == "torch" else None
    out = work / f"{name}.edgekit"
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = build(source, example, target=args.target, calib=str(npz), output=out,
                           quiet=True, calib_samples=args.samples * 3 // 4, seed=0,
                           **entry.build_options(), **coverage)
    except Exception as exc:  # noqa: BLE001 - the table reports every failure, by type
        row.build_s = time.perf_counter() - start
        row.built = type(exc).__name__
        row.notes.append(f"build: {type(exc).__name__}: {first_line(exc)}")
        return row
    row.build_s = time.perf_counter() - start
    row.built = "yes"
    manifest = result.manifest
    shipped = manifest["models"][0]
    row.shipped = shipped["format"]
    if shipped["format"] == "tflite":
        packed = {p["concat_kept_float"] for p in
                  manifest.get("quantization", {}).get("packed_outputs") or []
                  if p.get("concat_kept_float")}
        floats = shipped.get("float_ops", [])
        ops = [o["op_type"] for o in floats if o["name"] not in packed]
        moves = [o["op_type"] for o in floats if o["name"] in packed]
        row.float_kinds = {k: ops.count(k) for k in sorted(set(ops))}
        row.moves = {k: moves.count(k) for k in sorted(set(moves))}
        row.float_ops = f"{len(ops)}" + (f" {','.join(row.float_kinds)}" if ops else "") + \
            (f" +{len(moves)} move" if moves else "")
        row.parity = int8_parity(manifest)
    row.notes += [w for w in result.warnings if "no .tflite" in w or "float" in w][:2]
    feeds32 = {n: x.numpy() for n, x in zip(entry.input_names, entry.example_inputs(seed=1),
                                             strict=True)}
    # the artifact's inputs: frozen ones gone; a torch source's export may name them anew
    live = [n for n in entry.input_names if n not in entry.consts]
    feeds = {spec["name"]: feeds32[n] for spec, n in zip(manifest["inputs"], live, strict=True)}
    for threads in (1, 2):
        try:
            row.ratios[threads] = interleaved_ratio(backend_for(out, threads),
                                                    fp32_session(onnx_path, threads), feeds,
                                                    feeds32, args.rounds)
        except Exception as exc:  # noqa: BLE001 - a runtime failure is a finding, not a stop
            row.notes.append(f"run {threads}t: {type(exc).__name__}: {first_line(exc)}")
            break
    return row


def print_table(rows: list[Row]) -> None:
    head = (f"{'model':<18}{'run':<10}{'built':<15}{'format':<8}{'float ops':<24}{'parity':>8}"
            f"{'i8/f32 1t':>11}{'i8/f32 2t':>11}{'build s':>9}")
    print(head)
    print("-" * len(head))
    for r in rows:
        parity = f"{r.parity:.1%}" if r.parity is not None else "-"
        ratios = "".join(f"{r.ratios[t]:>11.2f}" if t in r.ratios else f"{'-':>11}"
                         for t in (1, 2))
        print(f"{r.name:<18}{r.run:<10}{r.built:<15}{r.shipped:<8}{r.float_ops[:23]:<24}{parity:>8}"
              f"{ratios}{r.build_s:>9.1f}")
    print("\n" + summary(rows))
    coverage = [r.name for r in rows if r.run == "coverage"]
    if coverage:
        print(f"coverage-only rows (random weights, guard off, int8 as written; no accuracy "
              f"claim): {', '.join(coverage)}")
    for r in rows:
        if r.float_kinds:
            print(f"  {r.name}: float ops left: "
                  + ", ".join(f"{k} x{c}" for k, c in r.float_kinds.items()))
        if r.moves:
            print(f"  {r.name}: float data moves (packed output kept float on purpose): "
                  + ", ".join(f"{k} x{c}" for k, c in r.moves.items()))
    for r in rows:
        for note in r.notes:
            print(f"  {r.name}: {note[:220]}")


def summary(rows: list[Row]) -> str:
    """The issue-13 count, strict: a row counts only when its .tflite has no float op but
    recurrent cells (named in the line); a packed output's float Concat counts against it
    and is named too."""
    n = len(rows)
    tflite = [r for r in rows if r.shipped == "tflite"]
    strict = [r for r in tflite if not set(r.float_kinds) - RECURRENT and not r.moves]
    excepted = [f"{r.name} {k} x{c}" for r in tflite for k, c in r.float_kinds.items()
                if k in RECURRENT]
    none_at_all = [r for r in strict if not r.float_kinds]
    moved = [f"{r.name} {k} x{c}" for r in tflite for k, c in r.moves.items()]
    crashed = sum(r.built == "InternalError" for r in rows)
    line = (f"{len(strict)}/{n} no float ops (recurrent cells excepted: "
            f"{', '.join(excepted) or 'none'}); {len(none_at_all)}/{n} with no float op at all")
    if moved:
        lenient = sum(not set(r.float_kinds) - RECURRENT for r in tflite)
        line += (f"; {lenient}/{n} if packed-output "
                 f"Concats kept float on purpose count as data moves ({', '.join(moved)})")
    return (line + f"; {len(tflite)}/{n} ship an int8 .tflite; "
            f"{sum(r.built == 'yes' for r in rows)}/{n} built; {crashed} internal error(s)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated zoo names (default: all)")
    parser.add_argument("--quick", action="store_true",
                        help="16 calibration samples and 5 latency rounds per model")
    parser.add_argument("--target", default="rpi4")
    parser.add_argument("--guarded", action="store_true",
                        help="build random-weight models with the accuracy guard too")
    args = parser.parse_args(argv)
    names = [n for n in args.models.split(",") if n] or list(zoo.ENTRIES)
    for n in names:
        zoo.entry(n)  # unknown names fail before any work
    args.samples, args.rounds = (16, 5) if args.quick else (64, 20)
    import logging

    logging.getLogger().setLevel(logging.ERROR)  # onnxruntime quantization's advice per model
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-zoo-") as tmp:
        for name in names:
            start = time.perf_counter()
            try:
                row = bench_one(name, Path(tmp), args)
            except Exception as exc:  # noqa: BLE001 - export trouble: report, go on
                row = Row(name, built="export failed",
                          notes=[f"{type(exc).__name__}: {first_line(exc)}"])
            rows.append(row)
            print(f"[{name}: {row.built}, {row.shipped}, {time.perf_counter() - start:.0f} s]",
                  file=sys.stderr, flush=True)
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Cross-ISA study: how far the emulated Arm CPUs' int8 outputs are from this host's (issue 16).

    python tools/study_cross_isa.py [--models NAME,NAME] [--quick] [--targets rpi4,rpi-zero2w,rpi5]

For the example digits CNN (real held-out digits) and every zoo model that builds (its seeded
calibration data; held-out inputs drawn with other seeds), in both formats (.tflite on LiteRT,
QDQ .onnx on onnxruntime): build for rpi4 (minmax, small calibration), run the same inputs
on this host and under QEMU on each target's CPU (Cortex-A72 rpi4, A53 rpi-zero2w, A76 rpi5),
and report per model, format and CPU:
  depth     compute layers in the float model (Conv, ConvTranspose, Gemm, MatMul, LSTM, GRU)
  =0 <=1 <=2  share of output elements whose host/emulated difference is under half a step,
            within 1 and within 2 quantization steps of that output (worst output)
  max       the largest difference, in steps
  host dB / emu dB  SQNR of the host's and the emulated int8 outputs against the float model
With --verify, each artifact's own test vectors then go through ``edgekit emulate`` on every
target with the manifest's measured tolerance ("verify": PASS expected), and again with one
weight flipped (tools/perturb_weight.py; "flipped": FAIL expected: the check keeps its teeth).
The host's ONNX runs unfused where its int8 kernels saturate (edgekit/cpu.py), as verify does.
Rows for models that did not build or run say why. Set EDGEKIT_SYSROOT_CACHE to reuse a sysroot.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import zoo  # noqa: E402

DIGITS = "digits_cnn"
COMPUTE_OPS = {"Conv", "ConvTranspose", "Gemm", "MatMul", "LSTM", "GRU"}
CPUS = {"rpi4": "A72", "rpi-zero2w": "A53", "rpi5": "A76"}


@dataclass
class Row:
    model: str
    depth: int = 0
    fmt: str = "-"
    cpu: str = "-"
    dist: dict[str, float] = field(default_factory=dict)  # worst output's distribution
    host_db: float | None = None
    emu_db: float | None = None
    note: str = ""
    verify: str = ""  # with --verify: emulated verification of the artifact / a flipped weight


def depth_of(onnx_path: Path) -> int:
    import onnx

    return sum(n.op_type in COMPUTE_OPS for n in onnx.load(str(onnx_path)).graph.node)


def sqnr_db(reference: np.ndarray, candidate: np.ndarray) -> float:
    from edgekit.converters.metrics.sqnr import sqnr_db as sqnr

    return sqnr(reference, candidate)


def prepare_model(name: str, work: Path, samples: int, evals: int
                  ) -> tuple[object, Path, str, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(build source, float ONNX, calibration npz, held-out inputs, float outputs by name)."""
    import onnxruntime as ort

    if name == DIGITS:
        onnx_path, npz_path = zoo.digits_paths()
        with np.load(npz_path) as data:
            x = data["x"]
        calib = work / "digits.calib.npz"
        np.savez(calib, x=x[:-evals * 4])
        inputs = {"image": x[-evals:].astype(np.float32)}
        source: object = str(onnx_path)
    else:
        entry = zoo.entry(name)
        module = entry.factory()
        onnx_path = entry.write_onnx(work / f"{name}.onnx", module)
        calib = work / f"{name}.calib.npz"
        np.savez(calib, **entry.calib_data(samples, seed=100))
        inputs = entry.calib_data(evals, seed=900)
        source = module if entry.build_from == "torch" else str(onnx_path)
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    rows = [sess.run(None, {k: v[i:i + 1] if v.ndim and len(v) == evals else v
                            for k, v in inputs.items()}) for i in range(evals)]
    floats = {n: np.concatenate([r[j] for r in rows]) for j, n in enumerate(names)}
    return source, Path(onnx_path), str(calib), inputs, floats


def host_outputs(path: Path, inputs: dict[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    """The same loop as the guest's ``outputs`` command, on this host's runtimes."""
    from edgekit.artifact import read_artifact
    from edgekit.backends import backends_for
    from edgekit.model import Model

    artifact = read_artifact(path)
    count = len(next(iter(inputs.values())))
    found: dict[str, dict[str, np.ndarray]] = {}
    for entry in artifact.manifest["models"]:
        usable = [c for c in backends_for(entry["format"]) if c.available()]
        model = Model(artifact, backend=usable[0].name)
        rows = [model.run_feeds(model.prepare_feeds({k: v[i:i + 1] for k, v in inputs.items()}))
                for i in range(count)]
        model.close()
        found[entry["format"]] = {o["name"]: np.concatenate([r[j] for r in rows])
                                  for j, o in enumerate(artifact.manifest["outputs"])}
    return found


def output_steps(path: Path) -> dict[str, dict[str, float]]:
    """Quantization step of each output, per format (a model's own output grid first)."""
    from edgekit.artifact import read_artifact

    manifest = read_artifact(path).manifest
    steps: dict[str, dict[str, float]] = {}
    for entry in manifest["models"]:
        own = entry.get("outputs_quantization", {})
        steps[entry["format"]] = {
            o["name"]: float((own.get(o["name"]) or o.get("quantization") or {}).get("scale")
                             or 0.0) for o in manifest["outputs"]}
    return steps


def study_model(name: str, work: Path, args: argparse.Namespace) -> list[Row]:
    from edgekit.converters import build
    from edgekit.converters.emulation import emulated_outputs
    from edgekit.targets import load_profile

    from edgekit.verify import step_distribution

    source, onnx_path, calib, inputs, floats = prepare_model(name, work, args.samples, args.evals)
    depth = depth_of(onnx_path)
    example = None if isinstance(source, str) else zoo.entry(name).example_inputs()
    out = work / f"{name}.edgekit"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            build(source, example, target="rpi4", calib=calib, output=out, quiet=True,
                  method="minmax", calib_samples=max(4, args.samples * 3 // 4), test_vectors=2,
                  seed=0, formats=["tflite", "onnx"])
    except Exception as exc:  # noqa: BLE001 - the table reports every failure
        return [Row(name, depth, note=f"build: {type(exc).__name__}: {str(exc)[:120]}")]
    host = host_outputs(out, inputs)
    steps = output_steps(out)
    rows = []
    checks = verify_checks(out, work, args.targets) if args.verify else {}
    for target in args.targets:
        try:
            emu, _ = emulated_outputs(out, load_profile(target), inputs, timeout=3600)
        except Exception as exc:  # noqa: BLE001
            rows.append(Row(name, depth, cpu=CPUS[target],
                            note=f"emulate: {type(exc).__name__}: {str(exc)[:120]}"))
            continue
        for fmt, outs in host.items():
            row = Row(name, depth, fmt, CPUS[target])
            if fmt not in emu:
                row.note = "format did not run under emulation"
                rows.append(row)
                continue
            worst: dict[str, float] = {}
            host_db, emu_db = [], []
            for oname, value in outs.items():
                step = steps[fmt][oname]
                if step <= 0:
                    row.note = f"{oname} is float: no step"
                    continue
                dist = step_distribution(emu[fmt][oname], value, step)
                if not worst or dist["within_1"] < worst["within_1"] or dist["max"] > worst["max"]:
                    worst = dist
                if oname in floats and floats[oname].shape == value.shape:
                    host_db.append(sqnr_db(floats[oname], value))
                    emu_db.append(sqnr_db(floats[oname], emu[fmt][oname]))
            row.dist = worst
            row.verify = checks.get((target, fmt), "")
            row.host_db = min(host_db) if host_db else None
            row.emu_db = min(emu_db) if emu_db else None
            rows.append(row)
    return rows


def verify_checks(artifact: Path, work: Path, targets: list[str]) -> dict[tuple[str, str], str]:
    """(target, format) -> "PASS/FAIL" of the artifact and of one with a flipped weight."""
    from edgekit.converters.emulation import emulate
    from edgekit.targets import load_profile
    from perturb_weight import perturb_artifact

    flipped = work / f"{artifact.stem}.flipped.edgekit"
    perturb_artifact(artifact, flipped)
    found: dict[tuple[str, str], str] = {}
    for target in targets:
        runs = [emulate(path, load_profile(target), runs=0) for path in (artifact, flipped)]
        reports = [{f["format"]: f for f in (r.guest.get("report") or {}).get("formats", [])}
                   for r in runs]
        for fmt in reports[0]:
            ok, bad = reports[0][fmt], reports[1].get(fmt, {})
            found[(target, fmt)] = (f"{'PASS' if ok.get('passed') else 'FAIL'}/"
                                    f"{'FAIL' if not bad.get('passed', True) else 'PASS'}")
    return found


def print_table(rows: list[Row]) -> None:
    head = (f"{'model':<18}{'depth':>6}  {'format':<7}{'cpu':<5}{'=0':>8}{'<=1':>8}{'<=2':>8}"
            f"{'max':>7}{'host dB':>9}{'emu dB':>8}{'verify/flipped':>16}")
    print(head)
    print("-" * len(head))
    for r in sorted(rows, key=lambda r: (r.depth, r.model, r.fmt, r.cpu)):
        if not r.dist:
            print(f"{r.model:<18}{r.depth:>6}  {r.fmt:<7}{r.cpu:<5}  {r.note}")
            continue
        d = r.dist
        db = "".join(f"{v:>9.1f}" if v is not None else f"{'-':>9}" for v in (r.host_db, r.emu_db))
        print(f"{r.model:<18}{r.depth:>6}  {r.fmt:<7}{r.cpu:<5}{d['within_0']:>8.2%}"
              f"{d['within_1']:>8.2%}{d['within_2']:>8.2%}{d['max']:>7.1f}{db}"
              f"{r.verify or '-':>16}")
    measured = [r for r in rows if r.dist]
    if measured:
        print(f"\n{len(measured)} model x format x CPU rows; worst within 1 step "
              f"{min(r.dist['within_1'] for r in measured):.2%}, worst max "
              f"{max(r.dist['max'] for r in measured):.1f} steps")
        for fmt in sorted({r.fmt for r in measured}):
            for cpu in sorted({r.cpu for r in measured}):
                sel = [r for r in measured if r.fmt == fmt and r.cpu == cpu]
                if sel:
                    print(f"  {fmt:<7}{cpu:<5} rows {len(sel):>2}: within 1 step >= "
                          f"{min(r.dist['within_1'] for r in sel):.2%}, max "
                          f"{max(r.dist['max'] for r in sel):.1f} steps")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help=f"comma-separated ({DIGITS} and zoo names)")
    parser.add_argument("--quick", action="store_true", help="8 calibration, 4 held-out inputs")
    parser.add_argument("--targets", default="rpi4,rpi-zero2w",
                        help=f"comma-separated emulated targets among {', '.join(CPUS)}")
    parser.add_argument("--verify", action="store_true",
                        help="also emulate each artifact's test vectors, and with a flipped weight")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    names = [n for n in args.models.split(",") if n] or [DIGITS, *zoo.ENTRIES]
    for n in names:
        if n != DIGITS:
            zoo.entry(n)
    args.targets = [t for t in args.targets.split(",") if t]
    for t in args.targets:
        if t not in CPUS:
            parser.error(f"--targets: expected names among {sorted(CPUS)}, got {t!r}")
    args.samples, args.evals = (8, 4) if args.quick else (32, 16)
    logging.getLogger().setLevel(logging.ERROR)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="study-cross-isa-") as tmp:
        for name in names:
            start = time.perf_counter()
            try:
                got = study_model(name, Path(tmp), args)
            except Exception as exc:  # noqa: BLE001 - export trouble: report, go on
                got = [Row(name, note=f"{type(exc).__name__}: {str(exc)[:140]}")]
            rows += got
            print(f"[{name}: {len(got)} rows, {time.perf_counter() - start:.0f} s]",
                  file=sys.stderr, flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps([r.__dict__ for r in rows], indent=1))
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

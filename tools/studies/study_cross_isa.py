"""Cross-ISA study: how far the emulated Arm CPUs' int8 outputs are from this host's (issue 16).

    python tools/studies/study_cross_isa.py [--models NAME,NAME] [--quick] [--targets rpi4,rpi-zero2w,rpi5]
    python tools/studies/study_cross_isa.py --artifacts A.edgekit,B.edgekit --targets rpi4,rpi-zero2w,rpi5

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
With --verify, each artifact's own test vectors then go through ``edgekit emulate``'s check on
every target with the manifest's measured tolerance ("verify": PASS expected), and again with
one weight flipped (tools/studies/perturb_weight.py; "flipped": FAIL expected: the check keeps its
teeth); so does the committed example artifact (--committed), as it is.
Cost: every model is built once per build target (rpi4 serves the A72 and the A53, whose
profiles have the same runtime section; rpi5 has its own build, for its fp16 rung), then ONE
emulated interpreter per target runs all the outputs and verifications
(``converters.emulation.emulate_batch``): QEMU start-up and runtime imports are paid 3 times,
not 3 per artifact.
The host's ONNX runs unfused where its int8 kernels saturate (edgekit/device/cpu.py), as verify does.
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
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tools")]  # tools.* packages, and the zoo as ``zoo``
import zoo  # noqa: E402

from tools.studies.cross_isa_table import Row, print_table  # noqa: E402

DIGITS = "digits_cnn"
COMPUTE_OPS = {"Conv", "ConvTranspose", "Gemm", "MatMul", "LSTM", "GRU"}
CPUS = {"rpi4": "A72", "rpi-zero2w": "A53", "rpi5": "A76"}
EXAMPLE_ARTIFACT = REPO / "examples/raspberrypi/digits.rpi4.edgekit"


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
    rows = [sess.run(None, sample(name, inputs, i)) for i in range(evals)]
    floats = {n: np.concatenate([r[j] for r in rows]) for j, n in enumerate(names)}
    if name != DIGITS and not batch_first(name):  # the outputs loops slice axis 0
        inputs = {}
    return source, Path(onnx_path), str(calib), inputs, floats


def batch_first(name: str) -> bool:
    """Every input's samples on axis 0 (frozen scalars aside): what the host's and the
    guest's outputs loops slice; a model such as silero_like_vad (state [2, N, 128]) is only
    verified on its own test vectors."""
    entry = zoo.entry(name)
    return all(entry.batch_axis(n) == 0 for n in entry.input_names if n not in entry.consts)


def sample(name: str, inputs: dict[str, np.ndarray], i: int) -> dict[str, np.ndarray]:
    """The ``i``-th sample of stacked inputs, along each input's batch axis."""
    if name == DIGITS:
        return {k: v[i:i + 1] for k, v in inputs.items()}
    entry = zoo.entry(name)
    found = {}
    for k, v in inputs.items():
        axis = entry.batch_axis(k)
        found[k] = np.asarray(v[i]) if axis is None else np.take(v, [i], axis=axis)
    return found


def artifact_inputs(name: str, path: Path, inputs: dict[str, np.ndarray]
                    ) -> dict[str, np.ndarray]:
    """``inputs`` under the artifact's own input names (a build from the nn.Module names them
    after ``forward``'s arguments), in order, frozen scalars (``--const``) left out."""
    from edgekit.artifact.archive import read_artifact

    if not inputs or name == DIGITS:
        return inputs
    consts = zoo.entry(name).consts
    kept = [v for k, v in inputs.items() if k not in consts]
    wanted = [i["name"] for i in read_artifact(path).manifest["inputs"]]
    return dict(zip(wanted, kept, strict=True))


def host_outputs(path: Path, inputs: dict[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    """The same loop as the guest's ``outputs`` command, on this host's runtimes."""
    from edgekit.artifact.archive import read_artifact
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


def output_names(path: Path) -> list[str]:
    from edgekit.artifact.archive import read_artifact

    return [o["name"] for o in read_artifact(path).manifest["outputs"]]


def output_steps(path: Path) -> dict[str, dict[str, float]]:
    """Quantization step of each output, per format (a model's own output grid first; a
    float output computed from int8 layers: its recorded ``float_step``)."""
    from edgekit.artifact.archive import read_artifact

    artifact = read_artifact(path)
    manifest, vectors = artifact.manifest, artifact.spec.test_vectors
    steps: dict[str, dict[str, float]] = {}
    for entry in manifest["models"]:
        own = entry.get("outputs_quantization", {})
        steps[entry["format"]] = {
            o["name"]: float((own.get(o["name"]) or o.get("quantization") or {}).get("scale")
                             or (vectors and vectors.for_output(o["name"]).float_step) or 0.0)
            for o in manifest["outputs"]}
    return steps


@dataclass
class Built:
    """One model's artifact for one build target, with what the host computed on it."""

    name: str
    depth: int
    path: Path
    inputs: dict[str, np.ndarray]
    floats: dict[str, np.ndarray]
    host: dict[str, dict[str, np.ndarray]]
    steps: dict[str, dict[str, float]]
    flipped: Path | None = None
    flip_note: str = ""


def build_for(target: str) -> str:
    """The build an emulated target runs: the Zero 2 W's runtime section (formats, int8
    types) is the Pi 4's, so it runs the rpi4 build; the Pi 5 (fp16 rung) gets its own."""
    return "rpi5" if target == "rpi5" else "rpi4"


def build_model(name: str, work: Path, args: argparse.Namespace, targets: list[str]
                ) -> tuple[dict[str, Built], list[Row]]:
    """Each needed build target's artifact (built once, shared by the CPUs that run it)."""
    from edgekit.converters import build

    source, onnx_path, calib, inputs, floats = prepare_model(name, work, args.samples, args.evals)
    depth = depth_of(onnx_path)
    example = None if isinstance(source, str) else zoo.entry(name).example_inputs()
    options = {} if name == DIGITS else zoo.entry(name).build_options()
    builds: dict[str, Built] = {}
    for target in targets:
        out = work / f"{name}.{target}.edgekit"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                build(source, example, target=target, calib=calib, output=out, quiet=True,
                      method="minmax", calib_samples=max(4, args.samples * 3 // 4),
                      test_vectors=2, seed=0, formats=["tflite", "onnx"], **options)
        except Exception as exc:  # noqa: BLE001 - the table reports every failure
            return {}, [Row(name, depth, note=f"build {target}: {type(exc).__name__}: "
                                              f"{str(exc)[:120]}")]
        feeds = artifact_inputs(name, out, inputs)
        named = dict(zip(output_names(out), floats.values(), strict=False))  # by position
        built = Built(name, depth, out, feeds, named,
                      host_outputs(out, feeds) if feeds else {}, output_steps(out))
        if args.verify:
            built.flipped = work / f"{name}.{target}.flipped.edgekit"
            built.flip_note = flip(out, built.flipped)
        builds[target] = built
    return builds, []


def flip(artifact: Path, flipped: Path) -> str:
    from tools.studies.perturb_weight import perturb_artifact

    try:
        return "; ".join(perturb_artifact(artifact, flipped))
    except ValueError as exc:
        flipped.unlink(missing_ok=True)
        return f"no flip: {exc}"


def compare(built: Built, target: str, emu: dict[str, dict[str, np.ndarray]] | str,
            checks: dict[str, str]) -> list[Row]:
    """Rows for one model on one emulated CPU, one per format."""
    from edgekit.ops.verify import step_distribution

    cpu = CPUS[target]
    if isinstance(emu, str):
        return [Row(built.name, built.depth, cpu=cpu, note=f"emulate: {emu[:140]}")]
    rows = []
    for fmt, outs in built.host.items():
        row = Row(built.name, built.depth, fmt, cpu, verify=checks.get(fmt, ""))
        rows.append(row)
        if fmt not in emu:
            row.note = "format did not run under emulation"
            continue
        worst: dict[str, float] = {}
        host_db, emu_db = [], []
        for oname, value in outs.items():
            step = built.steps[fmt][oname]
            if oname in built.floats and built.floats[oname].shape == value.shape:
                host_db.append(sqnr_db(built.floats[oname], value))
                emu_db.append(sqnr_db(built.floats[oname], emu[fmt][oname]))
            if step <= 0:
                row.note = f"{oname} is float: no step"
                continue
            dist = step_distribution(emu[fmt][oname], value, step)
            if not worst or dist["within_1"] < worst["within_1"] or dist["max"] > worst["max"]:
                worst = dist
        row.dist = worst
        row.host_db = min(host_db) if host_db else None
        row.emu_db = min(emu_db) if emu_db else None
    return rows


def verdicts(original: object, flipped: object | None) -> dict[str, str]:
    """format -> "PASS/FAIL": the artifact's own verdict / the flipped one's ("-" if none)."""
    def by_format(result: object) -> dict[str, dict]:
        report = result.guest.get("report") or {}  # type: ignore[attr-defined]
        return {f["format"]: f for f in report.get("formats", []) if not f.get("skipped")}

    ok = by_format(original)
    bad = by_format(flipped) if flipped is not None else {}
    found = {}
    for fmt, got in ok.items():
        second = "-" if fmt not in bad else ("PASS" if bad[fmt].get("passed") else "FAIL")
        found[fmt] = f"{'PASS' if got.get('passed') else 'FAIL'}/{second}"
    if not ok:
        found["*"] = f"ERROR/{original.guest.get('error', '?')[:60]}"  # type: ignore[attr-defined]
    return found


def vector_distributions(result: object) -> dict[str, dict[str, float]]:
    """format -> the worst output's host-vs-emulated step distribution on the artifact's own
    test vectors (their expected outputs are the host's), as the emulated verify measured it."""
    report = result.guest.get("report") or {}  # type: ignore[attr-defined]
    worst: dict[str, dict[str, float]] = {}
    for f in report.get("formats", []):
        for dist in (f.get("distribution") or {}).values():
            now = worst.get(f["format"])
            if now is None or (dist["within_1"], -dist["max"]) < (now["within_1"], -now["max"]):
                worst[f["format"]] = dist
    return worst


def verify_rows(name: str, depth: int, target: str, checks: dict[str, str], why: str,
                dists: dict[str, dict[str, float]] | None = None) -> list[Row]:
    """Rows of verifications only; with ``dists`` (a model whose samples are not on axis 0),
    the distribution columns come from its test vectors."""
    dists = dists or {}
    return [Row(name, depth, fmt, CPUS[target], verify=verdict, dist=dists.get(fmt, {}),
                note=f"verify/flipped {verdict} ({why})") for fmt, verdict in checks.items()]


def sweep(builds: dict[str, dict[str, Built]], targets: list[str], args: argparse.Namespace,
          extra: list[Path]) -> list[Row]:
    """Per target, one emulated interpreter runs every model's outputs and verifications."""
    from edgekit.converters.emulation import OutputsJob, emulate_batch
    from edgekit.targets import load_profile

    rows: list[Row] = []
    for target in targets:
        start = time.perf_counter()
        models = [b[build_for(target)] for b in builds.values() if build_for(target) in b]
        checked = [(m.name, m.path, m.flipped) for m in models] if args.verify else []
        if args.verify:
            checked += [(f"{p.name} (committed)", p, bad if (bad := p.with_suffix(
            ".flipped.edgekit")).is_file() else None) for p in extra]
        paths = [p for _, path, bad in checked for p in (path, bad) if p is not None]
        result = emulate_batch(load_profile(target), verify=paths,
                               outputs=[OutputsJob(str(m.path), m.inputs) for m in models
                                        if m.inputs],
                               timeout=4 * 3600)
        found = dict(zip(paths, result.verified, strict=True))
        checks = {name: verdicts(found[path], found.get(bad) if bad else None)
                  for name, path, bad in checked}
        emulated = iter(result.outputs)
        for model in models:
            if model.inputs:
                rows += compare(model, target, next(emulated), checks.get(model.name, {}))
            else:
                rows += verify_rows(model.name, model.depth, target, checks.get(model.name, {}),
                                    "a batch axis other than 0: its test vectors only",
                                    vector_distributions(found[model.path]) if args.verify
                                    else None)
        for name, path, _ in checked[len(models):]:
            rows += verify_rows(name, 0, target, checks[name], "committed",
                                vector_distributions(found[path]))
        print(f"[{target}: {len(paths)} verifications, {len(models)} output runs in "
              f"{result.interpreters} interpreter(s), {time.perf_counter() - start:.0f} s]",
              file=sys.stderr, flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help=f"comma-separated ({DIGITS} and zoo names)")
    parser.add_argument("--quick", action="store_true", help="8 calibration, 4 held-out inputs")
    parser.add_argument("--targets", default="rpi4,rpi-zero2w",
                        help=f"comma-separated emulated targets among {', '.join(CPUS)}")
    parser.add_argument("--verify", action="store_true",
                        help="also emulate each artifact's test vectors, and with a flipped weight")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument("--group", type=int, default=0,
                        help="build and sweep this many models at a time (0: all at once); "
                             "results of each group reach --json before the next starts")
    parser.add_argument("--committed", default=str(EXAMPLE_ARTIFACT),
                        help="with --verify: committed artifacts verified as they are "
                             "(comma-separated; default the Pi example's)")
    parser.add_argument("--artifacts", default="",
                        help="built artifacts (comma-separated, e.g. the real-model suite's) "
                             "verified as they are and with a flipped weight on every target; "
                             "without --models no zoo model is built")
    parser.add_argument("--table", help="only print the table of rows saved by --json "
                                        "(comma-separated files, e.g. runs of model groups)")
    args = parser.parse_args(argv)
    if args.table:
        print_table([Row(**r) for f in args.table.split(",") for r in json.loads(
            Path(f).read_text())])
        return 0
    names = [n for n in args.models.split(",") if n]
    if args.artifacts:
        args.committed, args.verify = args.artifacts, True
    elif not names:
        names = [DIGITS, *zoo.ENTRIES]
    for n in names:
        if n != DIGITS:
            zoo.entry(n)
    args.targets = [t for t in args.targets.split(",") if t]
    args.committed = [p for p in args.committed.split(",") if p]
    for t in args.targets:
        if t not in CPUS:
            parser.error(f"--targets: expected names among {sorted(CPUS)}, got {t!r}")
    args.samples, args.evals = (8, 4) if args.quick else (32, 16)
    logging.getLogger().setLevel(logging.ERROR)
    rows: list[Row] = []
    build_targets = sorted({build_for(t) for t in args.targets})
    size = args.group or max(1, len(names))
    with tempfile.TemporaryDirectory(prefix="study-cross-isa-") as tmp:
        extra = [Path(p) for p in args.committed] if args.verify else []
        for path in extra:
            print(f"[{path.name}: {flip(path, Path(tmp) / (path.stem + '.flipped.edgekit'))}]",
                  file=sys.stderr, flush=True)
        extra = [Path(tmp) / p.name for p in extra]
        for path, src in zip(extra, args.committed, strict=True):
            path.write_bytes(Path(src).read_bytes())
        if not names:  # --artifacts alone
            rows += sweep({}, args.targets, args, extra)
            if args.json:
                Path(args.json).write_text(json.dumps([r.__dict__ for r in rows], indent=1,
                                                      default=float))
        for first in range(0, len(names), size):  # build a group, sweep it, report it
            builds: dict[str, dict[str, Built]] = {}
            for name in names[first:first + size]:
                start = time.perf_counter()
                try:
                    built, failed = build_model(name, Path(tmp), args, build_targets)
                except Exception as exc:  # noqa: BLE001 - export trouble: report, go on
                    built, failed = {}, [Row(name, note=f"{type(exc).__name__}: "
                                                        f"{str(exc)[:140]}")]
                rows += failed
                if built:
                    builds[name] = built
                flips = "; ".join(f"{t}: {b.flip_note}" for t, b in built.items()
                                  if b.flip_note)
                print(f"[{name}: built {sorted(built) or 'nothing'} in "
                      f"{time.perf_counter() - start:.0f} s{'; ' + flips if flips else ''}]",
                      file=sys.stderr, flush=True)
            rows += sweep(builds, args.targets, args, extra if first == 0 else [])
            if args.json:
                Path(args.json).write_text(json.dumps([r.__dict__ for r in rows], indent=1, default=float))
            for built in builds.values():  # a group's artifacts are done with
                for b in built.values():
                    for path in (b.path, b.flipped):
                        if path is not None:
                            path.unlink(missing_ok=True)
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

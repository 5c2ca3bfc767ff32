"""Fuzz the artifact loader: crafted ``.edgekit`` files, each loaded by ``edgekit.load``.

    python tools/studies/fuzz_artifact.py [--cases 5000] [--seed 0] [--timeout 20] [--bomb-gib 4]

Cases (tools/fixtures/artifact_cases.py, rotating over two bases: a tiny ONNX model, and the digits
example with a .tflite, ``models[].inputs/outputs/perm``, ``outputs_quantization`` and
quantized test vectors): byte flips, truncations, zip-structure games (duplicate names,
bogus sizes, unlisted members, nested and ``..`` paths, encryption and other compression,
external-data models, a small zip bomb), manifest mutations, member changes and test-vector
(.npz) corruptions with every hash recomputed. Each case is loaded, inspected, its test
vectors read and verified on every runtime; it must pass or fail with an ``EdgekitError``;
anything else is counted as untyped. Cases run in a worker process, so an interpreter
crash or a hang (no answer within --timeout s) is counted too and the worker restarted.

Then the resource bombs (tools/studies/resource_bombs.py), each in a fresh process: zip bombs of
--bomb-gib GiB (declaring their size, and lying), two 1000 MB members at 70x, a .tflite
declaring an 8 GiB activation, an ONNX value info of 32 GiB, a 1x1x46341x46341 input under
threads=auto, proc/stat -> /dev/zero, an npz bomb and a 4 TiB .npy header in the test
vectors, a PNG claiming 100000x100000, bench --batch 100000000, an endless ONNX Loop under
predict. The claim: each typed (or bounded), whole-process peak RSS < 200 MB. Exit status
1 if any case was untyped, crashed or hung, or a bomb broke the claim.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import selectors
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tools")]  # tools.* packages, and the zoo as ``zoo``

from tools.fixtures import artifact_cases  # noqa: E402
from tools.studies import resource_bombs  # noqa: E402

EXAMPLE = REPO / "examples" / "raspberrypi" / "digits.rpi4.edgekit"  # tflite + onnx, real data


def outcome(path: str) -> tuple[str, str]:
    """('loaded' | 'typed' | 'untyped', detail) for one artifact file: loaded, shown as
    `edgekit inspect` shows it, its test vectors read, then `edgekit verify` on every
    runtime of its formats (every field any of them reads, every model run)."""
    import edgekit
    from edgekit.errors import EdgekitError
    from edgekit.ops.inspect import manifest_table
    from edgekit.ops.verify import verify_artifact

    model = None
    try:
        model = edgekit.load(path, threads=1, trusted_keys=[])
        manifest_table(model.manifest)  # what `edgekit inspect` shows
        if model.spec.test_vectors is not None:
            model.artifact.test_vectors()
            verify_artifact(model.artifact)
    except EdgekitError as exc:
        return "typed", type(exc).__name__
    except BaseException as exc:  # noqa: BLE001 - the point: anything else is a finding
        return "untyped", f"{type(exc).__name__}: {str(exc)[:200]}"
    finally:
        if model is not None:
            model.close()
    return "loaded", ""


def worker(seed: int, first: int, last: int, folder: str) -> None:
    """Load cases first..last-1, one JSON line each (printed before and after the load)."""
    # the protocol gets its own copy of stdout; what the runtimes print natively goes away
    report = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the life of the worker
    os.chdir(folder)  # external-data cases point at secret.txt here
    Path("secret.txt").write_text("the device's secret\n")
    base = [artifact_cases.base_members(), artifact_cases.example_members(str(EXAMPLE))]
    for index in range(first, last):
        print(json.dumps({"start": index}), file=report, flush=True)
        kind, data = artifact_cases.craft(index, seed, base)
        path = os.path.join(folder, f"case-{index}.edgekit")
        Path(path).write_bytes(data)
        result, detail = outcome(path)
        os.unlink(path)
        print(json.dumps({"index": index, "kind": kind, "result": result, "detail": detail}),
              file=report, flush=True)


def run_cases(cases: int, seed: int, timeout: float) -> tuple[Counter, list[dict]]:
    """Every case through worker processes; a dead or silent worker is replaced."""
    counts: Counter = Counter()
    findings: list[dict] = []
    done = 0
    with tempfile.TemporaryDirectory(prefix="edgekit-fuzz-") as folder:
        while done < cases:
            argv = [sys.executable, __file__, "--worker", str(seed), str(done), str(cases),
                    folder]
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    text=True)
            selector = selectors.DefaultSelector()
            selector.register(proc.stdout, selectors.EVENT_READ)
            current = done
            while True:
                if not selector.select(timeout):
                    proc.kill()
                    counts[("?", "hang")] += 1
                    findings.append({"index": current, "result": "hang"})
                    done = current + 1
                    break
                line = proc.stdout.readline()
                if not line:  # the worker ended: done, or died mid-case
                    proc.wait()
                    if done < cases:
                        counts[("?", "crash")] += 1
                        findings.append({"index": current, "result": "crash",
                                         "detail": f"exit {proc.returncode}"})
                    done = current + 1
                    break
                if not line.startswith("{"):
                    continue
                record = json.loads(line)
                if "start" in record:
                    current = record["start"]
                    continue
                counts[(record["kind"], record["result"])] += 1
                if record["result"] == "untyped":
                    findings.append(record)
                done = record["index"] + 1
            proc.wait()
            selector.close()
    return counts, findings


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        seed, first, last, folder = sys.argv[2:6]
        worker(int(seed), int(first), int(last), folder)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per case")
    parser.add_argument("--bomb-gib", type=float, default=4.0)
    args = parser.parse_args()
    started = time.monotonic()
    counts, findings = run_cases(args.cases, args.seed, args.timeout)
    seconds = time.monotonic() - started
    print(f"{args.cases} crafted artifacts (seed {args.seed}) in {seconds:.0f} s")
    for kind in (*artifact_cases.KINDS, "?"):
        row = {result: n for (k, result), n in counts.items() if k == kind}
        if row:
            print(f"  {kind:<9} " + ", ".join(f"{r} {n}" for r, n in sorted(row.items())))
    totals = Counter()
    for (_, result), n in counts.items():
        totals[result] += n
    bad = {r: totals[r] for r in ("untyped", "crash", "hang")}
    print("  total     " + ", ".join(f"{r} {n}" for r, n in sorted(totals.items())))
    print("  untyped {untyped}, crashes {crash}, hangs {hang}".format(**bad))
    for finding in findings[:20]:
        print(f"    case {finding['index']}: {finding['result']} {finding.get('detail', '')}")
    ok = not any(bad.values())
    with tempfile.TemporaryDirectory(prefix="edgekit-bombs-") as folder:
        bombs = resource_bombs.build_bombs(Path(folder), args.bomb_gib)
        print(f"{len(bombs)} resource bombs, each in a fresh process (bound: peak RSS "
              f"< {resource_bombs.PEAK_BOUND_MB:g} MB, the whole process)")
        for name, statement in bombs.items():
            report = resource_bombs.probe(statement)
            fine = resource_bombs.passed(report)
            ok = ok and fine
            print(f"  {'ok  ' if fine else 'FAIL'} {name:<42} peak {report['peak_mb']:6.1f} MB "
                  f"{report['seconds']:6.2f} s  {report['result'][:150]}")
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"fuzzer process peak RSS {own:.0f} MB; {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

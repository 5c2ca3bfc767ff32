"""Runs *inside* the emulator (``python3.11 -I <host path>/guest.py ...``), as a script: the
sysroot holds the device package (``edgekit``) only, never this host package.

Commands (each prints one ``EDGEKIT-EMULATE-RESULT <json>`` line on stdout):

* ``probe``: what the guest sees: machine, /proc/cpuinfo's CPU lines, the HWCAP bits QEMU
  derives from ``-cpu`` (what runtimes really dispatch on), installed runtime versions.
* ``verify ARTIFACT [--runs N]``: ``edgekit.ops.verify.verify_artifact`` on every model format
  whose runtime is installed, then N timed batch-1 runs per format.
* ``outputs ARTIFACT INPUTS.npz OUT.npz``: every installed format's outputs on the inputs
  (one sample at a time, as a device serves them), saved as ``<format>/<output>`` arrays;
  what ``edgekit emulate --val`` and the cross-ISA study compare with the host's.
* ``batch JOBS.json``: many ``verify``/``outputs`` jobs in this one interpreter (importing
  the runtimes under QEMU costs tens of seconds, paid once); one result line per job, as it
  finishes, each with the job's ``id``, so a crash loses only the job it happened in.

Only the stdlib at import time: the probe must work even when a runtime would crash.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from dataclasses import asdict
from typing import Any

RESULT_MARK = "EDGEKIT-EMULATE-RESULT "  # same as runner.RESULT_MARK (runner imports nothing here)
PROGRESS_MARK = "EDGEKIT-EMULATE-PROGRESS "  # same as runner.PROGRESS_MARK: a line the host relays
DISTRIBUTIONS = ("numpy", "onnxruntime", "ai-edge-litert")
# linux/arch/arm64/include/uapi/asm/hwcap.h
HWCAP_BITS = {"fp": 0, "asimd": 1, "fphp": 9, "asimdhp": 10, "asimddp": 20, "sve": 22}
HWCAP2_BITS = {"i8mm": 13, "bf16": 14}
AT_HWCAP, AT_HWCAP2 = 16, 26


def cpuinfo() -> dict[str, str]:
    """The first processor's ``key: value`` lines from /proc/cpuinfo."""
    fields: dict[str, str] = {}
    try:
        text = open("/proc/cpuinfo").read()
    except OSError as exc:
        return {"error": str(exc)}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def hwcaps() -> dict[str, bool]:
    import ctypes

    libc = ctypes.CDLL(None)
    libc.getauxval.restype = ctypes.c_ulong
    libc.getauxval.argtypes = [ctypes.c_ulong]
    hw, hw2 = libc.getauxval(AT_HWCAP), libc.getauxval(AT_HWCAP2)
    caps = {name: bool(hw >> bit & 1) for name, bit in HWCAP_BITS.items()}
    caps.update({name: bool(hw2 >> bit & 1) for name, bit in HWCAP2_BITS.items()})
    return caps


def versions() -> dict[str, str]:
    from importlib import metadata

    found = {}
    for dist in DISTRIBUTIONS:
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return found


def probe() -> dict[str, Any]:
    info = cpuinfo()
    return {
        "machine": platform.machine(),
        "python": platform.python_version(),
        "cpuinfo": {"implementer": info.get("CPU implementer", ""),
                    "part": info.get("CPU part", ""), "features": info.get("Features", "")},
        "hwcap": hwcaps() if platform.machine() == "aarch64" else {},
        "versions": versions(),
    }


def timed_runs(path: str, formats: list[tuple[str, str]], runs: int) -> dict[str, list[float]]:
    """Milliseconds per batch-1 inference on the first test vector, per format."""
    import numpy as np

    from edgekit.artifact.archive import read_artifact
    from edgekit.model import Model

    artifact = read_artifact(path)
    vectors = artifact.test_vectors()
    axes = {i["name"]: int(i.get("batch_axis", 0)) for i in artifact.manifest["inputs"]}
    # the first vector of each input, on its own batch axis (a recurrent state: axis 1)
    feeds = {k[3:]: np.take(v, [0], axis=axes.get(k[3:], 0))
             for k, v in vectors.items() if k.startswith("in/")}
    out: dict[str, list[float]] = {}
    for fmt, runtime in formats:
        model = Model(artifact, backend=runtime)  # default options: runtime's thread count
        model.predict(feeds)  # warm-up: first run pays for lazy kernel set-up
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            model.predict(feeds)
            times.append((time.perf_counter() - start) * 1000.0)
        model.close()
        out[fmt] = times
    return out


def verify(path: str, runs: int) -> dict[str, Any]:
    from edgekit.errors import EdgekitError
    from edgekit.ops.verify import verify_artifact

    result = probe()
    try:
        report = verify_artifact(path)
    except EdgekitError as exc:
        result.update(passed=False, error=f"{type(exc).__name__}: {exc}")
        return result
    result.update(passed=report.passed, report=asdict(report), lines=report.lines())
    ran = [(f.format, f.runtime) for f in report.formats if not f.skipped]
    if report.passed and runs > 0:
        result["timings_ms"] = timed_runs(path, ran, runs)
    return result


def outputs(path: str, inputs_path: str, out_path: str) -> dict[str, Any]:
    import numpy as np

    from edgekit.artifact.archive import read_artifact
    from edgekit.backends import backends_for
    from edgekit.model import Model

    result = probe()
    artifact = read_artifact(path)
    with np.load(inputs_path) as data:
        feeds = {k: data[k] for k in data.files}
    # samples on each input's and output's own batch axis (a recurrent state: axis 1)
    axes = {i["name"]: int(i.get("batch_axis", 0)) for i in artifact.manifest["inputs"]}
    first = next(iter(feeds))
    count = feeds[first].shape[axes.get(first, 0)]
    saved: dict[str, np.ndarray] = {}
    ran = []
    for entry in artifact.manifest["models"]:
        usable = [c for c in backends_for(entry["format"]) if c.available()]
        if not usable:
            continue
        model = Model(artifact, backend=usable[0].name)
        rows = []
        for i in range(count):
            rows.append(model.run_feeds(model.prepare_feeds(
                {k: np.take(v, [i], axis=axes.get(k, 0)) for k, v in feeds.items()})))
            if (i + 1) % max(1, count // 10) == 0 or i + 1 == count:  # about every tenth
                _progress(f"{entry['format']} on {usable[0].name}: {i + 1}/{count} samples")
        model.close()
        for j, spec in enumerate(artifact.manifest["outputs"]):
            saved[f"{entry['format']}/{spec['name']}"] = np.concatenate(
                [r[j] for r in rows], axis=int(spec.get("batch_axis", 0)))
        ran.append([entry["format"], usable[0].name])
    np.savez(out_path, **saved)
    result.update(passed=bool(ran), formats=ran, count=count)
    return result


def _progress(message: str) -> None:
    sys.stderr.write(PROGRESS_MARK + message + "\n")
    sys.stderr.flush()


def report(result: dict[str, Any]) -> None:
    sys.stdout.write(RESULT_MARK + json.dumps(result) + "\n")
    sys.stdout.flush()


def batch(jobs_path: str) -> None:
    """Run each job of ``[{"id", "command": "verify"|"outputs", "args": [...]}]``; report
    each as it ends (an exception becomes that job's error, the next job still runs)."""
    with open(jobs_path) as handle:
        jobs = json.load(handle)
    for job in jobs:
        try:
            if job["command"] == "verify":
                artifact, runs = job["args"]
                result = verify(artifact, int(runs))
            else:
                result = outputs(*job["args"])
        except Exception as exc:  # noqa: BLE001 - one job's failure is its own result
            result = {"passed": False, "error": f"{type(exc).__name__}: {exc}"}
        report({"id": job["id"], **result})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="guest.py")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("probe")
    ver = sub.add_parser("verify")
    ver.add_argument("artifact")
    ver.add_argument("--runs", type=int, default=3)
    out = sub.add_parser("outputs")
    out.add_argument("artifact")
    out.add_argument("inputs")
    out.add_argument("out")
    many = sub.add_parser("batch")
    many.add_argument("jobs")
    args = parser.parse_args(argv)
    if args.command == "batch":
        batch(args.jobs)
        return 0
    if args.command == "probe":
        result = probe()
    elif args.command == "verify":
        result = verify(args.artifact, args.runs)
    else:
        result = outputs(args.artifact, args.inputs, args.out)
    report(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())

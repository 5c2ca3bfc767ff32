"""Many artifacts in one emulated interpreter: ``verify`` and ``outputs`` jobs in a batch.

Under QEMU, starting the guest's Python and importing onnxruntime and LiteRT costs tens of
seconds, more than verifying a small artifact; a sweep over the zoo (tools/studies/study_cross_isa.py)
pays it once per target instead of once per artifact. The guest reports each job as it ends;
if the interpreter dies inside a job (a runtime's segfault), that job gets the crash as its
error and the jobs after it run in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from edgekit.converters.emulation.runner import GUEST_SCRIPT, RESULT_MARK, run_python
from edgekit.converters.emulation.session import EmulationResult, _built_for, _quiet, prepare

if TYPE_CHECKING:
    import numpy as np
    from edgekit.converters.emulation.builder import Progress


@dataclass
class OutputsJob:
    """Every installed format's outputs of ``artifact`` on ``inputs`` (one sample at a time)."""

    artifact: str
    inputs: dict[str, np.ndarray]


@dataclass
class BatchResult:
    """Per verify job an ``EmulationResult``; per outputs job ``{format: {output: array}}``
    or the error text that job ended with."""

    verified: list[EmulationResult] = field(default_factory=list)
    outputs: list[dict[str, dict[str, np.ndarray]] | str] = field(default_factory=list)
    seconds: float = 0.0
    interpreters: int = 0  # guest Python processes started (1 unless a job crashed one)


def _run_jobs(sysroot: Any, cpu: Any, jobs: list[dict[str, Any]], timeout: float
              ) -> tuple[dict[str, dict[str, Any]], int]:
    """Results by job id; a crashed interpreter's current job gets the crash, the rest rerun."""
    results: dict[str, dict[str, Any]] = {}
    starts = 0
    with tempfile.TemporaryDirectory(prefix="edgekit-batch-") as tmp:
        pending = list(jobs)
        while pending:
            jobs_path = os.path.join(tmp, f"jobs{starts}.json")
            with open(jobs_path, "w") as handle:
                json.dump(pending, handle)
            starts += 1
            proc = run_python(sysroot, cpu, [str(GUEST_SCRIPT), "batch", jobs_path],
                              timeout=timeout)
            for line in proc.stdout.splitlines():
                if line.startswith(RESULT_MARK):
                    found = json.loads(line[len(RESULT_MARK):])
                    results[found["id"]] = found
            rest = [job for job in pending if job["id"] not in results]
            if not rest:
                break
            if rest == pending:  # nothing reported at all: the interpreter cannot start
                error = (f"the emulated Python exited {proc.returncode} before any job: "
                         f"{(proc.stderr or '').strip()[-1000:]}")
                results.update({job["id"]: {"passed": False, "error": error} for job in rest})
                break
            crashed = rest[0]
            signal = f" (signal {-proc.returncode})" if proc.returncode < 0 else ""
            results[crashed["id"]] = {
                "passed": False,
                "error": f"the emulated Python exited {proc.returncode}{signal} in this job: "
                         f"{(proc.stderr or '').strip()[-1000:]}"}
            pending = rest[1:]
    return results, starts


def emulate_batch(profile: Any, verify: Sequence[str | os.PathLike[str]] = (),
                  outputs: Sequence[OutputsJob] = (), runs: int = 0, progress: Progress = _quiet,
                  timeout: float = 7200.0) -> BatchResult:
    """``emulate`` on each of ``verify`` and ``emulated_outputs`` on each of ``outputs``, all
    in one emulated interpreter on the profile's CPU; results in the order given."""
    import numpy as np

    sysroot, cpu = prepare(profile, progress)
    paths = [os.path.abspath(os.fspath(p)) for p in verify]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="edgekit-batch-io-") as tmp:
        jobs: list[dict[str, Any]] = [{"id": f"v{i}", "command": "verify",
                                       "args": [path, runs]} for i, path in enumerate(paths)]
        for i, job in enumerate(outputs):
            feeds, out = os.path.join(tmp, f"in{i}.npz"), os.path.join(tmp, f"out{i}.npz")
            np.savez(feeds, **job.inputs)
            jobs.append({"id": f"o{i}", "command": "outputs",
                         "args": [os.path.abspath(job.artifact), feeds, out]})
        progress(f"{len(jobs)} jobs under {cpu.qemu} -cpu {cpu.model} in one interpreter")
        results, starts = _run_jobs(sysroot, cpu, jobs, timeout)
        done = BatchResult(seconds=time.monotonic() - started, interpreters=starts)
        for i, path in enumerate(paths):
            guest = results[f"v{i}"]
            result = EmulationResult(artifact=path, target=profile.name, cpu=cpu, guest=guest,
                                     seconds=0.0, sysroot=str(sysroot.path))
            built_for = _built_for(path)
            if built_for and built_for != profile.name:
                result.notes.append(f"artifact was built for {built_for!r}, emulated as "
                                    f"{profile.name!r}")
            done.verified.append(result)
        for i in range(len(outputs)):
            guest = results[f"o{i}"]
            if not guest.get("passed"):
                done.outputs.append(str(guest.get("error", "no runtime installed for its "
                                                           "formats")))
                continue
            found: dict[str, dict[str, np.ndarray]] = {}
            with np.load(os.path.join(tmp, f"out{i}.npz")) as data:
                for key in data.files:
                    fmt, _, name = key.partition("/")
                    found.setdefault(fmt, {})[name] = data[key]
            done.outputs.append(found)
    return done

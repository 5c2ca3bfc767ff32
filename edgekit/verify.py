"""Run an artifact's bundled test vectors here and compare with the outputs the host recorded.

Pass: every output element within one quantization step of the expected value (the
output's dequantization scale); float outputs within a small relative tolerance.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgekit.artifact import Artifact, read_artifact
from edgekit.backends import backends_for, by_name

FLOAT_RTOL = 1e-4


@dataclass
class FormatReport:
    format: str
    runtime: str
    version: str
    errors: list[dict[str, float]] = field(default_factory=list)  # per vector: output -> max err
    steps: list[dict[str, float]] = field(default_factory=list)  # per vector: output -> max steps
    passed: bool = True
    skipped: str = ""


@dataclass
class VerifyReport:
    path: str
    machine: str
    formats: list[FormatReport]

    @property
    def passed(self) -> bool:
        ran = [f for f in self.formats if not f.skipped]
        return bool(ran) and all(f.passed for f in ran)

    def lines(self) -> list[str]:
        out = [f"verify {os.path.basename(self.path)} on {self.machine}"]
        for f in self.formats:
            if f.skipped:
                out.append(f"  {f.format}: skipped ({f.skipped})")
                continue
            out.append(f"  {f.format} on {f.runtime} {f.version}: {'PASS' if f.passed else 'FAIL'}")
            for i, (errs, steps) in enumerate(zip(f.errors, f.steps, strict=True)):
                detail = ", ".join(f"{name} max|err| {errs[name]:.3g} ({steps[name]:.2f} steps)"
                                   for name in errs)
                out.append(f"    vector {i}: {detail}")
        out.append("PASS" if self.passed else "FAIL")
        return out


def step_distribution(got: np.ndarray, expected: np.ndarray, step: float) -> dict[str, float]:
    """Share of elements within 0, 1 and 2 quantization steps, and the largest difference in
    steps. "Within 0" means under half a step: two int8 grids that agree give exactly 0."""
    steps = np.abs(np.asarray(got, np.float64) - np.asarray(expected, np.float64)) / step
    if steps.size == 0:
        return {"within_0": 1.0, "within_1": 1.0, "within_2": 1.0, "max": 0.0}
    return {"within_0": float((steps < 0.5).mean()), "within_1": float((steps <= 1.001).mean()),
            "within_2": float((steps <= 2.001).mean()), "max": float(steps.max())}


def tolerance(spec: dict[str, Any], expected: np.ndarray) -> float:
    """One quantization step of this output, or a relative tolerance for float outputs."""
    scale = (spec.get("quantization") or {}).get("scale")
    if scale:
        return float(scale)
    return float(FLOAT_RTOL * max(1.0, float(np.abs(expected).max())))


def verify_artifact(path: str | os.PathLike[str] | Artifact, backend: str | None = None,
                    threads: int = 1) -> VerifyReport:
    """Run every model format in the artifact whose runtime is installed (or ``backend`` only)."""
    from edgekit.model import Model
    from edgekit.session import RuntimeOptions

    artifact = path if isinstance(path, Artifact) else read_artifact(path)
    manifest = artifact.manifest
    vectors = artifact.test_vectors()
    inputs = {k[3:]: v for k, v in vectors.items() if k.startswith("in/")}
    reports = []
    for entry in manifest["models"]:
        fmt = entry["format"]
        classes = [by_name(backend)] if backend else backends_for(fmt)
        classes = [c for c in classes if c.format == fmt]
        usable = [c for c in classes if c.available()]
        if not usable:
            if classes or not backend:
                names = ", ".join(c.package for c in classes) or "no backend registered"
                reports.append(FormatReport(fmt, "", "", skipped=f"runtime not installed: {names}"))
            continue
        cls = usable[0]
        model = Model(artifact, backend=cls.name, options=RuntimeOptions(threads=threads))
        report = FormatReport(fmt, cls.name, cls.version())
        count = len(next(iter(inputs.values())))
        for i in range(count):
            got = model.run_feeds(model.prepare_feeds({k: v[i:i + 1] for k, v in inputs.items()}))
            errs, steps = {}, {}
            for spec, value in zip(manifest["outputs"], got, strict=True):
                expected = vectors[f"out/{fmt}/{spec['name']}"][i:i + 1]
                # a model's own output quantization ({scale, zero_point}) wins over the manifest's
                own_q = entry.get("outputs_quantization", {}).get(spec["name"])
                spec_q = {"quantization": own_q} if own_q else spec
                err = float(np.abs(value.astype(np.float64) - expected).max())
                step = tolerance(spec_q, expected)
                errs[spec["name"]], steps[spec["name"]] = err, err / step
                if err > step * 1.001:
                    report.passed = False
            report.errors.append(errs)
            report.steps.append(steps)
        model.close()
        reports.append(report)
    machine = f"{platform.machine()} ({platform.system()}, Python {platform.python_version()})"
    return VerifyReport(str(artifact.path), machine, reports)

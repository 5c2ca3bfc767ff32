"""Run an artifact's bundled test vectors here and compare with the outputs the host recorded.

What a pass proves, per format and output, over all test vectors: the share of output
elements within one quantization step of the recorded value is at least the manifest's
``within_1_step``, no element is further than ``max_steps``, and every channel slice keeps at
least ``min_sqnr_db`` against the recorded output (``test_vectors.outputs``, derived at build
time from the cross-ISA study and the model's depth; see ``converters/metrics/tolerance.py``).
Artifacts without those bounds need every element within one step. A float output computed
from int8 layers (the guard kept the model's tail float) is held to the same bounds counted
in its recorded ``float_step``: the largest change one step at the last int8 tensors makes in
it (``converters/metrics/float_tail.py``). Other float outputs (a pure float graph): a small
relative tolerance. The report gives the distribution (within 0/1/2 steps, max), not only
the max, so a one-step rounding difference and a wrong model read differently.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from edgekit.artifact.archive import Artifact, read_artifact
from edgekit.artifact.manifest import ONE_STEP, OutputTolerance
from edgekit.backends import backends_for, by_name
from edgekit.device.cpu import cpu_part
from edgekit.errors import ArtifactError, UserError
from edgekit.numerics.sqnr import sqnr_db
from edgekit.trust.signing import Signature

if TYPE_CHECKING:
    from edgekit.trust.keys import KeySpec
    from edgekit.trust.release import Pin

FLOAT_RTOL = 1e-4


@dataclass
class FormatReport:
    format: str
    runtime: str
    version: str
    errors: list[dict[str, float]] = field(default_factory=list)  # per vector: output -> max err
    steps: list[dict[str, float]] = field(default_factory=list)  # per vector: output -> max steps
    # per output, over all vectors: within_0/1/2 shares, max steps, worst slice SQNR (dB)
    distribution: dict[str, dict[str, float]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)  # which bound each failing output broke
    passed: bool = True
    skipped: str = ""


@dataclass
class VerifyReport:
    path: str
    machine: str
    formats: list[FormatReport]
    signer: str = "unsigned"
    golden: str = ""  # --golden-on: where the expected outputs come from, and the rule used

    @property
    def passed(self) -> bool:
        ran = [f for f in self.formats if not f.skipped]
        return bool(ran) and all(f.passed for f in ran)

    def lines(self) -> list[str]:
        out = [f"verify {os.path.basename(self.path)} on {self.machine}",
               f"  signature: {self.signer}"]
        if self.golden:
            out.append(f"  expected outputs: {self.golden}")
        for f in self.formats:
            if f.skipped:
                out.append(f"  {f.format}: skipped ({f.skipped})")
                continue
            out.append(f"  {f.format} on {f.runtime} {f.version}: {'PASS' if f.passed else 'FAIL'}")
            for name, d in f.distribution.items():
                unit = (f" (float output of int8 layers: 1 step = {d['float_step']:.3g}, what "
                        f"one step at its last int8 tensors moves it)" if "float_step" in d else "")
                out.append(f"    {name}{unit}: {d['within_0']:.1%} exact, {d['within_1']:.1%} within 1 "
                           f"step, {d['within_2']:.1%} within 2, max {d['max']:.2f} steps, worst "
                           f"slice {d['sqnr_db']:.1f} dB (needs >= {d['need_within_1']:.1%}, "
                           f"max <= {d['need_max']:g}" + (f", >= {d['need_sqnr_db']:.1f} dB)"
                                                          if 'need_sqnr_db' in d else ")"))
            for i, (errs, steps) in enumerate(zip(f.errors, f.steps, strict=True)):
                # against the int8 outputs stored at build time, not float (the build
                # summary's "int8 vs float max|err|" is the quantization error)
                detail = ", ".join(f"{name} max|err| vs stored int8 outputs {errs[name]:.3g} "
                                   f"({steps[name]:.2f} steps)" for name in errs)
                out.append(f"    vector {i}: {detail}")
            out += [f"    failed: {reason}" for reason in f.failures]
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


def worst_slice_db(got: np.ndarray, expected: np.ndarray, bounds: OutputTolerance) -> float:
    """The lowest SQNR over the output's channel slices (the whole output when it has none)."""
    if not bounds.slices or expected.ndim <= bounds.axis:
        return sqnr_db(expected, got)
    exp, act = np.moveaxis(expected, bounds.axis, -1), np.moveaxis(got, bounds.axis, -1)
    return min(sqnr_db(exp[..., a:b], act[..., a:b]) for a, b in bounds.slices)


def tolerance(spec: dict[str, Any], expected: np.ndarray) -> float:
    """One quantization step of this output, or a relative tolerance for float outputs."""
    scale = (spec.get("quantization") or {}).get("scale")
    if scale:
        return float(scale)
    return float(FLOAT_RTOL * max(1.0, float(np.abs(expected).max())))


def describe_signature(signature: Signature | None) -> str:
    """``signed by key <id> (trusted: <key file>)``, ``signed by key <id> (no trusted keys
    configured here)`` or ``unsigned ...``."""
    if signature is None:
        return "unsigned (hashes catch corruption only; sign with `edgekit sign`)"
    if signature.trusted_by:
        return f"signed by key {signature.key_id} (trusted: {signature.trusted_by})"
    return f"signed by key {signature.key_id} (no trusted keys configured here)"


def judge(name: str, got: np.ndarray, expected: np.ndarray, step: float, quantized: bool,
          bounds: OutputTolerance) -> tuple[dict[str, float], str]:
    """The distribution of one output over all vectors, and why it fails ("" if it passes).
    Float outputs (no step) keep the all-within-tolerance rule."""
    dist = step_distribution(got, expected, step)
    dist["sqnr_db"] = worst_slice_db(got, expected, bounds)
    if quantized and bounds.float_step:
        dist["float_step"] = bounds.float_step
    if not quantized:
        bounds = ONE_STEP
    dist.update(need_within_1=bounds.within_1_step, need_max=bounds.max_steps)
    reasons = []
    if dist["within_1"] < bounds.within_1_step:
        reasons.append(f"{dist['within_1']:.2%} within 1 step < {bounds.within_1_step:.2%}")
    if dist["max"] > bounds.max_steps * 1.001:
        reasons.append(f"max {dist['max']:.2f} steps > {bounds.max_steps:g}")
    if quantized and bounds.min_sqnr_db is not None:
        dist["need_sqnr_db"] = bounds.min_sqnr_db
        if dist["sqnr_db"] < bounds.min_sqnr_db:
            reasons.append(f"worst slice {dist['sqnr_db']:.1f} dB < {bounds.min_sqnr_db:.1f} dB")
    return dist, (f"{name}: " + "; ".join(reasons)) if reasons else ""


def verify_artifact(path: str | os.PathLike[str] | Artifact, backend: str | None = None,
                    threads: int = 1, trusted_keys: Iterable[KeySpec] | KeySpec | None = None,
                    pin: Pin | None = None) -> VerifyReport:
    """Run every model format in the artifact whose runtime is installed (or ``backend`` only;
    a ``UserError`` when the artifact holds no model for that backend's format). Trusted keys
    and ``pin`` as for ``edgekit.load``: when any key is configured the artifact must be
    signed by one of them."""
    from edgekit.model import Model
    from edgekit.runtime.options import RuntimeOptions
    from edgekit.trust.keys import discover_trusted_keys
    from edgekit.trust.release import pin_from

    artifact = (path if isinstance(path, Artifact)
                else read_artifact(path, discover_trusted_keys(trusted_keys), pin_from(pin)))
    manifest = artifact.manifest
    spec = artifact.spec
    formats = [m.format for m in spec.models]
    if backend:
        cls = by_name(backend)
        if cls.format not in formats:
            raise UserError(f"{artifact.path}: backend {backend!r} runs {cls.format} models; "
                            f"this artifact holds {', '.join(formats)} only (expected a "
                            f"backend for one of those)")
    vectors = artifact.test_vectors()
    inputs = {k[3:]: v for k, v in vectors.items() if k.startswith("in/")}
    golden, exact = golden_rule(spec.test_vectors.golden if spec.test_vectors else {})
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
        # an input may keep its samples off axis 0 (--batch-axis: a recurrent state)
        axes = {i["name"]: int(i.get("batch_axis") or 0) for i in manifest["inputs"]}
        first = next(iter(inputs))
        count = inputs[first].shape[axes.get(first, 0)]
        got_all: list[list[np.ndarray]] = []
        for i in range(count):
            got_all.append(model.run_feeds(model.prepare_feeds(
                {k: np.take(v, [i], axis=axes.get(k, 0)) for k, v in inputs.items()})))
        model.close()
        for j, out_spec in enumerate(manifest["outputs"]):
            name = out_spec["name"]
            # samples on the output's batch axis (a recurrent state keeps them on axis 1)
            axis = int(out_spec.get("batch_axis") or 0)
            stored = vectors.get(f"out/{fmt}/{name}")
            if stored is None:
                raise ArtifactError(f"{artifact.path}: no test vector 'out/{fmt}/{name}' "
                                    f"(expected the {fmt} model's recorded output)")
            expected = np.moveaxis(stored, axis, 0)[:count]
            # a model's own output quantization ({scale, zero_point}) wins over the manifest's
            own_q = (entry.get("outputs_quantization") or {}).get(name)
            spec_q = {"quantization": own_q} if own_q else out_spec
            step = tolerance(spec_q, expected)
            got = np.moveaxis(np.concatenate([g[j] for g in got_all], axis=axis), axis, 0
                              ).astype(np.float64)
            if got.shape != expected.shape:
                raise ArtifactError(f"{artifact.path}: test vector 'out/{fmt}/{name}' holds "
                                    f"{list(expected.shape)} (vectors first); the {fmt} model "
                                    f"gives {list(got.shape)}: expected the same shape")
            quantized = bool((spec_q.get("quantization") or {}).get("scale"))
            bounds = spec.test_vectors.for_output(name) if spec.test_vectors else ONE_STEP
            if exact:  # the expected outputs were computed on this CPU (emulated)
                bounds = replace(bounds, within_1_step=1.0, max_steps=0.0)
            if not quantized and bounds.float_step:  # float, downstream of int8 layers
                step, quantized = bounds.float_step, True
            dist, reason = judge(name, got, expected, step, quantized, bounds)
            report.distribution[name] = dist
            if reason:
                report.passed = False
                report.failures.append(reason)
            for i in range(count):
                err = float(np.abs(got[i] - expected[i]).max()) if expected[i].size else 0.0
                if j == 0:
                    report.errors.append({})
                    report.steps.append({})
                report.errors[i][name], report.steps[i][name] = err, err / step
        reports.append(report)
    machine = f"{platform.machine()} ({platform.system()}, Python {platform.python_version()})"
    return VerifyReport(str(artifact.path), machine, reports,
                        describe_signature(artifact.signature), golden)


def golden_rule(golden: dict[str, str]) -> tuple[str, bool]:
    """What to say of ``--golden-on`` expected outputs, and whether this CPU must match them
    exactly (its Arm part is the one they were computed under; QEMU runs the same kernels
    because it reports the same part and features)."""
    if not golden:
        return "", False
    where = f"computed under the emulated {golden.get('cpu', '?')} ({golden.get('target', '?')})"
    if golden.get("part") and golden["part"].lower() == cpu_part():
        return f"{where}: this CPU is one, so every element must match exactly", True
    return f"{where}: this CPU is not one, so the measured cross-ISA bounds apply", False

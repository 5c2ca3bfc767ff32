"""``edgekit emulate``'s work: sysroot, then verify + a short timing inside the emulator."""

from __future__ import annotations

import json
import os
import time
import zipfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from edgekit.converters.emulation.builder import Progress, Sysroot, ensure_sysroot
from edgekit.converters.emulation.recipe import recipe_for
from edgekit.converters.emulation.runner import CpuSpec, qemu_binary, run_guest

from edgekit.errors import ArtifactError

if TYPE_CHECKING:
    import numpy as np

TIMING_LABEL = "emulated, not a prediction of board speed"


def _quiet(_: str) -> None:
    pass


@dataclass
class EmulationResult:
    """What the guest reported, plus the host-side facts around it."""

    artifact: str
    target: str
    cpu: CpuSpec
    guest: dict[str, Any]
    seconds: float
    sysroot: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.guest.get("passed"))

    def lines(self) -> list[str]:
        g = self.guest
        info = g.get("cpuinfo", {})
        caps = g.get("hwcap", {})
        shown = ("asimd", "asimddp", "fphp", "i8mm", "sve")
        flags = " ".join(f"{'+' if caps.get(k) else '-'}{k}" for k in shown if k in caps)
        out = [
            f"artifact:  {self.artifact}",
            f"target:    {self.target}",
            f"CPU model: {self.cpu.model} (QEMU {self.cpu.qemu} -cpu {self.cpu.model}); guest "
            f"cpuinfo implementer {info.get('implementer', '?')} part {info.get('part', '?')}; "
            f"hwcap {flags}",
            f"guest:     {g.get('machine', '?')}, Python {g.get('python', '?')}; "
            + ", ".join(f"{k} {v}" for k, v in sorted(g.get("versions", {}).items())),
        ]
        out += [f"note:      {n}" for n in self.notes]
        if "error" in g:
            out.append(f"error:     {g['error']}")
        out += [f"  {line}" for line in g.get("lines", [])]
        for fmt, times in (g.get("timings_ms") or {}).items():
            shown_ms = ", ".join(f"{t:.1f}" for t in times)
            mean = sum(times) / len(times) if times else 0.0
            out.append(f"timing {fmt} ({TIMING_LABEL}): {len(times)} runs, ms: {shown_ms}"
                       f" (mean {mean:.1f})")
        out.append(f"emulate {'PASS' if self.passed else 'FAIL'} on {self.cpu.model} "
                   f"in {self.seconds:.1f} s")
        return out


def prepare(profile: Any, progress: Progress = _quiet, rebuild: bool = False
            ) -> tuple[Sysroot, CpuSpec]:
    """Check QEMU first (cheap, clear error), then build or reuse the sysroot."""
    recipe = recipe_for(profile)  # first: says plainly when a target is not emulated at all
    cpu = CpuSpec.from_profile(profile)
    qemu_binary(cpu)
    return ensure_sysroot(recipe, progress=progress, rebuild=rebuild), cpu


def probe(profile: Any, progress: Progress = _quiet) -> dict[str, Any]:
    """What the guest sees on this target's emulated CPU (cpuinfo, HWCAP, versions)."""
    sysroot, cpu = prepare(profile, progress)
    return run_guest(sysroot, cpu, "probe", timeout=300)


def emulate(path: str | os.PathLike[str], profile: Any, runs: int = 3,
            progress: Progress = _quiet, timeout: float = 1800.0) -> EmulationResult:
    """Verify an artifact's test vectors on the profile's emulated CPU, then time a few runs."""
    path = os.path.abspath(os.fspath(path))
    if not os.path.isfile(path):
        raise ArtifactError(f"{path}: no such artifact file (expected a .edgekit file)")
    sysroot, cpu = prepare(profile, progress)
    progress(f"running verification under {cpu.qemu} -cpu {cpu.model} "
             f"(emulated: expect seconds to minutes)")
    started = time.monotonic()
    guest = run_guest(sysroot, cpu, "verify", path, "--runs", str(runs), timeout=timeout)
    result = EmulationResult(artifact=path, target=profile.name, cpu=cpu, guest=guest,
                             seconds=time.monotonic() - started, sysroot=str(sysroot.path))
    built_for = _built_for(path)
    if built_for and built_for != profile.name:
        result.notes.append(f"artifact was built for {built_for!r}, emulated as {profile.name!r}")
    for fmt in (guest.get("report") or {}).get("formats", []):
        if fmt.get("skipped"):
            result.notes.append(f"{fmt['format']} not verified: {fmt['skipped']}")
    return result


def _built_for(path: str) -> str:
    """The target named in the artifact's manifest ("" if unreadable: the guest says why)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return str(json.loads(archive.read("manifest.json"))["target"]["name"])
    except (OSError, KeyError, TypeError, ValueError, zipfile.BadZipFile):
        return ""


def emulated_outputs(path: str | os.PathLike[str], profile: Any,
                     inputs: dict[str, np.ndarray], progress: Progress = _quiet,
                     timeout: float = 3600.0) -> tuple[dict[str, dict[str, np.ndarray]],
                                                       dict[str, Any]]:
    """Every installed format's outputs on ``inputs`` (one sample at a time) on the profile's
    emulated CPU: ``{format: {output: array}}``, and the guest's report (CPU, versions)."""
    import tempfile

    import numpy as np

    path = os.path.abspath(os.fspath(path))
    if not os.path.isfile(path):
        raise ArtifactError(f"{path}: no such artifact file (expected a .edgekit file)")
    sysroot, cpu = prepare(profile, progress)
    # the guest writes through QEMU's -L fallback to this host folder (the sysroot has no /tmp)
    with tempfile.TemporaryDirectory(prefix="edgekit-emulate-") as tmp:
        feeds_path, out_path = os.path.join(tmp, "inputs.npz"), os.path.join(tmp, "outputs.npz")
        np.savez(feeds_path, **inputs)
        guest = run_guest(sysroot, cpu, "outputs", path, feeds_path, out_path, timeout=timeout,
                          progress=progress)
        if not guest.get("passed"):
            raise ArtifactError(f"{path}: no format of this artifact ran on {cpu.model}: "
                                f"{guest.get('error', 'no runtime installed for its formats')}")
        found: dict[str, dict[str, np.ndarray]] = {}
        with np.load(out_path) as data:
            for key in data.files:
                fmt, _, name = key.partition("/")
                found.setdefault(fmt, {})[name] = data[key]
    return found, guest

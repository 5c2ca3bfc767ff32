"""Run the sysroot's Python under ``qemu-<arch>-static`` with a target's CPU model.

Why each piece is there (measured with QEMU 7.2, Debian's qemu-user-static):

* No binfmt needed: QEMU is started directly on the sysroot's interpreter (its host path)
  and ``-L`` makes the guest's absolute paths (the ELF loader, ``/opt/edgekit``...) resolve
  in the sysroot first, falling back to the host's. Exec from inside the guest does not
  go through QEMU, so guest code must fork, never spawn.
* ``-cpu`` always: QEMU's default ``max`` has dotprod, i8mm and SVE, which a Cortex-A72
  lacks; onnxruntime picks its int8 kernels from the HWCAP bits QEMU derives from it.
* ``/proc/cpuinfo``: QEMU 7.2 emulates it only for a few guests (sparc, hppa, m68k); for
  aarch64 the guest would read the host's x86 text, and onnxruntime 1.32 and ai-edge-litert
  2.3 (via pytorch/cpuinfo) segfault at import without ``CPU implementer``/``CPU part``
  lines. ``-L`` redirects ``/proc/cpuinfo`` like any path, so each CPU gets a *view*: a
  folder of symlinks to the sysroot's top-level entries plus its own ``proc/cpuinfo``.
  One sysroot thus serves every aarch64 board, and runs for different CPUs never race.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgekit.converters.emulation.builder import Sysroot

from edgekit.errors import InternalError, UserError

RESULT_MARK = "EDGEKIT-EMULATE-RESULT "
PROGRESS_MARK = "EDGEKIT-EMULATE-PROGRESS "  # a guest's stderr line the host passes on
GUEST_SCRIPT = Path(__file__).resolve().with_name("guest.py")
# Pi OS reports cpuinfo lines like this (Cortex-A72: variant 0x0, revision 3).
_FEATURES_V80 = "fp asimd evtstrm crc32 cpuid"


@dataclass(frozen=True)
class CpuSpec:
    """What QEMU emulates and what the guest's /proc/cpuinfo says, from a profile."""

    qemu: str
    model: str
    implementer: str
    part: str
    features: str
    cores: int

    @classmethod
    def from_profile(cls, profile: Any) -> CpuSpec:
        emu, cpu = profile.emulation, profile.cpu
        if not emu.cpu_model:
            raise UserError(
                f"target {profile.name!r} names no [emulation] cpu_model; expected a QEMU CPU "
                "such as cortex-a72 (never QEMU's default 'max')"
            )
        features = _FEATURES_V80
        if cpu.fp16:
            features += " fphp asimdhp"
        if cpu.dotprod:
            features += " asimddp"
        if cpu.i8mm:
            features += " i8mm"
        return cls(qemu=emu.qemu, model=emu.cpu_model,
                   implementer=emu.cpuinfo_implementer, part=emu.cpuinfo_part,
                   features=features, cores=cpu.cores)

    def cpuinfo(self) -> str:
        """An ARM-style /proc/cpuinfo. One entry per *host* CPU: the guest's threads run on
        them and pytorch/cpuinfo matches entries against /sys/devices/system/cpu (host)."""
        count = max(1, os.cpu_count() or 1)
        block = ("processor\t: {n}\nBogoMIPS\t: 108.00\nFeatures\t: {f}\n"
                 "CPU implementer\t: {i}\nCPU architecture: 8\nCPU variant\t: 0x0\n"
                 "CPU part\t: {p}\nCPU revision\t: 3\n\n")
        text = "".join(block.format(n=n, f=self.features, i=self.implementer, p=self.part)
                       for n in range(count))
        return text + f"Model\t\t: edgekit emulated {self.model}\n"


def qemu_binary(cpu: CpuSpec) -> str:
    found = shutil.which(cpu.qemu)
    if found is None:
        raise UserError(
            f"{cpu.qemu} not found on PATH: emulated runs need QEMU user-mode emulation "
            "(Debian/Ubuntu: apt-get install qemu-user-static)"
        )
    return found


def cpu_view(sysroot: Sysroot, cpu: CpuSpec) -> Path:
    """The QEMU prefix for ``cpu``: the sysroot's entries plus this CPU's proc/cpuinfo."""
    text = cpu.cpuinfo()
    tag = hashlib.sha256(text.encode()).hexdigest()[:8]
    view = sysroot.path / "views" / f"{cpu.model}-{tag}"
    if (view / "proc" / "cpuinfo").is_file():
        for entry in sysroot.root.iterdir():  # entries added to the root after the view
            if entry.name != "proc" and not (view / entry.name).is_symlink():
                try:
                    (view / entry.name).symlink_to(os.path.relpath(entry, view))
                except FileExistsError:
                    pass
        return view
    view.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{view.name}-", dir=view.parent))
    for entry in sysroot.root.iterdir():
        if entry.name != "proc":
            (tmp / entry.name).symlink_to(os.path.relpath(entry, tmp))
    (tmp / "proc").mkdir()
    (tmp / "proc" / "cpuinfo").write_text(text)
    try:
        os.replace(tmp, view)
    except OSError:  # another process made the same view first: use theirs
        shutil.rmtree(tmp, ignore_errors=True)
    return view


def python_command(sysroot: Sysroot, cpu: CpuSpec, *args: str) -> list[str]:
    """argv running the sysroot's Python on the emulated CPU. ``-I``: no host PYTHON*
    variables, user site or current folder leak into the guest."""
    view = cpu_view(sysroot, cpu)
    return [qemu_binary(cpu), "-L", str(view), "-cpu", cpu.model, str(sysroot.python), "-I",
            *args]


def guest_env() -> dict[str, str]:
    """A clean environment: the host's (pyenv shims, LD_*, PYTHON*) means nothing inside."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
           "HOME": os.environ.get("HOME", "/root"), "TMPDIR": tempfile.gettempdir()}
    for key in ("OMP_NUM_THREADS", "EDGEKIT_LOG"):
        if key in os.environ:
            env[key] = os.environ[key]
    return env


def run_python(sysroot: Sysroot, cpu: CpuSpec, args: list[str], timeout: float = 1800.0,
               stream_stderr: bool = False, progress: Callable[[str], None] | None = None
               ) -> subprocess.CompletedProcess:
    """Run ``python3.11 -I <args>`` inside the emulator; returns the completed process.
    ``progress``: the guest's progress lines (``PROGRESS_MARK``) passed on as they come."""
    argv = python_command(sysroot, cpu, *args)
    if progress is not None:
        return _relaying(argv, timeout, progress)
    try:
        return subprocess.run(argv, env=guest_env(), stdout=subprocess.PIPE,
                              stderr=None if stream_stderr else subprocess.PIPE, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise InternalError(
            f"emulated run did not finish within {timeout:.0f} s ({' '.join(argv)})"
        ) from exc


def _relaying(argv: list[str], timeout: float, progress: Callable[[str], None]
              ) -> subprocess.CompletedProcess:
    """``subprocess.run`` with stderr read line by line: progress lines go to ``progress``,
    the rest is kept for the error message, as ``run`` would keep it."""
    import threading

    proc = subprocess.Popen(argv, env=guest_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    kept: list[str] = []

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith(PROGRESS_MARK):
                progress(line[len(PROGRESS_MARK):].rstrip("\n"))
            else:
                kept.append(line)

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    timed_out = threading.Event()

    def expire() -> None:
        timed_out.set()
        proc.kill()

    timer = threading.Timer(timeout, expire)  # communicate() would read stderr itself
    timer.start()
    assert proc.stdout is not None
    stdout = proc.stdout.read()
    proc.wait()
    timer.cancel()
    reader.join()
    if timed_out.is_set():
        raise InternalError(f"emulated run did not finish within {timeout:.0f} s ({' '.join(argv)})")
    return subprocess.CompletedProcess(argv, proc.returncode, stdout, "".join(kept))


def run_guest(sysroot: Sysroot, cpu: CpuSpec, command: str, *args: str,
              timeout: float = 1800.0, progress: Callable[[str], None] | None = None
              ) -> dict[str, Any]:
    """Run ``guest.py <command> ...`` inside; return the JSON it reports.

    The sysroot holds the device package only: the guest script is read from its host path
    (QEMU's ``-L`` falls back to the host's files, as for the artifact), and ``-I`` keeps
    its folder off ``sys.path``, so inside it imports nothing but ``edgekit``'s device code."""
    proc = run_python(sysroot, cpu, [str(GUEST_SCRIPT), command, *args], timeout=timeout,
                      progress=progress)
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_MARK):
            return json.loads(line[len(RESULT_MARK):])
    signal = f" (signal {-proc.returncode})" if proc.returncode < 0 else ""
    raise InternalError(
        f"the emulated Python exited {proc.returncode}{signal} without a result on "
        f"{cpu.model}:\nstdout: {proc.stdout.strip()[-2000:]}\n"
        f"stderr: {(proc.stderr or '').strip()[-3000:]}"
    )

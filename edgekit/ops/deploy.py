"""Install artifacts on the device with rollback: ``edgekit install`` / ``edgekit rollback``.

Layout under a root folder (install.sh uses ``~/edgekit``), one slot per artifact name::

    <root>/<name>/releases/<sha256[:16]>.edgekit   every kept release
    <root>/<name>/current  -> releases/...         what the service runs
    <root>/<name>/previous -> releases/...         what ``rollback`` switches back to

A new artifact is copied beside the current one, checked (hashes, schema, the device's
trusted keys when any are configured, then its test vectors on this device's runtimes) and
only then made current by renaming a temporary symlink over ``current`` (atomic: a reader
sees the old or the new link, never none). A failure leaves ``current`` untouched. The
service is restarted when systemd runs it; a failed restart switches back.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from edgekit.artifact.archive import read_artifact, sha256_file
from edgekit.errors import ArtifactError, UserError, VerificationError
from edgekit.ops.verify import VerifyReport, verify_artifact
from edgekit.trust.keys import discover_trusted_keys
from edgekit.trust.release import pin_from

CURRENT, PREVIOUS, RELEASES = "current", "previous", "releases"
KEEP = 2  # current and previous; older releases are removed after a switch
SUFFIX = ".edgekit"


@dataclass
class InstallResult:
    slot: Path
    release: Path
    previous: Path | None
    report: VerifyReport
    restarted: str  # what happened to the service, for the user


def default_name(artifact: Path) -> str:
    """The file name without ``.edgekit``, as a slot name (other characters become ``-``)."""
    stem = artifact.name[: -len(SUFFIX)] if artifact.name.endswith(SUFFIX) else artifact.stem
    return re.sub(r"[^A-Za-z0-9._-]", "-", stem).lstrip(".")[:64] or "artifact"


SLOT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def slot_path(root: Path, name: str) -> Path:
    """``root/name`` for a slot name that is one plain path component (letters, digits,
    ``.``, ``_``, ``-``; not starting with ``.``); the result never resolves outside
    ``root`` (a symlinked slot pointing elsewhere is refused too)."""
    if not isinstance(name, str) or not SLOT_NAME.fullmatch(name):
        raise UserError(f"slot name {str(name)[:80]!r}: expected one plain name of at most 64 "
                        "letters, digits, '.', '_' or '-' (not starting with '.'; no '/' "
                        "or '..')")
    base = Path(root).absolute()
    slot = base / name
    if not slot.resolve().is_relative_to(base.resolve()):
        raise UserError(f"slot {slot} resolves to {slot.resolve()}, outside the root {base}; "
                        "expected a slot inside the root")
    return slot


def link_target(link: Path) -> Path | None:
    """The release a slot link points at (absolute), or None when there is no link."""
    if not link.is_symlink():
        return None
    return (link.parent / os.readlink(link)).resolve()


def switch_link(link: Path, release: Path) -> None:
    """Point ``link`` at ``release`` atomically: a new symlink renamed over the old one."""
    tmp = link.with_name(f".{link.name}.tmp-{os.getpid()}")
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(os.path.relpath(release, link.parent))
    os.replace(tmp, link)


def install(artifact: Path, root: Path, name: str | None = None, service: str | None = None,
            backend: str | None = None) -> InstallResult:
    """Copy, check and switch to ``artifact``; raise (leaving ``current`` alone) on failure."""
    artifact = Path(artifact)
    if not artifact.is_file():
        raise ArtifactError(f"{artifact}: no such artifact file (expected a {SUFFIX} file)")
    slot = slot_path(root, name or default_name(artifact))
    releases = slot / RELEASES
    releases.mkdir(parents=True, exist_ok=True)
    release = releases / f"{sha256_file(artifact)[:16]}{SUFFIX}"
    current = link_target(slot / CURRENT)
    fresh = not release.exists()
    if fresh:
        fd, tmp = tempfile.mkstemp(prefix=".incoming-", dir=releases)
        os.close(fd)
        shutil.copyfile(artifact, tmp)
        os.replace(tmp, release)
    try:
        report = check(release, backend)
    except BaseException:
        if fresh and release != current:
            release.unlink(missing_ok=True)  # a refused release is not kept
        raise
    if current == release:
        return InstallResult(slot, release, link_target(slot / PREVIOUS), report,
                             "already current: nothing switched")
    switch_link(slot / CURRENT, release)
    if current is not None:
        switch_link(slot / PREVIOUS, current)
    restarted = restart(service)
    if restarted.startswith("failed"):
        if current is not None:
            switch_link(slot / CURRENT, current)
            restart(service)
        raise UserError(f"{service} did not restart on {release.name} ({restarted}); "
                        f"switched back to {current.name if current else 'nothing'}")
    prune(slot)
    return InstallResult(slot, release, current, report, restarted)


def check(release: Path, backend: str | None = None) -> VerifyReport:
    """Hashes and schema, the trusted keys (when the device has any), then the test vectors."""
    artifact = read_artifact(release, discover_trusted_keys(), pin_from())
    report = verify_artifact(artifact, backend=backend)
    if not report.passed:
        raise VerificationError(
            f"{release.name}: its test vectors did not reproduce on this device:\n"
            + "\n".join(report.lines()))
    return report


def rollback(root: Path, name: str, service: str | None = None) -> tuple[Path, Path]:
    """Swap ``current`` and ``previous``; returns (now current, now previous)."""
    slot = slot_path(root, name)
    current, previous = link_target(slot / CURRENT), link_target(slot / PREVIOUS)
    if current is None:
        raise UserError(f"{slot}: nothing installed (no {CURRENT} link); expected a slot made "
                        "by edgekit install")
    if previous is None or not previous.is_file():
        raise UserError(f"{slot}: no previous release to roll back to (current is "
                        f"{current.name})")
    switch_link(slot / CURRENT, previous)
    switch_link(slot / PREVIOUS, current)
    restarted = restart(service)
    if restarted.startswith("failed"):
        raise UserError(f"rolled back to {previous.name} but {service} did not restart: "
                        f"{restarted}")
    return previous, current


def prune(slot: Path) -> None:
    keep = {link_target(slot / CURRENT), link_target(slot / PREVIOUS)}
    for old in (slot / RELEASES).glob(f"*{SUFFIX}"):
        if old.resolve() not in keep:
            old.unlink(missing_ok=True)


def restart(service: str | None) -> str:
    """Restart ``service`` if systemd runs here and the unit is active (``try-restart``)."""
    if not service:
        return "no service named"
    systemctl = shutil.which("systemctl")
    if systemctl is None or not os.path.isdir("/run/systemd/system"):  # sd_booted()
        return "no systemd here: service not restarted"
    argv = [systemctl, "try-restart", service]
    if os.geteuid() != 0:
        argv = ["sudo", "-n", *argv]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        return f"failed: {' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()[:300]}"
    return f"{service} restarted (if it was running)"

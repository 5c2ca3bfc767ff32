"""Assemble a bundle: artifacts, wheels, pinned requirements, install.sh, systemd units,
README and ``BUNDLE.sha256``; write it as a folder or a reproducible ``.tar.gz``.

Reproducible: every member's bytes depend only on the inputs; the tarball lists members
sorted, with a fixed mtime, uid/gid 0 and no user names, in a gzip stream without a name or
a timestamp.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import shutil
import tarfile
import tempfile
from pathlib import Path

from edgekit.converters.bundle.wheels import SOURCE_DATE_EPOCH, Wheel

from edgekit.errors import InternalError, UserError

TEMPLATES = Path(__file__).resolve().with_name("templates")
MANIFEST = "BUNDLE.sha256"
EXECUTABLE = ("install.sh",)
TAR_SUFFIX = ".tar.gz"


def artifact_name(path: Path) -> str:
    """The slot an artifact installs into on the device: its file name without .edgekit."""
    return path.name[: -len(".edgekit")] if path.name.endswith(".edgekit") else path.stem


def requirements_text(wheels: list[Wheel]) -> str:
    lines = ["# Every wheel in wheels/, pinned by sha256: pip install --require-hashes refuses",
             "# any other file. Written by edgekit bundle."]
    lines += [f"{w.name}=={w.version} --hash=sha256:{w.sha256}"
              for w in sorted(wheels, key=lambda w: w.name.lower())]
    return "\n".join(lines) + "\n"


def unit_text(example: Path, name: str) -> str:
    """The example's systemd unit, run from the installed prefix on the artifact's
    ``current`` link. ``@PREFIX@`` and ``@USER@`` are filled in by install.sh."""
    text = example.read_text()
    body = text[text.index("[Unit]"):]
    body = body.replace("YOUR_USER", "@USER@")
    body = body.replace("/home/@USER@/edgekit-classify", "@PREFIX@/service")
    body, count = re.subn(r"ExecStart=\S+ classify_service\.py --model \S+",
                          f"ExecStart=@PREFIX@/venv/bin/python @PREFIX@/service/"
                          f"classify_service.py --model @PREFIX@/{name}/current", body)
    if count != 1:
        raise InternalError(f"{example}: expected one 'ExecStart=... classify_service.py "
                            "--model ...' line to parameterise")
    body = re.sub(r"^Description=(.*)$", rf"Description=\1 [{name}]", body, count=1,
                  flags=re.MULTILINE)
    header = (f"# systemd unit for the artifact {name!r}, installed by install.sh (edgekit bundle)\n"
              f"# from examples/raspberrypi/edgekit-classify.service. It runs the model that\n"
              f"# @PREFIX@/{name}/current points at: `edgekit install` switches that link and\n"
              f"# restarts this unit; `edgekit rollback {name}` switches back.\n"
              f"# Logs:  journalctl -u edgekit-{name} -f\n\n")
    return header + body


def template(name: str, **values: str) -> str:
    text = (TEMPLATES / name).read_text()
    for key, value in values.items():
        text = text.replace(f"@{key}@", value)
    leftover = re.findall(r"@[A-Z_]+@", text)
    allowed = {"@PREFIX@", "@USER@"}
    if set(leftover) - allowed:
        raise InternalError(f"template {name}: unfilled {sorted(set(leftover) - allowed)}")
    return text


def manifest_text(files: dict[str, bytes]) -> str:
    """sha256sum's format, sorted: ``sha256sum -c BUNDLE.sha256`` checks the bundle."""
    return "".join(f"{hashlib.sha256(data).hexdigest()}  {rel}\n"
                   for rel, data in sorted(files.items()))


def write_bundle(files: dict[str, bytes], out: Path, force: bool) -> Path:
    """Write the members (plus BUNDLE.sha256) to ``out``: a folder, or a tarball when ``out``
    ends in .tar.gz. Written beside and renamed: a bundle appears whole or not at all."""
    files = dict(files)
    files[MANIFEST] = manifest_text(files).encode()
    out = out.absolute()
    if out.exists() and not force:
        raise UserError(f"{out} exists; expected a new path (or --force to replace it)")
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.name.endswith(TAR_SUFFIX):
        top = out.name[: -len(TAR_SUFFIX)]
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}-", dir=out.parent)
        with os.fdopen(fd, "wb") as raw:
            raw.write(tarball(files, top))
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
        return out
    tmp_dir = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        for rel, data in files.items():
            dest = tmp_dir / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            os.chmod(dest, 0o755 if rel in EXECUTABLE else 0o644)
        os.chmod(tmp_dir, 0o755)
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        os.replace(tmp_dir, out)
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise
    return out


def tarball(files: dict[str, bytes], top: str) -> bytes:
    """A .tar.gz of ``files`` under ``top/``, byte-for-byte the same for the same files."""
    dirs = {top}
    for rel in files:
        parts = rel.split("/")[:-1]
        dirs.update("/".join([top, *parts[: i + 1]]) for i in range(len(parts)))
    entries: list[tuple[str, bytes | None]] = [(d, None) for d in dirs]
    entries += [(f"{top}/{rel}", data) for rel, data in files.items()]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in sorted(entries):
            info = tarfile.TarInfo(name)
            info.mtime = SOURCE_DATE_EPOCH
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size = len(data)
                info.mode = 0o755 if name.endswith(tuple(f"/{e}" for e in EXECUTABLE)) else 0o644
                tar.addfile(info, io.BytesIO(data))
    packed = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=packed, mtime=0, compresslevel=9) as gz:
        gz.write(buffer.getvalue())
    return packed.getvalue()

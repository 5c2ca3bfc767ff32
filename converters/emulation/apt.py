"""Debian packages for a foreign architecture, fetched with a private APT configuration.

Nothing here runs under emulation and the host's dpkg is never touched: APT gets its own
sources list, lists folder, archive cache and an *empty* dpkg status file (so it resolves
the whole dependency closure), downloads only, and each ``.deb`` is unpacked with
``dpkg-deb -x``. Maintainer scripts never run; the few things they would do that matter
(none for python3.11 so far) are fixed up by the builder.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from edgekit.errors import InternalError, UserError

DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SECURITY = "http://deb.debian.org/debian-security"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
HOST_SOURCES = ("/etc/apt/sources.list", "/etc/apt/sources.list.d")

_INST = re.compile(r"^Inst (\S+) (?:\[\S+\] )?\((\S+) .*\[(\S+)\]\)")


def _source_uris(paths: tuple[str, ...] = HOST_SOURCES) -> list[str]:
    """Every URI in the host's one-line (.list) and deb822 (.sources) APT sources."""
    files: list[Path] = []
    for entry in map(Path, paths):
        if entry.is_dir():
            files += sorted(p for p in entry.iterdir() if p.suffix in (".list", ".sources"))
        elif entry.is_file():
            files.append(entry)
    uris: list[str] = []
    for path in files:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if path.suffix == ".sources" and line.lower().startswith("uris:"):
                uris += line.split(":", 1)[1].split()
            elif line.startswith("deb "):
                # deb [options] URI suite components...
                words = re.sub(r"\[[^]]*\]", " ", line).split()
                if len(words) >= 2:
                    uris.append(words[1])
    return uris


def debian_mirrors(paths: tuple[str, ...] = HOST_SOURCES) -> tuple[str, str]:
    """(archive, security) mirror URIs: the host's Debian mirrors when it has them (so the
    download goes where the machine's apt already goes), else deb.debian.org.
    ``$EDGEKIT_DEBIAN_MIRROR`` overrides the archive mirror."""
    uris = [u.rstrip("/") for u in _source_uris(paths)]
    security = next((u for u in uris if u.endswith("/debian-security")), DEFAULT_SECURITY)
    archive = next((u for u in uris if u.endswith("/debian")), DEFAULT_MIRROR)
    return os.environ.get("EDGEKIT_DEBIAN_MIRROR", archive).rstrip("/"), security


class PrivateApt:
    """An APT instance of its own under ``home``, for one architecture and suite.

    ``home`` persists between builds (lists and downloaded .debs are reused); it never
    holds anything the host's APT reads.
    """

    def __init__(self, home: Path, arch: str, suite: str) -> None:
        for tool in ("apt-get", "dpkg-deb"):
            if shutil.which(tool) is None:
                raise UserError(
                    f"building the emulation sysroot needs {tool!r} (a Debian or Ubuntu host); "
                    "it is not on PATH"
                )
        if not os.path.isfile(KEYRING):
            raise UserError(
                f"expected Debian's archive keyring at {KEYRING} to check {suite} packages; "
                "install it: apt-get install debian-archive-keyring"
            )
        self.home = home
        self.arch = arch
        self.suite = suite
        self.archives = home / "archives"
        for sub in ("etc/apt.conf.d", "etc/preferences.d", "etc/sources.list.d",
                    "lists/partial", "archives/partial", "state"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        # Empty status: APT believes nothing is installed and resolves every dependency.
        (home / "state" / "status").write_text("")
        archive, security = debian_mirrors()
        self.mirrors = (archive, security)
        signed = f"[arch={arch} signed-by={KEYRING}]"
        (home / "etc" / "sources.list").write_text(
            f"deb {signed} {archive} {suite} main\n"
            f"deb {signed} {archive} {suite}-updates main\n"
            f"deb {signed} {security} {suite}-security main\n"
        )
        # Every Dir points inside home, so neither the host's apt.conf.d (whose hooks
        # could delete archives) nor its dpkg status or lists take part.
        config = {
            "Dir": "/",
            "Dir::Etc": f"{home}/etc",
            "Dir::Etc::main": f"{home}/etc/apt.conf",
            "Dir::Etc::Parts": f"{home}/etc/apt.conf.d",
            "Dir::Etc::SourceList": f"{home}/etc/sources.list",
            "Dir::Etc::SourceParts": f"{home}/etc/sources.list.d",
            "Dir::Etc::PreferencesParts": f"{home}/etc/preferences.d",
            "Dir::Etc::TrustedParts": "/etc/apt/trusted.gpg.d",
            "Dir::State": f"{home}/state",
            "Dir::State::Lists": f"{home}/lists",
            "Dir::State::status": f"{home}/state/status",
            "Dir::Cache": f"{home}/cache",
            "Dir::Cache::Archives": str(self.archives),
            "APT::Architecture": arch,
            "APT::Install-Recommends": "false",
            "APT::Sandbox::User": "root" if os.geteuid() == 0 else "",
            "Acquire::Languages": "none",
            "Debug::NoLocking": "true",
        }
        lines = [f'{k} "{v}";' for k, v in config.items() if v]
        lines.append(f'APT::Architectures {{ "{arch}"; }};')
        self.config_file = home / "apt.conf"
        self.config_file.write_text("\n".join(lines) + "\n")
        (home / "etc" / "apt.conf").write_text("")

    def _apt(self, *args: str) -> str:
        env = dict(os.environ, APT_CONFIG=str(self.config_file), DEBIAN_FRONTEND="noninteractive",
                   LC_ALL="C")
        proc = subprocess.run(["apt-get", "-q", "-y", *args], env=env, capture_output=True,
                              text=True)
        if proc.returncode != 0:
            raise UserError(
                f"apt-get {' '.join(args[:2])} for {self.arch} failed (exit {proc.returncode}) "
                f"using mirrors {', '.join(self.mirrors)}:\n{proc.stderr.strip() or proc.stdout}"
            )
        return proc.stdout

    def update(self) -> None:
        self._apt("update")

    def resolve(self, packages: tuple[str, ...]) -> list[tuple[str, str, str]]:
        """(name, version, arch) of every package needed, from a simulated install."""
        out = self._apt("install", "-s", *packages)
        found = [m.groups() for m in map(_INST.match, out.splitlines()) if m]
        if not found:
            raise InternalError(f"apt-get -s install {' '.join(packages)} listed no packages:\n{out}")
        return found

    def download(self, packages: tuple[str, ...]) -> list[Path]:
        """Download the closure of ``packages``; return the .deb files, one per package."""
        wanted = self.resolve(packages)
        self._apt("install", "--download-only", *packages)
        debs = []
        for name, version, arch in wanted:
            deb = self.archives / f"{name}_{version.replace(':', '%3a')}_{arch}.deb"
            if not deb.is_file():
                raise InternalError(f"apt downloaded {name} {version} but {deb} is missing")
            debs.append(deb)
        return debs


def extract(debs: list[Path], root: Path) -> None:
    """Unpack each .deb's data into ``root`` (no maintainer scripts, no dpkg database)."""
    root.mkdir(parents=True, exist_ok=True)

    def one(deb: Path) -> None:
        proc = subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            raise InternalError(f"dpkg-deb -x {deb.name} failed: {proc.stderr.strip()}")

    # dpkg-deb is mostly decompression: a few in parallel halve the wall time on 2 cores.
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(one, debs))

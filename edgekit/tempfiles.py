"""Temp files and folders that an interrupted process (SIGKILL, power cut) cannot leak.

Every temp name carries the pid of the process that made it, so the next writer can tell
a live neighbour's file (kept) from a dead process's leftover (removed). Files written
through a temp file get the mode the umask gives any new file (``mkstemp`` makes 0600).
Stdlib only: the device writes artifacts too (``edgekit sign``).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from edgekit.errors import UserError

_PID_DIR = re.compile(r"(\d+)-[A-Za-z0-9_]+")


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (pid reuse can keep a leftover a while
    longer; it never removes a live one's file)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return pid < 1 << 31  # someone else's process: alive
    return True


def current_umask() -> int:
    """The process umask, read without changing it (Linux /proc), else set-and-restore."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def temp_beside(target: Path) -> tuple[int, str]:
    """A temp file in ``target``'s folder, named ``.<name>.<pid>.<random>.tmp``, with the
    umask's mode (what ``open`` would have given the final file)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp",
                                   dir=target.parent)
    except OSError as exc:  # a read-only or full folder is the user's to fix, not a bug
        raise UserError(f"cannot write {str(target)!r}: {exc.strerror or exc} in "
                        f"{str(target.parent)!r}; expected a folder this user can write "
                        "(pass another output path)") from exc
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    return fd, tmp


def replace_atomically(fd: int, tmp: str, target: Path, write: Callable[[BinaryIO], None]) -> None:
    """Write through ``fd`` (the temp file ``tmp`` beside ``target``), fsync, rename onto
    ``target``. On any error, interrupts included, the temp file goes and ``target`` is untouched."""
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def check_writable(path: str | Path, what: str, *, folder: bool = False) -> Path:
    """``UserError`` naming ``path`` unless a file can be written there the way edgekit writes
    one (a temp file beside it, then a rename): called before any work, so a read-only output
    folder costs nothing (a build used to lose its whole run to it at the very end). A missing
    folder is judged by the nearest one that exists (the writer creates the rest). ``folder``:
    ``path`` is a folder to write into, not a file. Returns ``path``."""
    path = Path(path)
    probe = path / "probe" if folder else path
    existing = probe.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UserError(f"{what} {str(path)!r}: {str(existing)!r} is a file, not a folder; "
                        "expected a path in a folder")
    try:
        fd, tmp = temp_beside(existing / probe.name)
    except UserError as exc:
        raise UserError(f"{what} {str(path)!r}: {str(existing)!r} is not writable "
                        f"({exc.__cause__.strerror if isinstance(exc.__cause__, OSError) else exc}); "
                        "expected a folder this user can write: pass another path") from exc
    os.close(fd)
    os.unlink(tmp)
    return path


def remove_stale_beside(target: Path) -> list[str]:
    """Remove the temp files of ``target`` left by dead processes; returns their names."""
    prefix = f".{target.name}."
    removed = []
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return removed
    for entry in entries:
        name = entry.name
        if not (name.startswith(prefix) and name.endswith(".tmp")):
            continue
        pid = name[len(prefix):].split(".", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)) and entry.is_file(follow_symlinks=False):
            try:
                os.unlink(entry.path)
                removed.append(name)
            except OSError:
                pass  # gone already, or not ours to remove
    return removed


def private_root(name: str) -> Path:
    """``<tmp>/<name>-<uid>``: a 0700 folder of this user's temp entries. A path there that
    is a symlink, not a folder, or someone else's is refused (shared /tmp)."""
    root = Path(tempfile.gettempdir()) / f"{name}-{os.getuid()}"
    try:
        root.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(root)
    except OSError as exc:
        raise UserError(f"temp folder {str(root)!r}: cannot create it ({exc}); expected a "
                        "writable temp directory (set TMPDIR)") from exc
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise UserError(f"temp folder {str(root)!r}: expected a folder owned by this user, got "
                        "a symlink, a file or someone else's folder (set TMPDIR)")
    return root


def clean_stale_entries(root: Path) -> list[str]:
    """Remove ``<pid>-<random>`` entries of ``root`` whose process is dead."""
    removed = []
    for entry in list(os.scandir(root)):
        match = _PID_DIR.fullmatch(entry.name)
        if match and not pid_alive(int(match.group(1))):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                try:
                    os.unlink(entry.path)
                except OSError:
                    continue
            removed.append(entry.name)
    return removed


def new_entry(root: Path) -> Path:
    """A fresh ``<pid>-<random>`` folder under ``root``, stale entries removed first."""
    clean_stale_entries(root)
    return Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=root))


def atomic_write_text(target: Path, text: str) -> Path:
    """Write ``text`` to ``target`` atomically: a temp file beside it, then a rename."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temp_beside(target)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target

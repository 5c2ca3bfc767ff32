"""Bounded, non-blocking reads of sysfs-style attribute files, for the power monitor.

A sensor file is trusted for nothing: the tree may be fake, damaged or hostile. So a read

* opens only regular files (``os.stat`` first, so a FIFO, ``/dev/zero`` or ``/dev/watchdog``
  is never even opened; ``fstat`` after the open catches a swap in between), with
  ``O_NONBLOCK`` so that nothing can make ``open`` or ``read`` wait;
* reads at most :data:`MAX_ATTRIBUTE_BYTES` bytes (a sysfs attribute is at most one page;
  a longer file is not a sensor value and is refused, not read whole);
* gives up after :data:`READ_TIMEOUT_S` where a caller must never stall
  (:func:`read_text_within`: ``proc/stat`` for the tuner);
* turns every failure (missing, EACCES, ELOOP from a symlink loop, EIO from a flaky driver,
  bad UTF-8) into ``None``, meaning "unknown".

Numbers are parsed the same way: anything that is not a finite float (``nan``, ``inf``,
``1e400``) is ``None``. Listings are capped (:data:`MAX_ENTRIES`) and sorted so that
numbered entries come in numeric order (``thermal_zone2`` before ``thermal_zone10``); the cap keeps the first ones.
"""

from __future__ import annotations

import fnmatch
import glob
import math
import os
import stat
import threading

from edgekit.device.timed_run import TimedRunner

MAX_ATTRIBUTE_BYTES = 4096  # one page: the most a sysfs show() callback may print
READ_TIMEOUT_S = 1.0  # a local file answers in microseconds; a stalled mount never does
MAX_ENTRIES = 256  # zones, cpus, supplies per listing; boards have a few, servers tens
_OPEN_FLAGS = (os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
               | getattr(os, "O_CLOEXEC", 0))


def read_text(path: str, limit: int = MAX_ATTRIBUTE_BYTES) -> str | None:
    """The stripped text of a regular file of at most ``limit`` bytes, else ``None``
    (read in chunks: procfs hands out a large file a page or so per ``read``)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        fd = os.open(path, _OPEN_FLAGS)
    except (OSError, ValueError):  # ValueError: a NUL byte in a crafted name
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced between stat and open
            return None
        parts: list[bytes] = []
        got = 0
        while got <= limit and (chunk := os.read(fd, limit + 1 - got)):
            parts.append(chunk)
            got += len(chunk)
        data = b"".join(parts)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > limit:
        return None
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError:
        return None


_RUNNER = TimedRunner()  # one helper thread for reads that must not stall their caller
_RUNNER_LOCK = threading.Lock()


def read_text_within(path: str, limit: int = MAX_ATTRIBUTE_BYTES,
                     timeout_s: float = READ_TIMEOUT_S) -> str | None:
    """:func:`read_text` that gives up after ``timeout_s`` (``None``): a regular file on a
    hung FUSE or NFS mount can block ``read`` itself, which no flag prevents. The read is
    left to finish on its abandoned helper thread."""
    with _RUNNER_LOCK:
        try:
            return _RUNNER.call(lambda p: read_text(p, limit), path, timeout_s)
        except TimeoutError:
            return None


def finite(text: str | None) -> float | None:
    """``text`` as a finite float; ``None`` for missing, garbage, nan, inf or overflow."""
    if text is None:
        return None
    try:
        value = float(text)
    except (ValueError, OverflowError):
        return None
    return value if math.isfinite(value) else None


def natural_sort(paths: list[str]) -> None:
    """Sort in place, shorter first and then by text, which orders the kernel's numbered
    entries by number (zone2 < zone10). Two stable C-level sorts: no per-item Python key."""
    paths.sort()
    paths.sort(key=len)


def entries(root: str, pattern: str, limit: int | None = None) -> tuple[list[str], int]:
    """(paths matching ``pattern`` under ``root``, in :func:`natural_sort` order, at most
    ``limit`` (default :data:`MAX_ENTRIES`); how many were left out). A listing error
    (missing folder, EACCES, a symlink loop) is an empty result, never an exception."""
    limit = MAX_ENTRIES if limit is None else limit
    folder, name = os.path.split(os.path.join(root, pattern))
    try:
        if glob.has_magic(folder):
            found = glob.glob(os.path.join(folder, name))
        else:  # the common case: one listing matched in C, joined only for what is kept
            names = [n for n in fnmatch.filter(os.listdir(folder), name)
                     if not n.startswith(".")]
            natural_sort(names)
            kept = [os.path.join(folder, n) for n in names[:limit]]
            return kept, max(0, len(names) - limit)
    except (OSError, ValueError, RecursionError):
        return [], 0
    natural_sort(found)
    return found[:limit], max(0, len(found) - limit)

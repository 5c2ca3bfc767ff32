"""Who built an artifact: edgekit's version and, from a source checkout, its git commit.

Recorded in the manifest (``builder``) so an artifact says which code made it: the version
alone said "0.1.0" for every build of rounds 1 and 2. The commit is found only when the
converters run from a git work tree (an editable install or a clone); an installed wheel has
none, and the field is then null. ``dirty``: the tree had changes not committed, so the
commit alone does not reproduce the build.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import Any

import edgekit

GIT_TIMEOUT_S = 5.0


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):  # no git here, or a hung file system
        return None


@functools.lru_cache(maxsize=1)
def builder() -> dict[str, Any]:
    """``{"version", "commit", "dirty"}`` of this edgekit (commit and dirty None outside git)."""
    folder = Path(__file__).resolve().parent
    head = _git(folder, "rev-parse", "HEAD")
    commit = head.stdout.strip() if head is not None and head.returncode == 0 else None
    dirty = None
    if commit:
        status = _git(folder, "status", "--porcelain", "--untracked-files=no")
        dirty = bool(status.stdout.strip()) if status is not None and status.returncode == 0 else None
    return {"version": edgekit.__version__, "commit": commit, "dirty": dirty}

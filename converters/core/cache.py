"""Where the host side keeps what it builds or measures: the sysroot, the host's rates.

One definition of the per-user cache folder (platformdirs: ``$XDG_CACHE_HOME/edgekit``, by
default ``~/.cache/edgekit``, on Linux) so that every cache moves together.
"""

from __future__ import annotations

from pathlib import Path

from platformdirs import user_cache_path

APP_NAME = "edgekit"


def user_cache_dir() -> Path:
    """The per-user cache folder of edgekit (not created here)."""
    return user_cache_path(APP_NAME, appauthor=False)

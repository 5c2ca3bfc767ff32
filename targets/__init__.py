"""Target profiles: one TOML file per board, loaded and validated here.

    >>> from edgekit.targets import load_profile, list_profiles
    >>> load_profile("rpi4").cpu.core
    'cortex-a72'

Light on purpose (stdlib only): the on-device runtime reads profiles too.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import os
import platform
import tomllib
from pathlib import Path
from typing import Any

from edgekit.targets.schema import PowerModel, Profile, validate

from edgekit.errors import TargetError

__all__ = ["PROFILE_DIR", "PowerModel", "Profile", "list_profiles", "load_profile",
           "profile_from_dict"]

PROFILE_DIR = Path(__file__).resolve().parent


def list_profiles() -> list[str]:
    """Names of every bundled profile, sorted."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.toml"))


def _resolve_native(data: dict[str, Any]) -> None:
    cpu = data["cpu"]
    if cpu["arch"] == "native":
        cpu["arch"] = platform.machine() or "unknown"
    if cpu["core"] == "native":
        cpu["core"] = platform.processor() or cpu["arch"]
    if cpu["isa"] == "native":
        cpu["isa"] = cpu["arch"]
    if cpu["cores"] == 0:
        cpu["cores"] = os.cpu_count() or 1


def profile_from_dict(data: dict[str, Any], origin: str = "<dict>") -> Profile:
    """Validate a profile given as a dict (for example the copy inside a manifest)."""
    problems = validate(data, origin)
    if problems:  # before resolving: native values must be checked as written
        raise TargetError("invalid target profile:\n  " + "\n  ".join(problems))
    resolved = copy.deepcopy(data)
    _resolve_native(resolved)
    digest = hashlib.sha256(json.dumps(resolved, sort_keys=True).encode()).hexdigest()
    return Profile.from_dict(resolved, origin, sha256=digest)


def load_profile(name_or_path: str | os.PathLike[str]) -> Profile:
    """Load a bundled profile by name (``rpi4``) or a profile TOML file by path."""
    text = str(name_or_path)
    path = Path(text)
    if not (text.endswith(".toml") and path.is_file()):
        path = PROFILE_DIR / f"{text.lower()}.toml"  # --target RPI4 means rpi4
        if not path.is_file():
            close = difflib.get_close_matches(text.lower(), list_profiles(), n=1)
            raise TargetError(
                f"unknown target {text!r}"
                + (f" (did you mean {close[0]!r}?)" if close else "")
                + f"; allowed: {', '.join(list_profiles())} (or a path to a profile .toml)"
            )
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise TargetError(f"{path}: not valid TOML: {exc}") from exc
    profile = profile_from_dict(data, origin=str(path))
    if path.parent == PROFILE_DIR and profile.name != path.stem:
        raise TargetError(f"{path}: name = {profile.name!r} must match the file name {path.stem!r}")
    return profile

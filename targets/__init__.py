"""Target profiles: one TOML file per board, loaded and validated here.

    >>> from edgekit.targets import load_profile, list_profiles
    >>> load_profile("rpi4").cpu["core"]
    'cortex-a72'

Light on purpose (stdlib only): the on-device runtime reads profiles too.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import platform
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgekit.targets.schema import validate

from edgekit.errors import TargetError

PROFILE_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Profile:
    """A validated target profile. ``data`` is the TOML content with native values resolved."""

    name: str
    data: dict[str, Any] = field(repr=False)
    sha256: str = field(repr=False)
    path: str = field(default="", repr=False)

    def __getattr__(self, section: str) -> dict[str, Any]:
        # Sections read like attributes: profile.cpu["cores"], profile.budgets["ram_mb"].
        data = object.__getattribute__(self, "data")
        if section in data and isinstance(data[section], dict):
            return data[section]
        raise AttributeError(section)

    @property
    def description(self) -> str:
        return self.data["description"]

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self.data)

    @property
    def threads(self) -> int:
        """Thread count the profile recommends (resolved against this process for native)."""
        return int(self.data["runtime"]["threads"]) or self.data["cpu"]["cores"]

    @property
    def power_per_core_w(self) -> float:
        power = self.data["power"]
        return (power["full_load_w"] - power["idle_w"]) / max(1, self.data["cpu"]["cores"])


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
    if problems:
        raise TargetError("invalid target profile:\n  " + "\n  ".join(problems))
    resolved = copy.deepcopy(data)
    _resolve_native(resolved)
    digest = hashlib.sha256(json.dumps(resolved, sort_keys=True).encode()).hexdigest()
    return Profile(name=resolved["name"], data=resolved, sha256=digest, path=origin)


def load_profile(name_or_path: str | os.PathLike[str]) -> Profile:
    """Load a bundled profile by name (``rpi4``) or a profile TOML file by path."""
    text = str(name_or_path)
    path = Path(text)
    if not (text.endswith(".toml") and path.is_file()):
        path = PROFILE_DIR / f"{text}.toml"
        if not path.is_file():
            raise TargetError(
                f"unknown target {text!r}; allowed: {', '.join(list_profiles())} "
                "(or a path to a profile .toml)"
            )
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise TargetError(f"{path}: not valid TOML: {exc}") from exc
    profile = profile_from_dict(data, origin=str(path))
    if path.parent == PROFILE_DIR and profile.name != path.stem:
        raise TargetError(f"{path}: name = {profile.name!r} must match the file name {path.stem!r}")
    return profile

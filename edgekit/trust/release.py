"""What a signature binds besides the members' hashes: the release (target, version, time).

A signature over the manifest already covers the target's name, but a genuinely signed
artifact for another board, or an older release with a known bug, would still verify on any
device trusting the key (a replay). So signing adds a ``release`` section to the manifest
before it is signed::

    "release": {"target": "rpi4", "version": 7, "built": "2026-12-05T16:00:00Z"}

``version`` is the publisher's release number (an int that only grows: ``edgekit sign
--release-version N``), ``built`` the UTC time of signing. A device pins what it accepts
(:class:`Pin`: ``edgekit.load(pin=...)``, ``edgekit verify --pin-target/--min-release``, or
``$EDGEKIT_PIN_TARGET``, ``$EDGEKIT_MIN_RELEASE``, ``$EDGEKIT_NOT_BEFORE``): another target,
a release below ``min_version`` or built before ``not_before`` is refused. When trusted keys
are configured a signed manifest must carry the section (its target equal to the manifest's):
a signature without it cannot be pinned, so it fails closed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from edgekit.errors import ArtifactError, SigningKeyError, UntrustedArtifactError

RELEASE_FIELD = "release"
ENV_PIN_TARGET = "EDGEKIT_PIN_TARGET"
ENV_MIN_RELEASE = "EDGEKIT_MIN_RELEASE"
ENV_NOT_BEFORE = "EDGEKIT_NOT_BEFORE"
MAX_VERSION = (1 << 53) - 1  # a JSON number every parser reads exactly
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")


@dataclass(frozen=True)
class Release:
    """The manifest's ``release`` section, typed."""

    target: str
    version: int
    built: datetime

    def describe(self) -> str:
        return f"release {self.version} for {self.target}, built {format_time(self.built)}"


@dataclass(frozen=True)
class Pin:
    """What this device accepts: only ``target``, releases >= ``min_version``, built at or
    after ``not_before`` (each None: not pinned)."""

    target: str | None = None
    min_version: int | None = None
    not_before: datetime | None = None

    @property
    def active(self) -> bool:
        return (self.target, self.min_version, self.not_before) != (None, None, None)


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str, what: str, error: type[Exception] = ArtifactError) -> datetime:
    """``YYYY-MM-DDTHH:MM:SSZ`` (UTC) as an aware datetime, else ``error`` naming ``what``."""
    if not isinstance(text, str) or not _TIME.fullmatch(text):
        raise error(f"{what}: expected a UTC time YYYY-MM-DDTHH:MM:SSZ, got {str(text)[:40]!r}")
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError as exc:
        raise error(f"{what}: expected a valid UTC time, got {text!r} ({exc})") from exc


def release_section(target: str, version: int, built: datetime | None = None) -> dict[str, Any]:
    """The ``release`` section signing adds (``built`` defaults to now)."""
    check_version(version, "release version", SigningKeyError)
    return {"target": target, "version": int(version),
            "built": format_time(built or datetime.now(UTC))}


def check_version(value: Any, what: str, error: type[Exception] = ArtifactError) -> int:
    if type(value) is not int or not 0 <= value <= MAX_VERSION:
        raise error(f"{what}: expected an integer in [0, {MAX_VERSION}], got {str(value)[:40]!r}")
    return value


def parse_release(data: Mapping[str, Any], origin: str) -> Release | None:
    """The ``release`` section of a parsed manifest (None when absent); a malformed one is an
    ``ArtifactError`` naming the field."""
    section = data.get(RELEASE_FIELD)
    if section is None:
        return None
    where = f"{origin}: {RELEASE_FIELD}"
    if not isinstance(section, Mapping) or set(section) != {"target", "version", "built"}:
        raise ArtifactError(f"{where}: expected an object with target, version and built, got "
                            f"{str(section)[:80]!r}")
    if not isinstance(section["target"], str) or not section["target"]:
        raise ArtifactError(f"{where}.target: expected a target name, got "
                            f"{str(section['target'])[:40]!r}")
    return Release(section["target"], check_version(section["version"], f"{where}.version"),
                   parse_time(section["built"], f"{where}.built"))


def pin_from(explicit: Pin | None = None, environ: Mapping[str, str] | None = None) -> Pin:
    """``explicit`` merged over the environment's pins (explicit fields win)."""
    environ = os.environ if environ is None else environ
    target = environ.get(ENV_PIN_TARGET) or None
    version_text = environ.get(ENV_MIN_RELEASE, "").strip()
    version = None
    if version_text:
        if not version_text.isascii() or not version_text.isdigit():
            raise SigningKeyError(f"${ENV_MIN_RELEASE}: expected a release number >= 0, got "
                                  f"{version_text[:40]!r}")
        version = check_version(int(version_text), f"${ENV_MIN_RELEASE}", SigningKeyError)
    not_before_text = environ.get(ENV_NOT_BEFORE, "").strip()
    not_before = (parse_time(not_before_text, f"${ENV_NOT_BEFORE}", SigningKeyError)
                  if not_before_text else None)
    explicit = explicit or Pin()
    return Pin(explicit.target or target,
               explicit.min_version if explicit.min_version is not None else version,
               explicit.not_before or not_before)


def check_release(release: Release | None, target: str, signed: bool, trusted: bool,
                  pin: Pin, origin: str) -> None:
    """Refuse what the pins or the binding rule out (``UntrustedArtifactError``)."""
    if release is not None and release.target != target:
        raise UntrustedArtifactError(
            f"{origin}: the release section names target {release.target!r}, the manifest "
            f"{target!r}; expected the same board (a signature binds one target)")
    if signed and trusted and release is None:
        raise UntrustedArtifactError(
            f"{origin}: signed without a release section (target, version, build time); "
            "expected an artifact signed by this edgekit (edgekit sign), so that a device "
            "can refuse replays of other targets' or older releases")
    if not pin.active:
        return
    if pin.target is not None and target != pin.target:
        raise UntrustedArtifactError(f"{origin}: built for target {target!r}; this device is "
                                     f"pinned to {pin.target!r}")
    if release is None:
        raise UntrustedArtifactError(
            f"{origin}: has no release section; this device pins releases (min version "
            f"{pin.min_version}, not before {pin.not_before}): expected a signed release")
    if pin.min_version is not None and release.version < pin.min_version:
        raise UntrustedArtifactError(f"{origin}: {release.describe()}; this device accepts "
                                     f"release {pin.min_version} or newer")
    if pin.not_before is not None and release.built < pin.not_before:
        raise UntrustedArtifactError(f"{origin}: {release.describe()}; this device accepts "
                                     f"releases built from {format_time(pin.not_before)} on")

"""Memory bounded by the target's RAM, checked from declared sizes before anything is
inflated or allocated.

An artifact's zip directory, its ONNX value infos and its .tflite tensor table all state
sizes before any byte is spent on them. A board with R bytes of RAM (the profile's
``memory.default_ram_mb``: the variant builds are sized for; this machine's RAM where the
profile does not know) can never run a model whose members or one tensor need more than
half of it (the model's bytes are held by Python and by the runtime, next to the OS), so
such an artifact is refused up front with a ``ResourceLimitError`` naming the member or
tensor: a 15 MB file inflating two members to 1 GiB each, or a 0.12 MB .tflite declaring an
8 GiB activation, costs nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from edgekit.errors import ResourceLimitError
from edgekit.targets import Profile

RAM_SHARE = 2  # members, or one tensor, may take at most 1/RAM_SHARE of the board's RAM


def machine_ram_bytes() -> int:
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 1 << 30


def ram_bytes(profile: Profile) -> int:
    """The board's RAM: the profile's default variant, else this machine's."""
    known = profile.memory.default_ram_mb or min((m for m in profile.memory.ram_mb if m > 0),
                                                 default=0)
    return int(known) << 20 if known > 0 else machine_ram_bytes()


def allowance(profile: Profile) -> int:
    return ram_bytes(profile) // RAM_SHARE


def check_members(sizes: dict[str, int], profile: Profile, origin: str) -> None:
    """The members' declared inflated sizes together within the allowance."""
    total = sum(sizes.values())
    limit = allowance(profile)
    if total > limit:
        largest = max(sizes, key=lambda name: sizes[name])
        raise ResourceLimitError(
            f"{origin}: members declare {total} bytes inflated (largest {largest!r}, "
            f"{sizes[largest]} bytes); expected at most {limit} bytes, half the "
            f"{ram_bytes(profile) >> 20} MB of RAM of target {profile.name!r}")


def check_tensors(tensors: Iterable[tuple[str, int]], profile: Profile, origin: str) -> None:
    """Every declared tensor (name, bytes) within the allowance, checked before the
    runtime allocates it."""
    limit = allowance(profile)
    for name, size in tensors:
        if size > limit:
            raise ResourceLimitError(
                f"{origin}: tensor {name!r} declares {size} bytes; expected at most {limit} "
                f"bytes, half the {ram_bytes(profile) >> 20} MB of RAM of target "
                f"{profile.name!r} (nothing was allocated)")

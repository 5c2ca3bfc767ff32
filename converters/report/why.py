"""Why a layer runs wider than int8, from what the build recorded: the accuracy guard's
sensitivity ranking (search), the guard's chosen attempt (plain builds), the user's
``--keep-float``, the latency objective's faster layers. A layer the build has no reason for gets none (no guessing)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

GUARD = ("kept wide by the accuracy guard: int8 missed the accuracy budget and this layer "
         "was among the most sensitive")
USER = "kept float by the user (--keep-float)"
SPEED = "kept float for speed (--objective latency): faster than int8 on the target"


def wide_reasons(guard: Mapping[str, Any] | None, user_keep_float: Iterable[str] = (),
                 kept_float: Iterable[str] = (), for_speed: Iterable[str] = ()) -> dict[str, str]:
    """Node name -> why it is not int8. ``kept_float``: every node the shipped quantization
    left float on purpose (``quantization.keep_float``: the user's, the guard's and those
    ``for_speed``, ``precision_speed.layers.float``)."""
    reasons = {name: USER for name in user_keep_float}
    reasons.update((name, SPEED) for name in for_speed if name not in reasons)
    guard = guard or {}
    for layer in guard.get("layers") or []:  # the search's guard: a measured reason per tensor
        for node in layer.get("nodes") or []:
            reasons.setdefault(node, f"accuracy guard: {layer.get('reason') or GUARD}")
    for node in [*(guard.get("keep_float") or []), *kept_float]:
        reasons.setdefault(node, GUARD)
    return reasons

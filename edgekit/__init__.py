"""edgekit: run int8 models on small devices, sized to their budgets.

On the device only numpy and one runtime are needed::

    import edgekit
    m = edgekit.load("model.edgekit")
    y = m.predict(x)

This module must stay light: it never imports onnx, torch or edgekit.converters.
"""

from __future__ import annotations

from os import PathLike
from typing import TYPE_CHECKING, Any

from edgekit.errors import (
    ArtifactError,
    EdgekitError,
    InputError,
    InternalError,
    UserError,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from edgekit.adapt.policy import TunerOptions
    from edgekit.model import Model
    from edgekit.trust.keys import KeySpec
    from edgekit.trust.release import Pin

__version__ = "0.3.0"  # setup.py reads it: bump with each release (round 3)

__all__ = [
    "ArtifactError",
    "EdgekitError",
    "InputError",
    "InternalError",
    "Model",
    "UserError",
    "__version__",
    "load",
]


def load(path: str | PathLike[str], backend: str | None = None, threads: int | str = 0,
         *, policy: str = "balanced", allow_spinning: bool = True, power_root: str = "/",
         tuner: TunerOptions | dict[str, Any] | None = None, monitor_interval_s: float = 2.0,
         max_batch: int = 8, max_wait_ms: float | None = None, queue_size: int = 1024,
         power_aware: bool = True, allow_nonfinite: bool = False,
         run_timeout_s: float | None = None, drift_threshold: float = 0.01,
         power_sensor: str = "auto", exact_int8: bool = True,
         trusted_keys: Iterable[KeySpec] | KeySpec | None = None,
         pin: Pin | None = None) -> Model:
    """Load a ``.edgekit`` artifact and return a ready :class:`edgekit.model.Model`.

    ``backend`` forces a runtime (``onnxruntime``, ``litert``, ``tflite-runtime``); by
    default the first installed one in the target profile's order. ``threads`` is a fixed
    count (0 = runtime default) or ``"auto"`` (measured at load, re-tuned on power, load
    and latency changes; ``policy`` = ``"balanced"`` | ``"latency"`` | ``"efficiency"``;
    ``tuner``: ``TunerOptions`` or a dict of its fields). ``allow_spinning``: onnxruntime
    spin-waits between ops (off for ``efficiency``). ``power_root``: where sysfs and proc
    are. For ``submit``: ``max_batch``, ``max_wait_ms``, ``queue_size``, ``power_aware``,
    ``run_timeout_s``. ``allow_nonfinite``: run NaN / inf inputs instead of raising.
    ``drift_threshold``: warn when inputs clip (outputs saturate) this much more than at
    build. ``power_sensor``: "auto", "none", "vcgencmd" or "hwmon:NAME" (measured energy).
    ``exact_int8=False``: on x86 without VNNI, an int8 ONNX model runs fused (fast, a few
    steps off the board) instead of unfused (exact, about 4x slower).
    ``trusted_keys``: public key files, folders of ``*.pub`` files or ``PublicKey``
    objects; with those of ``$EDGEKIT_TRUSTED_KEYS`` and the device's trusted-key folders
    (``edgekit.trust.keys``) they are the keys trusted to sign artifacts. When any key is
    configured, an unsigned artifact or one signed by another key is refused
    (``UntrustedArtifactError``); a signature that does not match is a ``SignatureError``.
    ``pin``: the releases this device accepts (``edgekit.trust.release.Pin``: target, oldest
    release version and build time; also from ``$EDGEKIT_PIN_TARGET``/``_MIN_RELEASE``/``_NOT_BEFORE``).
    The options are ``edgekit.runtime.session.RuntimeOptions``; this module stays light, so the
    runtime is imported on the first call.
    """
    from edgekit.model import load as _load

    return _load(path, backend, threads, policy=policy, allow_spinning=allow_spinning,
                 power_root=power_root, tuner=tuner, monitor_interval_s=monitor_interval_s,
                 max_batch=max_batch, max_wait_ms=max_wait_ms, queue_size=queue_size,
                 power_aware=power_aware, allow_nonfinite=allow_nonfinite,
                 run_timeout_s=run_timeout_s, drift_threshold=drift_threshold,
                 power_sensor=power_sensor, exact_int8=exact_int8, trusted_keys=trusted_keys,
                 pin=pin)


def __getattr__(name: str):  # noqa: ANN202
    if name == "Model":
        from edgekit.model import Model

        return Model
    raise AttributeError(f"module 'edgekit' has no attribute {name!r}")

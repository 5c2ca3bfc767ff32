"""How a loaded model runs: every option of ``edgekit.load`` in one frozen record, and the
one rule that turns them into a runtime session's ``BackendOptions``.

``RuntimeOptions`` nests the options of the thread tuner (``TunerOptions``), of the
batcher behind ``Model.submit`` (``BatchOptions``) and of the power monitor and sensor
(``PowerOptions``). ``edgekit.load`` takes them flat, as keywords (``max_batch=4``,
``power_root=...``): ``RuntimeOptions.keywords()`` lists them with their defaults, and
``RuntimeOptions.with_keywords`` places each in its section and checks it.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass, field
from typing import Any

from edgekit.backends.base import BackendOptions
from edgekit.device.power_sensors import check_sensor_option
from edgekit.errors import UserError

POLICIES = ("balanced", "latency", "efficiency")
# threads a runtime is ever given: far above any board's cores; LiteRT given 100,000
# crashed the process (SIGSEGV) and a 21-digit count made its binding print the model
MAX_THREADS = 256


def check_policy(policy: str) -> str:
    if policy not in POLICIES:
        raise UserError(f"policy must be one of {', '.join(POLICIES)}; got {policy!r}")
    return policy


@dataclass
class TunerOptions:
    """The thread tuner's probe, triggers and hysteresis (``threads="auto"``)."""

    budget_s: float = 1.5  # probe at load: warm-up + timed runs, all candidates
    warmup: int = 2
    retune_budget_s: float = 0.6  # offline re-probe when there is no live traffic
    check_s: float = 0.25  # how often the tuner thread looks at the triggers
    cooldown_s: float = 2.0  # no load/drift re-tune sooner than this after the last one
    drift: float = 0.25  # re-tune when latency moves this far from its moving average
    strikes: int = 3  # ... on this many consecutive checks (hysteresis)
    drift_s: float = 2.0  # ... lasting at least this long: another model or the machine's
    # noise moves a small model's time by 30% for a second; a live re-tune costs p95
    load_step: float = 1.0  # re-tune when the 1-min load average moves by a core
    busy_step: float = 0.5  # ... or when other processes' CPU use (proc/stat) moves this much
    busy_tau_s: float = 1.0  # averaging time of that CPU use
    margin: float = 0.10  # keep the current count unless the new one is this much better
    explore_samples: int = 24  # live executions measured per candidate window when re-tuning
    explore_min_s: float = 0.1  # ... over at least this long (longer than scheduler slices)
    explore_timeout_s: float = 1.5  # per window: bursty traffic may pause in between
    min_samples: int = 6  # executions a drift check needs
    own_busy: float = 0.3  # cores this process used since the last check that put off ...
    defer_s: float = 5.0  # ... an offline re-probe (no live traffic), for at most this long


def tuner_options(value: TunerOptions | dict[str, Any] | None) -> TunerOptions:
    if isinstance(value, TunerOptions):
        return value
    allowed = set(TunerOptions.__dataclass_fields__)
    unknown = sorted(set(value or {}) - allowed)
    if unknown:
        raise UserError(f"unknown tuner option(s) {unknown}; allowed: {', '.join(sorted(allowed))}")
    return TunerOptions(**(value or {}))


@dataclass(frozen=True)
class BatchOptions:
    """``Model.submit``: the batcher's batch size, wait, queue and run bound."""

    max_batch: int = 8  # the batch size in the normal power state
    max_wait_ms: float | None = None  # wait for more requests (None: by policy)
    queue_size: int = 1024  # requests waiting at most
    power_aware: bool = True  # batching follows the power state
    # bounds each backend run the batcher makes (a batch, the per-row probe, a failed
    # batch's request-by-request retries): a longer run fails its batch's requests
    # (RunTimeoutError) and the session is replaced (onnxruntime stops the run; LiteRT's is
    # left to finish). None: derived from the manifest's latency estimate (x100 per row of
    # max_batch, at least 10 s: edgekit/runtime/run_bounds.py). Not the queue wait (requests
    # queued behind a wedged run then run on the new session). predict() runs on the
    # caller's thread, bounded the same way only for a model that can loop without end (an
    # ONNX Loop whose trip count is not a constant). A caller's own bound:
    # submit(x).result(timeout=...).
    run_timeout_s: float | None = None


@dataclass(frozen=True)
class PowerOptions:
    """Where the board's files are, how often the power monitor reads them, which sensor
    measures watts."""

    power_root: str = "/"  # where sysfs and proc are (a fake tree in tests)
    monitor_interval_s: float = 2.0  # power monitor poll interval
    # measured power (edgekit/device/power_sensors.py): "auto" (an INA2xx hwmon sensor, else
    # on a Pi 5 under the real root vcgencmd pmic_read_adc), "none" (modelled), "hwmon:NAME"
    # or "vcgencmd" (forced, e.g. with a fake tree)
    power_sensor: str = "auto"


@dataclass(frozen=True)
class RuntimeOptions:
    """How a loaded model runs (the keyword options of ``edgekit.load``)."""

    threads: int | str = 0  # a count (0 = runtime default) or "auto" (the tuner)
    policy: str = "balanced"  # "balanced" | "latency" | "efficiency"
    allow_spinning: bool = True  # onnxruntime spin-wait (always off for "efficiency")
    allow_nonfinite: bool = False  # NaN / inf inputs run instead of raising InputError
    # the drift watch (edgekit/numerics/drift.py) warns when an input channel's share of
    # clipped values (an output's at the int8 limits) exceeds the build's by more than this
    drift_threshold: float = 0.01
    # onnxruntime on x86 without VNNI: True runs an int8 model unfused, computing exactly the
    # int8 math of the board (the fused kernels saturate 8-bit weights: edgekit/device/cpu.py),
    # about 4x slower; False runs it fused, fast, results a few steps off on such a CPU.
    exact_int8: bool = True
    tuner: TunerOptions = field(default_factory=TunerOptions)
    batch: BatchOptions = field(default_factory=BatchOptions)
    power: PowerOptions = field(default_factory=PowerOptions)

    @classmethod
    def keywords(cls) -> dict[str, Any]:
        """The flat keyword options of ``edgekit.load``, in order, with their defaults
        (``tuner=None``: the default ``TunerOptions``)."""
        flat: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name in _SECTIONS:
                flat.update({s.name: s.default for s in dataclasses.fields(_SECTIONS[f.name])})
            else:
                flat[f.name] = None if f.name == "tuner" else f.default
        return flat

    @classmethod
    def build(cls, **keywords: Any) -> RuntimeOptions:
        """Checked options from the flat keywords (``RuntimeOptions.keywords()``)."""
        return cls().with_keywords(**keywords)

    def with_keywords(self, **keywords: Any) -> RuntimeOptions:
        """These options with the flat ``keywords`` replaced, checked: an unknown keyword is
        a ``TypeError`` (as for any call), a bad value a ``UserError``."""
        unknown = sorted(set(keywords) - set(_KEYWORD_SECTION))
        if unknown:
            raise TypeError(f"load() got unexpected keyword argument(s) {unknown}; allowed: "
                            f"{', '.join(_KEYWORD_SECTION)}")
        top: dict[str, Any] = {}
        sections: dict[str, dict[str, Any]] = {}
        for name, value in keywords.items():
            section = _KEYWORD_SECTION[name]
            if section is None:
                top[name] = value
            else:
                sections.setdefault(section, {})[name] = value
        for section, values in sections.items():
            top[section] = dataclasses.replace(getattr(self, section), **values)
        return dataclasses.replace(self, **top).checked()

    def checked(self) -> RuntimeOptions:
        """These options with each value checked (a ``UserError`` naming the option, what
        it expects and what came) and normalized (an integral count as ``int``, the tuner's
        dict as ``TunerOptions``)."""
        threads = self.threads
        if threads != "auto" and (isinstance(threads, str | bool) or not isinstance(
                threads, numbers.Integral) or not 0 <= threads <= MAX_THREADS):
            raise UserError(f"threads must be 'auto' or a count in [0, {MAX_THREADS}] (0 = "
                            f"runtime default); got {str(threads)[:40]!r}")
        timeout = self.batch.run_timeout_s
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(
                timeout, int | float) or not (math.isfinite(timeout) and timeout > 0)):
            raise UserError(f"run_timeout_s must be a number of seconds > 0 or None (derived "
                            f"from the manifest); got {timeout!r}")
        threshold = self.drift_threshold
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not (
                0.0 <= threshold <= 1.0):
            raise UserError(f"drift_threshold must be a share in [0, 1] (0.01 = 1% more values "
                            f"clipped than at build); got {threshold!r}")
        check_sensor_option(self.power.power_sensor)
        return dataclasses.replace(
            self, threads=threads if threads == "auto" else int(threads),
            tuner=tuner_options(self.tuner), policy=check_policy(self.policy))

    @property
    def auto(self) -> bool:
        return self.threads == "auto"


_SECTIONS: dict[str, type] = {"batch": BatchOptions, "power": PowerOptions}
# flat keyword -> the section holding it (None: a field of RuntimeOptions itself)
_KEYWORD_SECTION: dict[str, str | None] = {
    **{f.name: None for f in dataclasses.fields(RuntimeOptions) if f.name not in _SECTIONS},
    **{s.name: section for section, kind in _SECTIONS.items() for s in dataclasses.fields(kind)},
}


def may_spin(options: RuntimeOptions, policy: str) -> bool:
    """The spin-wait rule: onnxruntime's pool spin-waits between ops only where the caller
    allows it (``allow_spinning``) and the policy in force is not ``efficiency`` (a spinning
    pool keeps its cores busy between runs: power and heat for no work). ``policy`` is the
    one in force: the tuner's under a power state may be ``efficiency`` for a ``balanced``
    model."""
    return options.allow_spinning and policy != "efficiency"


def backend_options(options: RuntimeOptions, policy: str, threads: int) -> BackendOptions:
    """The options of every session a model opens (at load, in the tuner's probes and
    re-tunes): ``threads``, spinning by ``may_spin``."""
    return BackendOptions(threads=threads, allow_spinning=may_spin(options, policy))

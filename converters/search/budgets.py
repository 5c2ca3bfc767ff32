"""Budgets: the target profile's defaults, the user's overrides, and checks of a build against them.

Five budgets (profile ``[budgets]``, overridden by ``--max-*`` flags or ``build(budgets={...})``):

``storage_mb``     the artifact as written (a zip: members deflated at level 9). MB = 10^6 bytes.
``ram_mb``         weights (as held while loading) + peak activation arena + runtime overhead,
                   from the estimator (``edgekit.converters.estimate``).
``latency_ms``     batch 1 at the profile's thread count, from the estimator's cost model.
``power_w``        sustained board power while serving ``rate_hz`` inferences per second:
                   ``idle + (power(threads) - idle) * min(1, rate_hz * latency)``, the busy cores
                   drawing their share only while an inference runs. ``rate_hz`` defaults to
                   ``1000 / latency_ms`` of the profile (the rate its latency budget serves).
``accuracy_drop``  points lost against the *dense float* model on the validation data: top-1
                   points for a labelled classifier, else ``(1 - mean cosine) * 100``.

A candidate *fits* when every value is at most its limit, and fits *with margin* when every
value is at most ``limit * (1 - margin)``; the search stops early at the first of those.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgekit.errors import UserError

MB = 1e6
# budget -> (unit, CLI flag)
BUDGETS: dict[str, tuple[str, str]] = {
    "storage_mb": ("MB", "--max-storage-mb"),
    "ram_mb": ("MB", "--max-ram-mb"),
    "latency_ms": ("ms", "--max-latency-ms"),
    "power_w": ("W", "--max-power-w"),
    "accuracy_drop": ("pts", "--max-accuracy-drop"),
}
LABELS = {"storage_mb": "storage", "ram_mb": "RAM", "latency_ms": "latency", "power_w": "power",
          "accuracy_drop": "accuracy drop"}
HARDWARE = ("storage_mb", "ram_mb", "latency_ms", "power_w")
ESTIMATED = ("ram_mb", "latency_ms", "power_w")  # known from the graph before quantizing
DEFAULT_MARGIN = 0.10
# The manifest (profile, stages, search table) deflated: 3.3 kB for a plain digits build,
# a few kB more with a search table of twenty candidates.
MANIFEST_BYTES = 8_000


@dataclass(frozen=True)
class Budgets:
    limits: dict[str, float]  # budget -> limit in its unit
    sources: dict[str, str]  # budget -> "profile <name>" | "flag"
    rate_hz: float

    def to_dict(self) -> dict[str, Any]:
        return {k: {"limit": v, "unit": BUDGETS[k][0], "source": self.sources[k]}
                for k, v in self.limits.items()} | {"rate_hz": self.rate_hz}


def resolve(profile: Any, overrides: dict[str, float] | None = None) -> Budgets:
    """The profile's budgets with ``overrides`` applied; unknown keys or bad values raise."""
    overrides = dict(overrides or {})
    allowed = [*BUDGETS, "rate_hz"]
    unknown = sorted(set(overrides) - set(allowed))
    if unknown:
        raise UserError(f"unknown budget(s) {unknown}; allowed: {', '.join(allowed)}")
    defaults = profile.budgets.to_dict()
    limits: dict[str, float] = {}
    sources: dict[str, str] = {}
    for key in BUDGETS:
        given = overrides.get(key)
        value = defaults[key] if given is None else given
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise UserError(f"budget {key} ({BUDGETS[key][1]}) must be a number, got "
                            f"{value!r}") from None
        if not np.isfinite(value) or value < 0 or (value == 0 and key != "accuracy_drop"):
            raise UserError(f"budget {key} ({BUDGETS[key][1]}) must be a positive number"
                            f"{' or 0' if key == 'accuracy_drop' else ''}, got {value:g}")
        limits[key] = value
        sources[key] = f"profile {profile.name}" if given is None else "flag"
    # the profile's rate, not one implied by a --max-latency-ms flag: asking for a faster
    # answer does not mean asking for more answers per second
    rate = overrides.get("rate_hz") or defaults.get("rate_hz") or 1000.0 / defaults["latency_ms"]
    if float(rate) <= 0:
        raise UserError(f"budget rate_hz must be positive, got {rate!r}")
    return Budgets(limits, sources, float(rate))


@dataclass(frozen=True)
class Check:
    budget: str
    limit: float
    value: float

    @property
    def unit(self) -> str:
        return BUDGETS[self.budget][0]

    @property
    def ok(self) -> bool:
        return self.value <= self.limit * (1 + 1e-9) + 1e-12

    def within(self, margin: float) -> bool:
        return self.value <= self.limit * (1 - margin) + 1e-12

    @property
    def over_pct(self) -> float:
        """How far over the limit, in percent of it (inf for a zero limit)."""
        if self.ok:
            return 0.0
        return float("inf") if self.limit == 0 else (self.value - self.limit) / self.limit * 100

    def miss(self) -> str:
        """'latency 12.3 ms > 10 ms (+23%)': which budget was missed and by how much."""
        over = "" if self.limit == 0 else f" (+{self.over_pct:.0f}%)"
        return (f"{LABELS[self.budget]} {_num(self.value)} {self.unit} > "
                f"{_num(self.limit)} {self.unit}{over}")

    def to_dict(self) -> dict[str, Any]:
        return {"limit": self.limit, "value": round(self.value, 6), "ok": self.ok,
                "over_pct": None if self.ok or self.limit == 0 else round(self.over_pct, 2)}


@dataclass
class Verdict:
    checks: list[Check] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return all(c.ok for c in self.checks)

    def fits_with(self, margin: float) -> bool:
        return all(c.within(margin) for c in self.checks)

    @property
    def missed(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def hardware_fits(self) -> bool:
        return all(c.ok for c in self.checks if c.budget in HARDWARE)

    def to_dict(self) -> dict[str, Any]:
        return {c.budget: c.to_dict() for c in self.checks}


def check(figures: dict[str, float], budgets: Budgets,
          only: tuple[str, ...] = tuple(BUDGETS)) -> Verdict:
    """Each budget in ``only`` checked against ``figures`` (values in budget units)."""
    missing = [k for k in only if k not in figures]
    if missing:
        raise KeyError(f"figures lack {missing}; have {sorted(figures)}")
    return Verdict([Check(k, budgets.limits[k], float(figures[k])) for k in only])


def _num(value: float) -> str:
    if value == 0 or abs(value) >= 100:
        return f"{value:.0f}" if value == int(value) or abs(value) >= 100 else f"{value:.1f}"
    if abs(value) >= 1:
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return f"{value:.3g}"


# ------------------------------------------------------------------------ figures

THREAD_BUDGETS = ("latency_ms", "power_w")  # the budgets a thread count moves


def sustained_power(profile: Any, threads: int, latency_s: float, rate_hz: float) -> float:
    """Board watts serving ``rate_hz`` inferences/s: busy cores draw only while running."""
    from ..estimate import power_w

    idle = profile.power.idle_w
    duty = min(1.0, max(0.0, rate_hz * latency_s))
    return idle + (power_w(profile, threads) - idle) * duty


def hardware_figures(est: Any, profile: Any, rate_hz: float,
                     limits: dict[str, float] | None = None) -> dict[str, float]:
    """RAM, latency, power and energy of the int8 variant of an ``Estimate``, and the thread
    count they hold at (``threads``).

    At the profile's thread count; when that misses the latency or power limit and ``limits``
    is given, at the estimated thread count that meets both with the least power (the cheap
    lever, tried before pruning: fewer busy cores draw less, more cores finish sooner; on a
    tiny model one thread can be the faster, its pool costing more than it splits). When no
    thread count meets both, the profile's count stands."""
    default = profile.threads if profile.threads in est.threads else est.threads[-1]
    variant = est.variants["int8"]

    def at(threads: int) -> dict[str, float]:
        latency = variant.latency_s[threads]
        return {"ram_mb": variant.ram_bytes / MB, "latency_ms": latency * 1e3,
                "power_w": sustained_power(profile, threads, latency, rate_hz),
                "energy_mj": variant.energy_j[threads] * 1e3, "threads": threads}

    def meets(figures: dict[str, float]) -> bool:
        return all(Check(k, limits[k], figures[k]).ok  # type: ignore[index]
                   for k in THREAD_BUDGETS if limits and k in limits)

    first = at(default)
    if limits is None or meets(first):
        return first
    fitting = [f for f in (at(t) for t in est.threads) if meets(f)]
    return min(fitting, key=lambda f: (f["power_w"], f["latency_ms"])) if fitting else first


def accuracy_figures(reference: np.ndarray, candidate: np.ndarray,
                     labels: np.ndarray | None) -> dict[str, Any]:
    """Drop against the dense float reference: top-1 points when labelled, else cosine."""
    from edgekit.converters.core.runner import compare

    metrics = compare(reference, candidate, labels)
    if "accuracy_int8" in metrics:
        drop = (metrics["accuracy_float"] - metrics["accuracy_int8"]) * 100
        return {"accuracy_drop": drop, "accuracy": metrics["accuracy_int8"],
                "cosine": metrics["cosine"], "metric": "top-1 points", "metrics": metrics}
    return {"accuracy_drop": (1 - metrics["cosine"]) * 100, "accuracy": None,
            "cosine": metrics["cosine"], "metric": "(1 - cosine) x 100", "metrics": metrics}


def storage_estimate(model: bytes, copies: int = 1, vectors: int = 0) -> float:
    """Artifact MB before it is written: the model deflated as the zip stores it, once per
    format (a TFLite flatbuffer holds the same int8 weights), the test vectors (raw: inputs
    of real images barely deflate) and the manifest."""
    return (len(zlib.compress(model, 9)) * max(1, copies) + vectors + MANIFEST_BYTES) / MB


def vector_bytes(inputs: list[dict[str, Any]], outputs: list[dict[str, Any]],
                 quantized: set[str], model_bytes: int, samples: int, wanted: int,
                 formats: int) -> int:
    """Bytes of the test vectors the package stage will bundle (same count rule as there)."""
    from ..stages.package import VECTOR_FLOOR, VECTOR_SHARE

    def size(spec: dict[str, Any]) -> int:
        return int(np.prod([d if isinstance(d, int) else 1 for d in spec["shape"][1:]]))

    per_input = sum(size(i) * (1 if i["name"] in quantized else 4) for i in inputs)
    budget = max(VECTOR_FLOOR, VECTOR_SHARE * model_bytes * formats)
    count = max(1, min(wanted, samples, int(budget // max(1, per_input))))
    return count * (per_input + sum(size(o) * 4 for o in outputs) * formats)

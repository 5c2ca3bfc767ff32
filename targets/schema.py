"""The shape of a target profile, as typed, frozen sections validated once in ``from_dict``.

A profile is data; this module is the only place that says what data is allowed, so that
a typo in a TOML file is an error that names the allowed keys instead of a value silently
ignored. The dataclass fields ARE the schema: ``validate`` walks them (name, type, default
= optional), so no second list of keys can drift from the types the runtime reads.
Stdlib only: the on-device runtime reads profiles too (the copy inside every manifest).
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from dataclasses import dataclass, field
from typing import Any

# The cost model's numeric keys, defined once: the profile loader validates [cost_model]
# against them and the estimator (edgekit.converters.estimate.cost) reads exactly these.
COST_KINDS = ("conv", "stem", "depthwise", "gemm", "elementwise")
COST_DTYPES = {"float32": "f32", "int8": "i8"}


def rate_key(kind: str, dtype: str) -> str:
    """``conv`` + ``int8`` -> ``conv_gmacs_i8`` (elementwise counts ops, not MACs)."""
    unit = "gops" if kind == "elementwise" else "gmacs"
    return f"{kind}_{unit}_{COST_DTYPES.get(dtype, dtype)}"


COST_RATE_KEYS = tuple(rate_key(kind, tag) for kind in COST_KINDS for tag in COST_DTYPES.values())
COST_MODEL_KEYS = COST_RATE_KEYS + (
    "bandwidth_gbs", "parallel_efficiency", "parallel_efficiency_memory", "bandwidth_scaling",
    "op_overhead_us", "thread_overhead_us", "run_overhead_us", "runtime_overhead_mb",
    "weight_copies", "cache_mb",
)
COST_METHODS = ("published", "scaled", "benchmark")
ALLOWED_FORMATS = ("tflite", "onnx")


@dataclass(frozen=True)
class CpuSection:
    arch: str
    core: str
    cores: int
    freq_mhz: int
    isa: str
    neon: bool
    dotprod: bool
    fp16: bool
    i8mm: bool


@dataclass(frozen=True)
class MemorySection:
    ram_mb: tuple[int, ...]
    default_ram_mb: int


@dataclass(frozen=True)
class ThermalSection:
    soft_limit_c: float
    hard_limit_c: float


@dataclass(frozen=True)
class PowerSection:
    idle_w: float
    full_load_w: float
    supply_w: float


@dataclass(frozen=True)
class RuntimeSection:
    formats: tuple[str, ...]
    threads: int
    activation_type: str
    weight_type: str


@dataclass(frozen=True)
class BudgetSection:
    storage_mb: float
    ram_mb: float
    latency_ms: float
    power_w: float
    accuracy_drop: float  # with labels: points of the task's score lost against float
    rate_hz: float | None = None  # power is checked at this rate (default: 1000 / latency_ms)
    # without labels: points of disagreement with float per task metric ([budgets.agreement])
    agreement: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, float]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


@dataclass(frozen=True)
class EmulationSection:
    qemu: str
    cpu_model: str
    cpuinfo_implementer: str
    cpuinfo_part: str
    debian_arch: str
    python_abi: str
    wheel_platforms: tuple[str, ...]
    runtimes: tuple[str, ...]


@dataclass(frozen=True)
class CostModelSection:
    """Per-target figures for the offline estimator; ``rates`` holds the keys of
    ``COST_MODEL_KEYS`` the profile gives (a board without figures still loads; the
    estimator names what is missing). Numbers are per core at one thread."""

    method: str
    source: str
    rates: dict[str, float] = field(default_factory=dict)


# section name -> its type; "" is the top level (scalars only)
SECTIONS: dict[str, type] = {
    "cpu": CpuSection, "memory": MemorySection, "thermal": ThermalSection,
    "power": PowerSection, "runtime": RuntimeSection, "budgets": BudgetSection,
    "emulation": EmulationSection, "cost_model": CostModelSection,
}
TOP_LEVEL: dict[str, type] = {"schema": int, "name": str, "description": str}
OPTIONAL_SECTIONS = {"cost_model"}
ALLOWED_VALUES: dict[tuple[str, str], tuple[str, ...]] = {
    ("runtime", "activation_type"): ("uint8", "int8"),
    ("runtime", "weight_type"): ("int8",),
    ("cost_model", "method"): COST_METHODS,
}


def _spec(cls: type) -> dict[str, tuple[type, bool]]:
    """field -> (python type the TOML value must have, required) from a section class."""
    hints = typing.get_type_hints(cls)
    out: dict[str, tuple[type, bool]] = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if isinstance(hint, types.UnionType):
            hint = args[0]
        origin = typing.get_origin(hint) or hint
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out[f.name] = (origin, required)
    return out


def _accepts(kind: type, value: Any) -> bool:
    if kind is bool:
        return isinstance(value, bool)
    if isinstance(value, bool):  # True is an int to Python, never a number to a profile
        return False
    if kind is float:
        return isinstance(value, int | float)
    if kind is tuple:
        return isinstance(value, list | tuple)
    return isinstance(value, kind)


_NAMES = {float: "int or float", tuple: "list", dict: "table"}


def _check_table(table: dict[str, Any], spec: dict[str, tuple[type, bool]], section: str,
                 origin: str, problems: list[str]) -> None:
    where = "top level" if section == "" else f"[{section}]"
    for key, (kind, required) in spec.items():
        if key not in table:
            if required:
                problems.append(f"{origin}: missing field '{key}' in {where}")
            continue
        value = table[key]
        if not _accepts(kind, value):
            expected = _NAMES.get(kind, kind.__name__)
            problems.append(
                f"{origin}: {where} {key} must be {expected}, got {type(value).__name__} {value!r}")
            continue
        allowed = ALLOWED_VALUES.get((section, key))
        if allowed and value not in allowed:
            problems.append(f"{origin}: {where} {key} = {value!r}; allowed: {', '.join(allowed)}")


def validate(data: dict[str, Any], origin: str) -> list[str]:
    """Return every problem found in a parsed profile (empty when it is valid)."""
    if not isinstance(data, dict):
        return [f"{origin}: a profile must be a table, got {type(data).__name__}"]
    problems: list[str] = []
    for key, value in data.items():
        if isinstance(value, dict):
            if key not in SECTIONS:
                problems.append(
                    f"{origin}: unknown section [{key}]; allowed: {', '.join(sorted(SECTIONS))}")
        elif key not in TOP_LEVEL:
            problems.append(
                f"{origin}: unknown top-level key '{key}'; allowed: {', '.join(TOP_LEVEL)}")
    _check_table(data, {k: (t, True) for k, t in TOP_LEVEL.items()}, "", origin, problems)
    for section, cls in SECTIONS.items():
        table = data.get(section)
        if table is None:
            if section not in OPTIONAL_SECTIONS:
                problems.append(f"{origin}: missing section [{section}]")
            continue
        if not isinstance(table, dict):
            problems.append(f"{origin}: [{section}] must be a table, got {type(table).__name__}")
            continue
        spec = _spec(cls)
        if cls is CostModelSection:
            del spec["rates"]
            spec.update({k: (float, False) for k in COST_MODEL_KEYS})
        for key in table:
            if key not in spec:
                problems.append(
                    f"{origin}: unknown key '{key}' in [{section}]; allowed: {', '.join(spec)}")
        _check_table(table, spec, section, origin, problems)
    agreement = data.get("budgets", {}).get("agreement", {}) if isinstance(data.get("budgets"), dict) else {}
    for metric, value in agreement.items() if isinstance(agreement, dict) else ():
        if not _accepts(float, value) or value < 0:
            problems.append(f"{origin}: [budgets.agreement] {metric} must be a number >= 0 (points), got {value!r}")
    formats = data.get("runtime", {}).get("formats", []) if isinstance(
        data.get("runtime"), dict) else []
    for fmt in formats if isinstance(formats, list) else []:
        if fmt not in ALLOWED_FORMATS:
            problems.append(
                f"{origin}: [runtime] formats has {fmt!r}; allowed: {', '.join(ALLOWED_FORMATS)}")
    return problems


def _section(cls: type, table: dict[str, Any]) -> Any:
    """A validated table as its section type (lists become tuples: the sections are frozen)."""
    if cls is CostModelSection:
        return CostModelSection(table["method"], table["source"],
                                {k: float(table[k]) for k in COST_MODEL_KEYS if k in table})
    values: dict[str, Any] = {}
    for name, (kind, _required) in _spec(cls).items():
        if name in table:
            value = table[name]
            values[name] = tuple(value) if kind is tuple else float(value) if kind is float \
                else value
    return cls(**values)


@dataclass(frozen=True)
class Profile:
    """A validated target profile (see ``Profile.from_dict``); ``data`` is the plain
    content (native values resolved), the form a manifest stores and ``sha256`` covers."""

    name: str
    description: str
    schema: int
    cpu: CpuSection
    memory: MemorySection
    thermal: ThermalSection
    power: PowerSection
    runtime: RuntimeSection
    budgets: BudgetSection
    emulation: EmulationSection
    cost_model: CostModelSection | None = None
    data: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    sha256: str = field(default="", repr=False)
    path: str = field(default="", repr=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any], origin: str = "<dict>", sha256: str = "") -> Profile:
        """Raise ``TargetError`` listing every problem, else the typed profile."""
        from edgekit.errors import TargetError

        problems = validate(data, origin)
        if problems:
            raise TargetError("invalid target profile:\n  " + "\n  ".join(problems))
        sections = {name: _section(kind, data[name]) for name, kind in SECTIONS.items()
                    if name in data}
        return cls(name=data["name"], description=data["description"], schema=data["schema"],
                   data=data, sha256=sha256, path=origin, **sections)

    def to_dict(self) -> dict[str, Any]:
        import copy

        return copy.deepcopy(self.data)

    @property
    def threads(self) -> int:
        """Thread count the profile recommends (resolved against this process for native)."""
        return self.runtime.threads or self.cpu.cores


@dataclass(frozen=True)
class PowerModel:
    """Board power as a function of busy cores, from the profile's ``[power]`` section (the
    board is not metered): ``watts(T) = idle_w + (full_load_w - idle_w) / cores * T``, with
    T clamped to 1..cores. The one formula the estimator and the runtime's stats share."""

    idle_w: float
    full_load_w: float
    cores: int

    @classmethod
    def from_profile(cls, profile: Profile) -> PowerModel:
        return cls(profile.power.idle_w, profile.power.full_load_w,
                   max(1, profile.cpu.cores or os.cpu_count() or 1))

    def watts(self, threads: int) -> float:
        busy = min(max(1, threads), self.cores)
        return self.idle_w + (self.full_load_w - self.idle_w) / self.cores * busy

    def energy_j(self, threads: int, seconds: float) -> float:
        return self.watts(threads) * seconds

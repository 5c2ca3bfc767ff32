"""The shape every target profile must have: sections, keys and their types.

A profile is data; this module is the only place that says what data is allowed,
so that a typo in a TOML file is an error that names the allowed keys instead of
a value silently ignored.
"""

from __future__ import annotations

from typing import Any

# section -> key -> (accepted python types, required)
_NUM = (int, float)
SCHEMA: dict[str, dict[str, tuple[tuple[type, ...], bool]]] = {
    "": {
        "schema": ((int,), True),
        "name": ((str,), True),
        "description": ((str,), True),
    },
    "cpu": {
        "arch": ((str,), True),
        "core": ((str,), True),
        "cores": ((int,), True),
        "freq_mhz": ((int,), True),
        "isa": ((str,), True),
        "neon": ((bool,), True),
        "dotprod": ((bool,), True),
        "fp16": ((bool,), True),
        "i8mm": ((bool,), True),
    },
    "memory": {
        "ram_mb": ((list,), True),
        "default_ram_mb": ((int,), True),
    },
    "thermal": {
        "soft_limit_c": (_NUM, True),
        "hard_limit_c": (_NUM, True),
    },
    "power": {
        "idle_w": (_NUM, True),
        "full_load_w": (_NUM, True),
        "supply_w": (_NUM, True),
    },
    "runtime": {
        "formats": ((list,), True),
        "threads": ((int,), True),
        "activation_type": ((str,), True),
        "weight_type": ((str,), True),
    },
    "budgets": {
        "storage_mb": (_NUM, True),
        "ram_mb": (_NUM, True),
        "latency_ms": (_NUM, True),
        "power_w": (_NUM, True),
        "accuracy_drop": (_NUM, True),
        # inference rate the power budget is checked at (default: 1000 / latency_ms)
        "rate_hz": (_NUM, False),
    },
    "emulation": {
        "qemu": ((str,), True),
        "cpu_model": ((str,), True),
        "cpuinfo_implementer": ((str,), True),
        "cpuinfo_part": ((str,), True),
        "debian_arch": ((str,), True),
        "python_abi": ((str,), True),
        "wheel_platforms": ((list,), True),
        "runtimes": ((list,), True),
    },
    # Per-target cost model for the offline estimator (edgekit.converters.estimate.cost);
    # optional so that a board without figures still loads (the estimator then says so).
    # Numbers are per core at one thread; "benchmark" takes them from `edgekit calibrate-host`.
    "cost_model": {
        "method": ((str,), True),
        "source": ((str,), True),
        **{f"{kind}_{unit}_{dtype}": (_NUM, False)
           for kind, unit in (("conv", "gmacs"), ("stem", "gmacs"), ("depthwise", "gmacs"),
                              ("gemm", "gmacs"), ("elementwise", "gops"))
           for dtype in ("f32", "i8")},
        "bandwidth_gbs": (_NUM, False),
        "parallel_efficiency": (_NUM, False),
        "parallel_efficiency_memory": (_NUM, False),
        "bandwidth_scaling": (_NUM, False),
        "op_overhead_us": (_NUM, False),
        "thread_overhead_us": (_NUM, False),
        "run_overhead_us": (_NUM, False),
        "runtime_overhead_mb": (_NUM, False),
        "weight_copies": (_NUM, False),
        "cache_mb": (_NUM, False),
    },
}

OPTIONAL_SECTIONS = {"cost_model"}

ALLOWED_VALUES: dict[tuple[str, str], tuple[str, ...]] = {
    ("runtime", "activation_type"): ("uint8", "int8"),
    ("runtime", "weight_type"): ("int8",),
    ("cost_model", "method"): ("published", "scaled", "benchmark"),
}
ALLOWED_FORMATS = ("tflite", "onnx")


def validate(data: dict[str, Any], origin: str) -> list[str]:
    """Return every problem found in a parsed profile (empty when it is valid)."""
    problems: list[str] = []
    sections = {k for k in SCHEMA if k}
    for key, value in data.items():
        if isinstance(value, dict):
            if key not in sections:
                problems.append(
                    f"{origin}: unknown section [{key}]; allowed: {', '.join(sorted(sections))}"
                )
        elif key not in SCHEMA[""]:
            problems.append(
                f"{origin}: unknown top-level key '{key}'; allowed: {', '.join(SCHEMA[''])}"
            )
    for section, keys in SCHEMA.items():
        table = data if section == "" else data.get(section)
        where = "top level" if section == "" else f"[{section}]"
        if table is None:
            if section not in OPTIONAL_SECTIONS:
                problems.append(f"{origin}: missing section [{section}]")
            continue
        if not isinstance(table, dict):
            problems.append(f"{origin}: {where} must be a table, got {type(table).__name__}")
            continue
        if keys:  # sections with an empty key map are free-form (validated by their user)
            for key in table:
                if section and key not in keys:
                    problems.append(
                        f"{origin}: unknown key '{key}' in {where}; allowed: {', '.join(keys)}"
                    )
        for key, (types, required) in keys.items():
            if key not in table:
                if required:
                    problems.append(f"{origin}: missing field '{key}' in {where}")
                continue
            value = table[key]
            if isinstance(value, bool) and bool not in types:
                ok = False
            else:
                ok = isinstance(value, types)
            if not ok:
                expected = " or ".join(t.__name__ for t in types)
                problems.append(
                    f"{origin}: {where} {key} must be {expected}, got {type(value).__name__} {value!r}"
                )
                continue
            allowed = ALLOWED_VALUES.get((section, key))
            if allowed and value not in allowed:
                problems.append(
                    f"{origin}: {where} {key} = {value!r}; allowed: {', '.join(allowed)}"
                )
    formats = data.get("runtime", {}).get("formats", [])
    for fmt in formats if isinstance(formats, list) else []:
        if fmt not in ALLOWED_FORMATS:
            problems.append(
                f"{origin}: [runtime] formats has {fmt!r}; allowed: {', '.join(ALLOWED_FORMATS)}"
            )
    return problems

"""Power monitor polls on hostile fake sysfs trees, measured side by side, printed as figures.

    python tools/benchmarks/bench_power.py [--zones 1000,2000,4000,8000] [--polls 15] [--json]

1. poll       ``read_power`` on a tree of N thermal zones (all typed "acpitz", as laptops
              repeat types) plus a FIFO, a /dev/zero link, a sparse 512 MiB file, garbage
              numbers and symlink loops: median and max wall ms and CPU ms per poll, with the
              default listing cap (the claim: <= 50 ms at 8,000 zones).
2. uncapped   the same with the cap lifted, so every zone is read: ms per 1,000 zones at each
              N (flat when the work is linear in N).
3. naming     naming N same-typed zones with edgekit's linear ``unique_name`` vs the former
              loop (try "#2", "#3", ... from 2 for every zone, O(N^2)), ratio former/new.

Trees live in a temp folder removed at the end. Wall times are medians of interleaved polls,
so other load on the machine hits the configurations alike; CPU times are less noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from edgekit.device import sensors, sysfs  # noqa: E402
from edgekit.device.power import read_power  # noqa: E402


def hostile_tree(root: Path, zones: int) -> Path:
    """N same-typed zones, and the hostile files the adversarial run used."""
    thermal = root / "sys/class/thermal"
    for i in range(zones):
        zone = thermal / f"thermal_zone{i}"
        zone.mkdir(parents=True)
        (zone / "type").write_text("acpitz\n")
        (zone / "temp").write_text(f"{40000 + i % 30000}\n")
    os.unlink(thermal / "thermal_zone0/temp")
    os.mkfifo(thermal / "thermal_zone0/temp")  # blocked read_power forever before the fix
    (thermal / "thermal_zone1/temp").unlink()
    (thermal / "thermal_zone1/temp").symlink_to("/dev/zero")
    with open(thermal / "thermal_zone2/temp", "w") as handle:
        handle.truncate(512 << 20)  # sparse: read whole before the fix
    (thermal / "thermal_zone3/temp").write_text("nan\n")
    (thermal / "thermal_zone_loop").symlink_to("thermal_zone_loop")
    cpu = root / "sys/devices/system/cpu/cpu0/cpufreq"
    cpu.mkdir(parents=True)
    for name, text in (("scaling_cur_freq", "1500000"), ("scaling_max_freq", "1e400"),
                       ("cpuinfo_max_freq", "inf")):
        (cpu / name).write_text(text + "\n")
    (root / "sys/class/power_supply").symlink_to("power_supply")
    return root


def timed(call: Callable[[], Any]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return (time.perf_counter() - wall) * 1e3, (time.process_time() - cpu) * 1e3


def former_naming(names: list[str]) -> dict[str, float]:
    zones: dict[str, float] = {}
    for name in names:
        key, n = name, 1
        while key in zones:
            n += 1
            key = f"{name}#{n}"
        zones[key] = 0.0
    return zones


def new_naming(names: list[str]) -> dict[str, float]:
    zones: dict[str, float] = {}
    suffixes: dict[str, int] = {}
    for name in names:
        zones[sensors.unique_name(name, zones, suffixes)] = 0.0
    return zones


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zones", default="1000,2000,4000,8000")
    parser.add_argument("--polls", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    counts = [int(n) for n in args.zones.split(",")]
    results: dict[str, Any] = {"poll": {}, "uncapped_ms_per_1000_zones": {}, "naming": {}}
    cap = sysfs.MAX_ENTRIES
    with tempfile.TemporaryDirectory(prefix="edgekit-bench-power-") as tmp:
        roots = {n: str(hostile_tree(Path(tmp) / str(n), n)) for n in counts}
        for label, limit in (("capped", cap), ("uncapped", 10 ** 9)):
            sysfs.MAX_ENTRIES = limit
            samples: dict[int, list[tuple[float, float]]] = {n: [] for n in counts}
            for _ in range(args.polls):  # interleaved: A B C D A B C D ...
                for n in counts:
                    samples[n].append(timed(lambda n=n: read_power(roots[n],
                                                                   use_vcgencmd=False)))
            for n in counts:
                wall = [w for w, _ in samples[n]]
                cpu = [c for _, c in samples[n]]
                if label == "capped":
                    results["poll"][n] = {"median_ms": statistics.median(wall),
                                          "max_ms": max(wall),
                                          "cpu_median_ms": statistics.median(cpu)}
                else:
                    results["uncapped_ms_per_1000_zones"][n] = (
                        statistics.median(cpu) / n * 1000)
        sysfs.MAX_ENTRIES = cap
    for n in counts:
        names = ["acpitz"] * n
        former = statistics.median(timed(lambda names=names: former_naming(names))[1] for _ in range(3))
        new = statistics.median(timed(lambda names=names: new_naming(names))[1] for _ in range(3))
        results["naming"][n] = {"former_ms": former, "new_ms": new,
                                "ratio": former / max(new, 1e-6)}
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"1. poll, hostile tree, listing cap {cap} (claim: <= 50 ms at 8,000 zones)")
    for n, r in results["poll"].items():
        print(f"   {n:>6} zones  median {r['median_ms']:6.1f} ms  max {r['max_ms']:6.1f} ms"
              f"  cpu {r['cpu_median_ms']:6.1f} ms")
    print("2. uncapped: cpu ms per 1,000 zones (flat = linear)")
    for n, per in results["uncapped_ms_per_1000_zones"].items():
        print(f"   {n:>6} zones  {per:6.1f} ms")
    print("3. naming N same-typed zones, cpu ms: former O(N^2) loop vs unique_name")
    for n, r in results["naming"].items():
        print(f"   {n:>6} zones  former {r['former_ms']:8.1f}  new {r['new_ms']:6.2f}"
              f"  ratio {r['ratio']:7.0f}x")


if __name__ == "__main__":
    main()

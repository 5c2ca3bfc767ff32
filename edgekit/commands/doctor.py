"""``edgekit doctor``: what this machine offers the runtime (runtimes, cores, sensors, state)."""

from __future__ import annotations

import json
import os
import platform
import sys
from typing import Any

import click


def runtimes() -> list[dict[str, Any]]:
    from edgekit.backends import REGISTRY, backends_for

    found = []
    for fmt in REGISTRY:
        for cls in backends_for(fmt):
            entry: dict[str, Any] = {"name": cls.name, "format": fmt, "package": cls.package,
                                     "available": cls.available()}
            if entry["available"]:
                try:
                    entry["version"] = cls.version()
                except Exception as exc:  # a broken install should show, not crash doctor
                    entry["version"] = f"error: {exc}"
            found.append(entry)
    return found


def report(root: str, target: str, sensor: str = "auto") -> dict[str, Any]:
    import numpy as np

    from edgekit import __version__
    from edgekit.device.power import Thresholds, read_power
    from edgekit.device.power_sensors import find_sensors
    from edgekit.runtime.stats import usable_cpus
    from edgekit.targets import load_profile

    profile = load_profile(target)
    thresholds = Thresholds.from_profile(profile.to_dict())
    meters = find_sensors(root, sensor)
    reading = read_power(root, thresholds, watts=meters[0].read_watts if meters else None)
    try:
        affinity = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = []
    return {
        "edgekit": __version__, "python": sys.version.split()[0], "numpy": np.__version__,
        "machine": platform.machine(), "system": platform.platform(),
        "cpus": {"count": os.cpu_count(), "usable": usable_cpus(), "affinity": affinity,
                 "profile_cores": profile.cpu.cores},
        "runtimes": runtimes(), "target": profile.name,
        "thresholds": {"soft_limit_c": thresholds.soft_limit_c,
                       "hard_limit_c": thresholds.hard_limit_c,
                       "low_battery_pct": thresholds.low_battery_pct,
                       "supply_w": thresholds.supply_w},
        "root": root, "power": reading.as_dict(), "hints": hints(reading),
        # the board power sensors found (edgekit/device/power_sensors.py), the one used first
        "power_sensors": [{"source": s.source, "kind": s.kind, "name": s.name,
                           "method": s.method, "watts": s.read_watts()} for s in meters],
    }


def hints(reading: Any) -> list[str]:
    out = []
    flags = set(reading.throttle_flags)
    if "under_voltage" in flags or "under_voltage_occurred" in flags:
        out.append("under-voltage seen: use a supply that holds 5.1 V under load "
                   "(the official Pi 4 supply is 5.1 V 3 A)")
    if {"throttled", "soft_temp_limit", "freq_capped"} & flags or reading.state == "hot":
        out.append("thermal limit reached: add a heatsink or fan; the runtime will batch "
                   "more and use fewer threads while it lasts")
    governors = {c.get("scaling_governor") for c in reading.cpus.values()} - {None}
    if "powersave" in governors:
        out.append("cpufreq governor is powersave: expect lower throughput "
                   "(ondemand/schedutil/performance scale up under load)")
    if "thermal" not in reading.sensors:
        out.append("no thermal sensor found: heat cannot be tracked (power state may be "
                   "'unknown')")
    if "throttle" not in reading.sensors:
        out.append("no Raspberry Pi throttle flags (vcgencmd or firmware get_throttled): "
                   "fine off a Pi")
    return out


def lines(data: dict[str, Any]) -> list[str]:
    power = data["power"]
    cpus = data["cpus"]
    out = [f"edgekit {data['edgekit']}  python {data['python']}  numpy {data['numpy']}  "
           f"{data['machine']}  {data['system']}",
           f"cores: {cpus['count']} online, {cpus['usable']} usable (affinity "
           f"{cpus['affinity']}), profile {data['target']}: {cpus['profile_cores']}; "
           f"load average {power['loadavg']}",
           "runtimes:"]
    for rt in data["runtimes"]:
        state = f"{rt.get('version', '')} installed" if rt["available"] else \
            f"not installed (pip install {rt['package']})"
        out.append(f"  {rt['name']:<16} {rt['format']:<7} {state}")
    out.append(f"sensors under {data['root']}:")
    zones = ", ".join(f"{n} {t:.1f} C" for n, t in power["zones"].items()) or "none found"
    out.append(f"  thermal       {zones}")
    if power["cpus"]:
        governors = sorted({c.get("scaling_governor", "?") for c in power["cpus"].values()})
        freqs = ", ".join(f"cpu{i} {c.get('scaling_cur_freq', 0) // 1000}/"
                          f"{c.get('cpuinfo_max_freq', 0) // 1000} MHz"
                          for i, c in power["cpus"].items())
        out.append(f"  cpufreq       governor {','.join(governors)}; {freqs}")
    else:
        out.append("  cpufreq       none found")
    if power["throttle"] is not None:
        flags = ", ".join(power["throttle_flags"]) or "none"
        out.append(f"  throttle      {power['throttle']} ({flags}) from "
                   f"{power['throttle_source']}")
    else:
        out.append("  throttle      none found")
    supplies = "; ".join(
        f"{s['name']} {s['type']}" + (f" online={int(s['online'])}" if "online" in s else "")
        + (f" {s['status']}" if "status" in s else "")
        + (f" {s['capacity']:.0f}%" if "capacity" in s else "")
        for s in power["supplies"]) or "none found"
    out.append(f"  power_supply  {supplies}")
    meters = data.get("power_sensors") or []
    for i, meter in enumerate(meters):
        watts = f"{meter['watts']:.3f} W" if meter["watts"] is not None else "no reading"
        used = " (used for measured energy)" if i == 0 else ""
        out.append(f"  power         {meter['source']}: {watts}{used}")
    if not meters:
        out.append("  power         no sensor found (INA219/INA226/INA260 hwmon, Pi 5 "
                   "vcgencmd pmic_read_adc): energy is modelled from the profile")
    thresholds = data["thresholds"]
    conditions = ", ".join(power["conditions"]) or "none"
    supply = (f", supply {thresholds['supply_w']:g} W" if thresholds.get("supply_w")
              else "")
    out.append(f"power state: {power['state']} (conditions: {conditions}; {data['target']} "
               f"limits: soft {thresholds['soft_limit_c']:g} C, hard "
               f"{thresholds['hard_limit_c']:g} C, low battery "
               f"{thresholds['low_battery_pct']:g}%{supply})")
    out += [f"hint: {h}" for h in data["hints"]]
    return out


@click.command(name="doctor")
@click.option("--target", "-t", default="host", show_default=True,
              help="Profile whose thermal limits and cores to apply (e.g. rpi4).")
@click.option("--root", default="/", show_default=True, type=click.Path(file_okay=False),
              help="Root of the sysfs/proc tree to read (a copy or a fake tree for testing).")
@click.option("--power-sensor", default="auto", show_default=True,
              help="Power sensor to look for: auto, none, vcgencmd or hwmon:NAME.")
@click.option("--json", "as_json", is_flag=True, help="The report as JSON.")
def command(target: str, root: str, as_json: bool, power_sensor: str = "auto") -> None:
    """Which runtimes are installed, CPUs usable, sensors found (thermal, cpufreq,
    throttling flags, power meters), the cpufreq governor and the power state the runtime
    would act on."""
    data = report(root, target, power_sensor)
    click.echo(json.dumps(data, indent=2) if as_json else "\n".join(lines(data)))

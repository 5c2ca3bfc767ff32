"""Fake sysfs / proc trees under a temp root (shared by the power, tuner, batcher and bench
tests): the files a Raspberry Pi 4 and a laptop expose, with the values the kernel prints."""

from __future__ import annotations

from pathlib import Path


def put(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def pi4_tree(root: Path, temp_mc: int = 52000, throttled: str = "0", cur: int = 1500000,
             max_freq: int = 1500000) -> Path:
    """The files a Raspberry Pi 4 on Raspberry Pi OS exposes (values as the kernel prints)."""
    put(root, "sys/class/thermal/thermal_zone0/type", "cpu-thermal")
    put(root, "sys/class/thermal/thermal_zone0/temp", str(temp_mc))
    for cpu in range(4):
        base = f"sys/devices/system/cpu/cpu{cpu}/cpufreq"
        put(root, f"{base}/scaling_cur_freq", str(cur))
        put(root, f"{base}/scaling_max_freq", str(max_freq))
        put(root, f"{base}/cpuinfo_max_freq", "1500000")
        put(root, f"{base}/scaling_governor", "ondemand")
    # drivers/firmware/raspberrypi.c prints the flags with "%x\n" (no 0x prefix)
    put(root, "sys/devices/platform/soc/soc:firmware/get_throttled", throttled)
    put(root, "proc/loadavg", "0.42 0.30 0.20 1/123 4567")
    return root


def laptop_tree(root: Path, ac_online: int = 1, status: str = "Charging",
                capacity: int = 80) -> Path:
    put(root, "sys/class/thermal/thermal_zone0/type", "acpitz")
    put(root, "sys/class/thermal/thermal_zone0/temp", "45000")
    put(root, "sys/class/thermal/thermal_zone1/type", "x86_pkg_temp")
    put(root, "sys/class/thermal/thermal_zone1/temp", "51000")
    put(root, "sys/class/power_supply/AC/type", "Mains")
    put(root, "sys/class/power_supply/AC/online", str(ac_online))
    put(root, "sys/class/power_supply/BAT0/type", "Battery")
    put(root, "sys/class/power_supply/BAT0/status", status)
    put(root, "sys/class/power_supply/BAT0/capacity", str(capacity))
    # a wireless mouse's battery (scope Device) must not count as the system's
    put(root, "sys/class/power_supply/hidpp_battery_0/type", "Battery")
    put(root, "sys/class/power_supply/hidpp_battery_0/scope", "Device")
    put(root, "sys/class/power_supply/hidpp_battery_0/status", "Discharging")
    put(root, "sys/class/power_supply/hidpp_battery_0/capacity", "5")
    put(root, "proc/loadavg", "0.50 0.40 0.30 2/300 999")  # steady: no load-driven re-tunes
    return root

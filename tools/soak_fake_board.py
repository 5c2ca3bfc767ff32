"""A fake Raspberry Pi 4 sysfs tree that heats as this process runs, and the soak on it.

    python tools/soak_fake_board.py ARTIFACT [--seconds 60] [--interval 5] [--plot F.svg]
                                    [-- more edgekit bench options]

The tree is ``tests/edgekit/fake_sysfs.pi4_tree`` (the files a Pi 4 exposes, in the
kernel's formats); a ``Heater`` thread turns this process's CPU time into degrees (from 70 C,
``c_per_cpu_s`` per CPU second, cooling slowly towards 45 C) and past the rpi4 profile's
80 C soft limit sets the firmware's throttle bits (0x60006: frequency capped and throttled,
now and since boot) and drops ``scaling_cur_freq`` to 1000 MHz, as a Pi 4 in a case does.
The host's CPU does not slow down: the latency columns are the host's, the board columns
the fake tree's. The soak tests (``tests/edgekit/test_soak.py``) heat the same way.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.edgekit.fake_sysfs import pi4_tree  # noqa: E402

HOT_C = 80.0  # the rpi4 profile's soft limit: the firmware starts stepping the clock down
# the Pi 4 firmware's steps (raspberrypi/documentation frequency-management.adoc): 1500 MHz
# below 80 C, then 1000 / 750 / 600 MHz as it nears the 85 C hard limit
STEPS = ((83.0, 600000), (81.5, 750000), (HOT_C, 1000000))


class Heater:
    """Heats the fake tree by ``c_per_cpu_s`` degrees per CPU second this process uses at
    1500 MHz (the tests' default 20, from 70 C: a full core reaches HOT_C in 0.5 s, a
    quarter of one in 2 s; the machine running the tests is shared), less at a lower clock
    (heat ~ f^2: dynamic power ~ f V^2), cooling towards 45 C; past HOT_C throttled
    (get_throttled 0x60006: frequency capped and throttled, now and since boot) with
    ``scaling_cur_freq`` stepped down by STEPS, so the temperature settles near 80 C."""

    def __init__(self, root: Path, start_c: float = 70.0, c_per_cpu_s: float = 20.0) -> None:
        self.root, self.temp, self.rate = root, start_c, c_per_cpu_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self._write()

    def _put(self, rel: str, text: str) -> None:
        """Replace a file whole (a reader never sees it half written, as with sysfs)."""
        path = self.root / rel
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text + "\n")
        os.replace(tmp, path)

    @property
    def khz(self) -> int:
        return next((khz for limit, khz in STEPS if self.temp >= limit), 1500000)

    def _write(self) -> None:
        hot = self.temp >= HOT_C
        self._put("sys/class/thermal/thermal_zone0/temp", str(int(self.temp * 1000)))
        self._put("sys/devices/platform/soc/soc:firmware/get_throttled", "60006" if hot else "0")
        for cpu in range(4):
            self._put(f"sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq",
                      str(self.khz))

    def _loop(self) -> None:
        last = sum(os.times()[:2])
        while not self.stop.wait(0.02):
            now = sum(os.times()[:2])
            heat = self.rate * (self.khz / 1500000) ** 2
            self.temp += heat * (now - last) - 0.0005 * (self.temp - 45.0)
            last = now
            self._write()



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("artifact")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--plot", default="soak.svg")
    parser.add_argument("--rate", type=float, help="per second (default: flat out)")
    parser.add_argument("--c-per-cpu-s", type=float, default=1.5,
                        help="degrees per CPU second of this process")
    args, extra = parser.parse_known_args(argv)
    from edgekit.cli import main as edgekit_main

    with tempfile.TemporaryDirectory() as tmp:
        root = pi4_tree(Path(tmp) / "pi4", temp_mc=70000)
        heater = Heater(root, c_per_cpu_s=args.c_per_cpu_s)
        heater.thread.start()
        try:
            return edgekit_main(["bench", args.artifact, "--soak", str(args.seconds),
                                 "--interval", str(args.interval), "--root", str(root),
                                 "--plot", args.plot,
                                 *(["--rate", str(args.rate)] if args.rate else []), *extra])
        finally:
            heater.stop.set()
            heater.thread.join()


if __name__ == "__main__":
    sys.exit(main())

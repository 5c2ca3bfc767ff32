"""A fake Raspberry Pi 4 sysfs tree that heats as this process runs, and the soak on it.

    python tools/studies/soak_fake_board.py ARTIFACT [--seconds 60] [--interval 5] [--plot F.svg]
                                    [--emulate rpi4] [more edgekit bench options]

``--emulate rpi4``: the soak runs inside ``qemu-aarch64 -cpu cortex-a72`` in the sysroot
``edgekit emulate`` builds (this checkout's device package; no click there, so through
``edgekit.ops.soak`` directly), and the emulator's CPU time heats the tree.

The tree is ``tests/edgekit/fake_sysfs.pi4_tree`` (the files a Pi 4 exposes, in the
kernel's formats); a ``Heater`` thread turns this process's CPU time into degrees (from 70 C,
``c_per_cpu_s`` per CPU second, cooling slowly towards 45 C) and past the rpi4 profile's
80 C soft limit sets the firmware's throttle bits (0x60006: frequency capped and throttled,
now and since boot) and drops ``scaling_cur_freq`` to 1000 MHz, as a Pi 4 in a case does.
The host's CPU does not slow down: the latency columns are the host's, the board columns
the fake tree's. The soak tests (``tests/edgekit/ops/test_soak.py``) heat the same way.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
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

    def __init__(self, root: Path, start_c: float = 70.0, c_per_cpu_s: float = 20.0,
                 load_seconds: Callable[[], float] = lambda: sum(os.times()[:2])) -> None:
        """``load_seconds``: the seconds of load so far (this process's CPU time; for an
        emulated guest running flat out, the wall clock)."""
        self.root, self.temp, self.rate = root, start_c, c_per_cpu_s
        self.load_seconds = load_seconds
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
        last = self.load_seconds()
        while not self.stop.wait(0.02):
            now = self.load_seconds()
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
                        help="degrees per CPU second of this process (--emulate: per second)")
    parser.add_argument("--emulate", metavar="TARGET",
                        help="run the soak inside qemu-aarch64 on TARGET's CPU (e.g. rpi4), "
                        "in the sysroot edgekit emulate uses; the guest's CPU time heats")
    parser.add_argument("--start-c", type=float, default=70.0, help="starting temperature")
    args, extra = parser.parse_known_args(argv)
    bench = ["bench", args.artifact, "--soak", str(args.seconds),
             "--interval", str(args.interval), "--plot", args.plot,
             *(["--rate", str(args.rate)] if args.rate else []), *extra]
    with tempfile.TemporaryDirectory() as tmp:
        root = pi4_tree(Path(tmp) / "pi4", temp_mc=int(args.start_c * 1000))
        guest: list[int] = []  # the emulator's pid once started: its CPU time heats the tree
        heater = Heater(root, start_c=args.start_c, c_per_cpu_s=args.c_per_cpu_s,
                        **({"load_seconds": lambda: cpu_seconds(guest)} if args.emulate
                           else {}))
        heater.thread.start()
        try:
            if args.emulate:
                return emulated(args.emulate, args, root, extra, guest)
            from edgekit.cli import main as edgekit_main

            return edgekit_main([*bench, "--root", str(root)])
        finally:
            heater.stop.set()
            heater.thread.join()


# The guest's sysroot has no click (the device runtime needs none): the soak runs through
# edgekit.ops.soak directly, as the command would.
GUEST = """
import sys, edgekit
from pathlib import Path
from edgekit.adapt.probe import probe_feeds
from edgekit.ops.soak import HEADER, line, plot, run_soak, summarize, summary_lines
art, seconds, interval, root, svg, backend, threads = sys.argv[1:8]
model = edgekit.load(art, backend=backend or None, threads=int(threads), power_root=root)
x = next(iter(probe_feeds(model.inputs, model.artifact.test_vectors()).values()))
for _ in range(5):
    model.predict(x)
print(f"{art}: soak {seconds} s flat out, {model.runtime} {threads} thread(s), {interval} s "
      "intervals, emulated", flush=True)
print(HEADER, flush=True)
intervals = run_soak(model, x, float(seconds), None, float(interval), root,
                     on_interval=lambda i: print(line(i), flush=True))
summary = summarize(intervals)
Path(svg).write_text(plot(intervals, summary, f"{Path(art).name}: soak {seconds} s, emulated"))
print(chr(10).join(summary_lines(summary)))
model.close()
"""


def cpu_seconds(pids: list[int]) -> float:
    """CPU seconds of the first process in ``pids`` (proc/PID/stat utime + stime, all its
    threads); 0 before it starts or once it is gone."""
    try:
        fields = Path(f"/proc/{pids[0]}/stat").read_text().rsplit(")", 1)[1].split()
    except (IndexError, OSError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def emulated(target: str, args: argparse.Namespace, root: Path, extra: list[str],
             guest: list[int]) -> int:
    """The soak on the target's emulated CPU (``edgekit emulate``'s sysroot, with this
    checkout's device package in it); its output streams through. ``extra``: --backend B
    and --threads N are read."""
    import subprocess

    from edgekit.converters.emulation.runner import guest_env, python_command
    from edgekit.converters.emulation.session import prepare
    from edgekit.targets import load_profile

    options = dict(zip(extra[::2], extra[1::2], strict=False))
    sysroot, cpu = prepare(load_profile(target), progress=print)
    print(f"emulated: qemu-aarch64 -cpu {cpu.model}", flush=True)
    argv = python_command(sysroot, cpu, "-c", GUEST, str(Path(args.artifact).resolve()),
                          str(args.seconds), str(args.interval), str(root),
                          str(Path(args.plot).resolve()), options.get("--backend", ""),
                          options.get("--threads", "1"))
    with subprocess.Popen(argv, env=guest_env()) as process:
        guest.append(process.pid)
        return process.wait()


if __name__ == "__main__":
    sys.exit(main())

"""What bounding every batcher run costs (issue 36.7): submit throughput with the default run
bound (each batch through ``edgekit/device/timed_run.py``'s helper thread) against the same batcher
unbounded (``run_timeout_s=None``, the old default), in alternating paired blocks.

    python tools/benchmarks/bench_run_bound.py [--requests 4000] [--blocks 6] [--submitters 4]

Prints requests/s of each side per block and the median ratio bounded / unbounded.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import edgekit  # noqa: E402
from edgekit.batching.batcher import Batcher  # noqa: E402

DIGITS = REPO / "examples" / "raspberrypi" / "digits.rpi4.edgekit"


def throughput(batcher: Batcher, xs: list[np.ndarray], submitters: int) -> float:
    """Requests per second through ``batcher`` from ``submitters`` threads."""
    share = [xs[i::submitters] for i in range(submitters)]
    futures: list = []
    lock = threading.Lock()

    def submit(part: list[np.ndarray]) -> None:
        mine = [batcher.submit(x) for x in part]
        with lock:
            futures.extend(mine)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=submit, args=(part,)) for part in share]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for future in futures:
        future.result(timeout=60)
    return len(xs) / (time.perf_counter() - t0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--submitters", type=int, default=4)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    xs = [rng.random((1, 1, 8, 8), dtype=np.float32) for _ in range(args.requests)]
    with edgekit.load(DIGITS, backend="onnxruntime", threads=1, power_aware=False) as model:
        sides = {
            "bounded": Batcher(model.session, budget_ms=100.0, max_wait_ms=1.0,
                               run_timeout_s=model.run_timeout_s),
            "unbounded": Batcher(model.session, budget_ms=100.0, max_wait_ms=1.0,
                                 run_timeout_s=None),
        }
        for batcher in sides.values():
            throughput(batcher, xs[:200], args.submitters)  # warm-up, per-row proof
        rates: dict[str, list[float]] = {name: [] for name in sides}
        for block in range(args.blocks):
            order = list(sides) if block % 2 == 0 else list(reversed(sides))
            for name in order:
                rates[name].append(throughput(sides[name], xs, args.submitters))
            print(f"block {block}: " + ", ".join(f"{n} {rates[n][-1]:.0f} req/s" for n in sides))
        for batcher in sides.values():
            batcher.close()
    ratios = [b / u for b, u in zip(rates["bounded"], rates["unbounded"], strict=True)]
    print(f"run bound {model.run_timeout_s:g} s; bounded / unbounded throughput: median "
          f"{statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}) "
          f"over {args.blocks} paired blocks of {args.requests} requests, "
          f"{args.submitters} submitters, digits int8 on onnxruntime, 1 thread")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""predict of an int8 ONNX artifact unfused (exact: the default on x86 without VNNI) against
fused (``edgekit.load(..., exact_int8=False)``) and, when given, the float source in a plain
onnxruntime session: 1 thread, interleaved blocks, thread CPU time medians.

    python tools/benchmarks/bench_exact_int8.py ART.edgekit [--float model.onnx] [--input x.npz]

On a CPU with VNNI (this VM's EPYC reports avx512_vnni) edgekit would run the model fused;
the unfused row is then forced as a no-VNNI CPU gets it (``edgekit.device.cpu.u8s8_saturates``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("artifact")
    parser.add_argument("--float", dest="float_model", help="the float source .onnx")
    parser.add_argument("--input", help=".npz whose first array's first sample is the input")
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    import edgekit.device.cpu

    edgekit.device.cpu.u8s8_saturates = lambda: True  # type: ignore[assignment]  # a no-VNNI x86 CPU
    import onnxruntime as ort

    import edgekit

    exact = edgekit.load(args.artifact, backend="onnxruntime", threads=1)
    fast = edgekit.load(args.artifact, backend="onnxruntime", threads=1, exact_int8=False)
    spec = exact.inputs[0]
    if args.input:
        with np.load(args.input) as npz:
            x = np.ascontiguousarray(npz[npz.files[0]][:1], np.float32)
    else:
        x = np.random.default_rng(0).standard_normal([d if isinstance(d, int) else 1
                                                      for d in spec.shape]).astype(np.float32)
    runs = {"int8 unfused (default here)": lambda: exact.predict(x),
            "int8 fused (exact_int8=False)": lambda: fast.predict(x)}
    if args.float_model:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        plain = ort.InferenceSession(args.float_model, options, providers=["CPUExecutionProvider"])
        name = plain.get_inputs()[0].name
        runs["float (plain onnxruntime)"] = lambda: plain.run(None, {name: x})
    times: dict[str, list[float]] = {k: [] for k in runs}
    for run in runs.values():
        run()
    for r in range(args.rounds):
        for key, run in (list(runs.items()) if r % 2 == 0 else list(runs.items())[::-1]):
            began = time.thread_time()
            for _ in range(3):
                run()
            times[key].append((time.thread_time() - began) / 3 * 1e3)
    print(f"{args.artifact}: load average {os.getloadavg()[0]:.1f}; thread CPU ms per predict, "
          f"median of {args.rounds} interleaved blocks, 1 thread")
    for key, values in times.items():
        print(f"  {key:30s} {statistics.median(values):8.2f} ms")
    ratio = statistics.median(times["int8 unfused (default here)"]) / statistics.median(
        times["int8 fused (exact_int8=False)"])
    print(f"  unfused / fused: {ratio:.2f}x")


if __name__ == "__main__":
    main()

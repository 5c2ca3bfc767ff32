"""Which node of an int8 ONNX artifact first differs between this host and an emulated Arm CPU.

Every QuantizeLinear output (the uint8/int8 activations the QDQ graph hands from layer to
layer) becomes a graph output; the host runs the graph unfused (exact int8: this AMD CPU's
fused U8S8 kernels saturate, ``edgekit/device/cpu.py``), the emulated CPU runs it at each
onnxruntime optimization level. Fusing keeps the QuantizeLinear outputs as the fused
QLinear* ops' outputs, so each level is compared tensor by tensor in steps, in graph order::

    python tools/studies/diagnose_cross_isa.py squeezenet.rpi4.edgekit inputs.npz --target rpi4

Used for the zoo's squeezenet (README, "Cross-ISA fidelity").
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

LEVELS = ("ORT_DISABLE_ALL", "BASIC", "EXTENDED", "ALL")

# Runs inside the emulator: numpy and onnxruntime only.
GUEST = '''
import sys, numpy as np, onnxruntime as ort
model, feeds_path, out_path, levels = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
disabled = [d for d in sys.argv[5].split(",") if d]
feeds = dict(np.load(feeds_path))
found = {}
for level in levels.split(","):
    opts = ort.SessionOptions()
    opts.graph_optimization_level = getattr(ort.GraphOptimizationLevel,
                                            level if level.startswith("ORT_") else "ORT_ENABLE_" + level)
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"],
                                disabled_optimizers=disabled)
    names = [o.name for o in sess.get_outputs()]
    for name, value in zip(names, sess.run(None, feeds)):
        found[level + "/" + name] = value
np.savez(out_path, **found)
print("done", len(found))
'''


def expose_quantized(model_bytes: bytes) -> tuple[bytes, list[str]]:
    """The model with every QuantizeLinear output also a graph output (graph order)."""
    import onnx

    model = onnx.load_from_string(model_bytes)
    present = {o.name for o in model.graph.output}
    names = []
    for node in model.graph.node:
        if node.op_type == "QuantizeLinear" and node.output[0] not in present:
            names.append(node.output[0])
            model.graph.output.append(onnx.ValueInfoProto(name=node.output[0]))
    return model.SerializeToString(), names


def host_run(path: str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    from edgekit.converters.core.runner import session

    sess = session(path, exact_int8=True)
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds), strict=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("artifact")
    parser.add_argument("inputs", help="npz of one sample's inputs under the model's names")
    parser.add_argument("--target", default="rpi4")
    parser.add_argument("--levels", default=",".join(LEVELS))
    parser.add_argument("--disable", default="", help="onnxruntime optimizers the emulated "
                        "sessions leave out (comma-separated), e.g. WeightBiasQuantization")
    parser.add_argument("--show", type=int, default=40, help="tensors printed per level")
    args = parser.parse_args(argv)

    from edgekit.converters.emulation import prepare, run_python
    from edgekit.targets import load_profile

    from edgekit.artifact.archive import read_artifact

    artifact = read_artifact(args.artifact)
    member = next(m["path"] for m in artifact.manifest["models"] if m["format"] == "onnx")
    exposed, names = expose_quantized(artifact.read(member))
    scales = _scales(exposed)
    with tempfile.TemporaryDirectory(prefix="edgekit-diagnose-") as tmp:
        model = Path(tmp, "exposed.onnx")
        model.write_bytes(exposed)
        feeds = dict(np.load(args.inputs))
        host = host_run(str(model), feeds)
        np.savez(Path(tmp, "feeds.npz"), **feeds)
        script = Path(tmp, "guest.py")
        script.write_text(GUEST)
        sysroot, cpu = prepare(load_profile(args.target), print)
        proc = run_python(sysroot, cpu, [str(script), str(model), str(Path(tmp, "feeds.npz")),
                                         str(Path(tmp, "arm.npz")), args.levels, args.disable], timeout=3600)
        if proc.returncode != 0:
            print(proc.stderr[-3000:], file=sys.stderr)
            return 1
        arm = dict(np.load(Path(tmp, "arm.npz")))
    final = [n for n in host if n not in names]
    for level in args.levels.split(","):
        print(f"== {cpu.model} onnxruntime {level} (without: {args.disable or '-'}) vs host unfused "
              "(tensor: max |diff| in steps, share differing)")
        shown = 0
        for name in names + final:
            ours, theirs = host[name], arm[f"{level}/{name}"]
            if ours.dtype.kind in "ui":
                diff = np.abs(ours.astype(np.int32) - theirs.astype(np.int32))
                worst, unit = int(diff.max()), "steps"
            else:
                diff = np.abs(ours - theirs) / scales.get(name, 1.0)
                worst, unit = float(diff.max()), "(float)"
            if shown < args.show or name in final:
                print(f"  {name:48s} {worst:>8} {unit} {np.mean(diff > 0):7.2%}")
                shown += 1
    return 0


def _scales(model_bytes: bytes) -> dict[str, float]:
    """Scale of each QuantizeLinear output (for reading float outputs too)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load_from_string(model_bytes)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    return {n.output[0]: float(np.max(inits[n.input[1]])) for n in model.graph.node
            if n.op_type == "QuantizeLinear" and n.input[1] in inits}


if __name__ == "__main__":
    raise SystemExit(main())

"""Perturb one int8 weight of an artifact's model(s), re-hash, write a new artifact.

    python tools/perturb_weight.py IN.edgekit OUT.edgekit [--format tflite|onnx]

Checks that verification keeps its teeth (issue 16): in the layer nearest the outputs (the
last convolution or fully connected layer), the largest-magnitude weight changes sign. The
artifact still loads (its members are re-hashed); only the model computes something else.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

WEIGHTED_TFLITE = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV"}
WEIGHTED_ONNX = {"Conv", "ConvTranspose", "Gemm", "MatMul"}


def flip(values: np.ndarray) -> tuple[np.ndarray, int]:
    """A copy with the largest-magnitude int8 value negated (-128 becomes 127)."""
    out = values.copy().reshape(-1)
    i = int(np.abs(out.astype(np.int16)).argmax())
    out[i] = np.int8(max(-127, min(127, -int(out[i]))))
    return out.reshape(values.shape), i


def perturb_tflite(blob: bytes) -> tuple[bytes, str]:
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_content=blob)
    ops = [op for op in interpreter._get_ops_details() if op["op_name"] in WEIGHTED_TFLITE]
    if not ops:
        raise ValueError("the .tflite has no convolution or fully connected layer")
    index = int(ops[-1]["inputs"][1])
    weight = interpreter.get_tensor(index)
    raw = weight.tobytes()
    at = blob.find(raw)
    if at < 0 or blob.find(raw, at + 1) >= 0:
        raise ValueError("could not locate the weight's bytes in the .tflite uniquely")
    new, i = flip(weight)
    name = interpreter.get_tensor_details()[index]["name"]
    return blob[:at] + new.tobytes() + blob[at + len(raw):], f"tflite {name}[{i}]"


def perturb_onnx(blob: bytes) -> tuple[bytes, str]:
    import onnx
    from onnx import numpy_helper

    model = onnx.load_from_string(blob)
    inits = {t.name: t for t in model.graph.initializer}
    producer = {o: n for n in model.graph.node for o in n.output}
    for node in reversed(model.graph.node):
        if node.op_type not in WEIGHTED_ONNX or len(node.input) < 2:
            continue
        dq = producer.get(node.input[1])
        source = dq.input[0] if dq is not None and dq.op_type == "DequantizeLinear" else ""
        if source in inits and inits[source].data_type == onnx.TensorProto.INT8:
            values, i = flip(numpy_helper.to_array(inits[source]))
            inits[source].CopyFrom(numpy_helper.from_array(values, source))
            return model.SerializeToString(), f"onnx {source}[{i}]"
    raise ValueError("the .onnx has no int8 weight feeding a convolution or matrix product")


def perturb_artifact(src: str | Path, dst: str | Path, fmt: str | None = None) -> list[str]:
    """Write ``dst``: ``src`` with one weight flipped in each model (or in ``fmt`` only)."""
    from edgekit.artifact import read_artifact, write_artifact

    artifact = read_artifact(src)
    members = {n: artifact.read(n) for n in artifact.members if n != "manifest.json"}
    done = []
    for entry in artifact.spec.models:
        if fmt and entry.format != fmt:
            continue
        change = perturb_tflite if entry.format == "tflite" else perturb_onnx
        members[entry.path], what = change(members[entry.path])
        done.append(what)
    manifest = {k: v for k, v in artifact.manifest.items() if k != "files"}
    for model in manifest["models"]:  # the entries' own hashes follow the new bytes
        if model["path"] in members and "sha256" in model:
            from edgekit.artifact import sha256_bytes

            model["sha256"] = sha256_bytes(members[model["path"]])
    write_artifact(dst, manifest, members)
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src")
    parser.add_argument("dst")
    parser.add_argument("--format", choices=("tflite", "onnx"))
    args = parser.parse_args(argv)
    for what in perturb_artifact(args.src, args.dst, args.format):
        print(f"flipped {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Perturb one int8 weight of an artifact's model(s), re-hash, write a new artifact.

    python tools/studies/perturb_weight.py IN.edgekit OUT.edgekit [--format tflite|onnx]

Checks that verification keeps its teeth (issue 16): one int8 weight changes sign. Candidates
are the largest-magnitude weights of the layer nearest the outputs, then of the first layer,
then of every other layer, then a sweep over each layer's channels (``CANDIDATES``); the first
whose change the host can see on the artifact's own test vectors is kept (a weight
whose input is zero on every test vector, e.g. behind a dead ReLU, changes nothing any check
could see: flipping the single largest one of the last layer was caught in 16 of 24 zoo
artifacts for that reason). The artifact still loads (its members are re-hashed); only the
model computes something else, and the emulated target must then fail too.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from edgekit.artifact.archive import Artifact

WEIGHTED_TFLITE = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV"}
WEIGHTED_ONNX = {"Conv", "ConvTranspose", "Gemm", "MatMul"}


# (layer, rank): the last weighted layer's largest weights first, then the first layer's, then
# every other layer's three largest from the outputs back, then a sweep of each layer's ranks
# 3..511 by 8 (with per-channel scales every channel's largest is +-127, so those ranks walk
# over channels). silero_like_vad needed the sweep: flipping any of the first 33 moved its
# state by at most one step (its sigmoid gates saturate; one weight of 128 behind a sigmoid);
# rank 284 of its LSTM's input weights, a tanh-gate row, moved it 15 steps.
CANDIDATES = ([(layer, rank) for layer in (-1, 0) for rank in range(6)]
              + [(-back, rank) for back in range(2, 65) for rank in range(3)]
              + [(-back, rank) for back in range(1, 65) for rank in range(3, 512, 8)])
MAX_TRIES = 600  # a model no flip can move is reported after this many, not after hours


def flip(values: np.ndarray, rank: int = 0) -> tuple[np.ndarray, int]:
    """A copy with the ``rank``-th largest-magnitude int8 value negated (-128 becomes 127)."""
    out = values.copy().reshape(-1)
    i = int(np.argsort(-np.abs(out.astype(np.int16)), kind="stable")[min(rank, out.size - 1)])
    out[i] = np.int8(max(-127, min(127, -int(out[i]))))
    return out.reshape(values.shape), i


def perturb_tflite(blob: bytes, layer: int = -1, rank: int = 0) -> tuple[bytes, str]:
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_content=blob)
    details = {d["index"]: d for d in interpreter.get_tensor_details()}
    # int8 weights only: a layer the guard moved to fp16 reads its weights through a
    # DEQUANTIZE of float16 constants, a tensor with no data of its own
    ops = [op for op in interpreter._get_ops_details() if op["op_name"] in WEIGHTED_TFLITE
           and details.get(int(op["inputs"][1]), {}).get("dtype") == np.int8]
    if not ops:
        raise ValueError("the .tflite has no int8 convolution or fully connected layer")
    index = int(ops[layer]["inputs"][1])
    weight = interpreter.get_tensor(index)
    raw = weight.tobytes()
    at = blob.find(raw)
    if at < 0 or blob.find(raw, at + 1) >= 0:
        raise ValueError("could not locate the weight's bytes in the .tflite uniquely")
    new, i = flip(weight, rank)
    name = details[index]["name"]
    return blob[:at] + new.tobytes() + blob[at + len(raw):], f"tflite {name}[{i}]"


def perturb_onnx(blob: bytes, layer: int = -1, rank: int = 0) -> tuple[bytes, str]:
    import onnx
    from onnx import numpy_helper

    model = onnx.load_from_string(blob)
    inits = {t.name: t for t in model.graph.initializer}
    producer = {o: n for n in model.graph.node for o in n.output}
    weighted = []
    for node in model.graph.node:
        if node.op_type not in WEIGHTED_ONNX or len(node.input) < 2:
            continue
        dq = producer.get(node.input[1])
        source = dq.input[0] if dq is not None and dq.op_type == "DequantizeLinear" else ""
        if source in inits and inits[source].data_type == onnx.TensorProto.INT8:
            weighted.append(source)
    if weighted:
        source = weighted[layer]
        values, i = flip(numpy_helper.to_array(inits[source]), rank)
        inits[source].CopyFrom(numpy_helper.from_array(values, source))
        return model.SerializeToString(), f"onnx {source}[{i}]"
    raise ValueError("the .onnx has no int8 weight feeding a convolution or matrix product")


def _write(artifact: Artifact, dst: str | Path, members: dict[str, bytes]) -> None:
    from edgekit.artifact.archive import sha256_bytes, write_artifact

    manifest = {k: v for k, v in artifact.manifest.items() if k != "files"}
    for model in manifest["models"]:  # the entries' own hashes follow the new bytes
        if model["path"] in members and "sha256" in model:
            model["sha256"] = sha256_bytes(members[model["path"]])
    write_artifact(dst, manifest, members)


def _host_sees(dst: str | Path, fmt: str) -> bool:
    from edgekit.backends import backends_for
    from edgekit.ops.verify import verify_artifact

    usable = [c for c in backends_for(fmt) if c.format == fmt and c.available()]
    if not usable:
        return True  # nothing to ask on this host: keep the first candidate
    report = verify_artifact(dst, backend=usable[0].name)
    return not all(f.passed for f in report.formats if f.format == fmt)


def _first_visible(artifact: Artifact, dst: str | Path, members: dict[str, bytes], path: str,
                   fmt: str) -> str | None:
    """Flip candidates in order into ``members[path]`` until the host's verify sees one."""
    change = perturb_tflite if fmt == "tflite" else perturb_onnx
    original, tried = members[path], 0
    for layer, rank in CANDIDATES:
        try:
            members[path], what = change(original, layer, rank)
        except IndexError:  # fewer weighted layers than this candidate reaches back
            continue
        tried += 1
        _write(artifact, dst, members)
        if _host_sees(dst, fmt):
            return f"{what} (candidate {tried})"
        if tried == MAX_TRIES:
            break
    members[path] = original
    return None


def perturb_artifact(src: str | Path, dst: str | Path, fmt: str | None = None) -> list[str]:
    """Write ``dst``: ``src`` with one weight flipped in each model (or in ``fmt`` only), the
    first candidate whose change the host's verify sees; ``ValueError`` if none does."""
    from edgekit.artifact.archive import read_artifact

    artifact = read_artifact(src)
    members = {n: artifact.read(n) for n in artifact.members if n != "manifest.json"}
    done = []
    for entry in artifact.spec.models:
        if fmt and entry.format != fmt:
            continue
        what = _first_visible(artifact, dst, members, entry.path, entry.format)
        if what is None:
            raise ValueError(f"no single flipped weight of the {entry.format} model changes its "
                             f"test-vector outputs beyond the tolerance (up to {MAX_TRIES} tried)")
        done.append(what)
    _write(artifact, dst, members)
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

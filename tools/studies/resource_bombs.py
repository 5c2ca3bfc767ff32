"""Resource bombs for the loader fuzzer (tools/studies/fuzz_artifact.py) and the tests: small files
and settings that ask the runtime for gigabytes or forever. Each is run by ``probe`` in a
fresh interpreter that prints its outcome and its own peak RSS; the claim is a typed
refusal (or a bounded run) at a peak RSS under 200 MB, the whole process included.

    bombs = build_bombs(folder)          # name -> Python code run in a fresh process
    report = probe(code)                 # {"result": ..., "peak_mb": ..., "seconds": ...}
"""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import textwrap
import time
import zipfile
import zlib
from pathlib import Path

import numpy as np

from tools.fixtures import artifact_cases as cases

REPO = Path(__file__).resolve().parents[2]
PEAK_BOUND_MB = 200.0
FEATURES = 3


def huge_activation_tflite(activation: tuple[int, ...] = (1 << 22, 8, 8, 32)) -> bytes:
    """A ~0.4 kB float .tflite y = (x + x) + (x + x) whose middle tensor declares
    ``activation`` (int8 [2^22, 8, 8, 32]: 8 GiB): LiteRT accepts it and allocates it."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as S  # noqa: N812 - the schema's own name

    def tensor(name: str, shape: tuple[int, ...], kind: int) -> object:
        t = S.TensorT()
        t.name, t.shape, t.type, t.buffer = name.encode(), list(shape), kind, 0
        return t

    graph = S.SubGraphT()
    graph.tensors = [tensor("x", (1, FEATURES), S.TensorType.FLOAT32),
                     tensor("mid", activation, S.TensorType.INT8),
                     tensor("y", (1, FEATURES), S.TensorType.FLOAT32)]
    graph.inputs, graph.outputs = [0], [2]
    ops = []
    for inputs, output in (([0, 0], 1), ([1, 1], 2)):
        op = S.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = 0, inputs, [output]
        ops.append(op)
    graph.operators = ops
    code = S.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = S.BuiltinOperator.ADD
    code.version = 1
    model = S.ModelT()
    model.version, model.operatorCodes, model.subgraphs = 3, [code], [graph]
    model.buffers = [S.BufferT()]
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def value_info_onnx(shape: tuple[int, ...] = (1 << 22, 8, 8, 32)) -> bytes:
    """x -> Relu -> mid -> Relu -> y with ``mid`` declared ``shape`` (float: 32 GiB)."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", FEATURES])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", FEATURES])
    mid = helper.make_tensor_value_info("mid", TensorProto.FLOAT, list(shape))
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["mid"]),
                               helper.make_node("Relu", ["mid"], ["y"])], "g", [x], [y],
                              value_info=[mid])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def one_model_artifact(path: Path, fmt: str, model: bytes,
                       input_shape: list | None = None) -> Path:
    """A hand-packed artifact (no write_artifact checks) holding one model."""
    manifest, _ = cases.base_members()
    manifest["inputs"] = [{"name": "x", "shape": input_shape or ["N", FEATURES],
                           "dtype": "float32"}]
    manifest["outputs"] = [{"name": "y", "shape": ["N", FEATURES], "dtype": "float32"}]
    name = f"model.{fmt}"
    manifest["models"] = [{"format": fmt, "path": name,
                           "runtime": "litert" if fmt == "tflite" else "onnxruntime"}]
    manifest.pop("test_vectors", None)
    members = [(name, model)]
    path.write_bytes(cases.artifact_bytes(cases.rehash(manifest, members), members))
    return path


def two_gib_members(path: Path, member_mb: int = 1000, ratio: int = 70) -> Path:
    """Two listed members of ``member_mb`` MB each compressing ``ratio``x (under the 200x
    zip-bomb limit): loaded in 65 s at 3.1 GiB before. Written streaming (~30 MB file)."""
    manifest, members = cases.base_members()
    chunk = os.urandom((1 << 20) // ratio) + bytes((1 << 20) - (1 << 20) // ratio)
    digest = __import__("hashlib").sha256()
    for _ in range(member_mb):
        digest.update(chunk)
    extra = {"a.bin": digest.hexdigest(), "b.bin": digest.hexdigest()}
    listed = cases.rehash(manifest, members)
    listed["files"].update(extra)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        archive.writestr(cases.MANIFEST, json.dumps(listed))
        for name, data in members:
            archive.writestr(name, data)
        for name in extra:
            with archive.open(name, "w") as out:
                for _ in range(member_mb):
                    out.write(chunk)
    return path


def vectors_bomb(path: Path, kind: str) -> Path:
    """Test vectors holding a nested zip bomb (64 MB of zeros) or an .npy header claiming a
    terabyte."""
    manifest, members = cases.base_members()
    with np.load(io.BytesIO(dict(members)["test_vectors.npz"])) as npz:
        arrays: dict = {k: npz[k] for k in npz.files}
    if kind == "nested":
        arrays["out/onnx/y"] = bytes(64 << 20)
    else:
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False,
                                                      "shape": (1 << 40,)})
        arrays["out/onnx/y"] = header.getvalue() + bytes(64)
    changed = [(n, cases.npz_bytes(arrays) if n == "test_vectors.npz" else d)
               for n, d in members]
    path.write_bytes(cases.artifact_bytes(cases.rehash(manifest, changed), changed))
    return path


def png_claiming(path: Path, width: int, height: int) -> Path:
    ihdr = b"IHDR" + struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    idat = b"IDAT" + zlib.compress(b"\0" * 64)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + ihdr
                     + struct.pack(">I", zlib.crc32(ihdr)) + struct.pack(">I", len(idat) - 4)
                     + idat + struct.pack(">I", zlib.crc32(idat)) + struct.pack(">I", 0)
                     + b"IEND" + struct.pack(">I", zlib.crc32(b"IEND")))
    return path


def endless_onnx() -> bytes:
    """y = 2 x after x[0, 0] iterations of a Loop (x = 1e12: never ends)."""
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", FEATURES])
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Identity", ["v_in"], ["v_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, ["N", FEATURES])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, ["N", FEATURES])])
    nodes = [helper.make_node("ReduceMax", ["x"], ["top"], keepdims=0),
             helper.make_node("Cast", ["top"], ["trips"], to=TensorProto.INT64),
             helper.make_node("Loop", ["trips", "true", "x"], ["v"], body=body),
             helper.make_node("Add", ["v", "v"], ["y"])]
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", FEATURES])
    graph = helper.make_graph(nodes, "g", [x], [y],
                              [numpy_helper.from_array(np.array(True), "true")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


LOAD = "edgekit.load({path!r}, threads=1, trusted_keys=[]{extra})"


def build_bombs(folder: Path, zip_gib: float = 4.0) -> dict[str, str]:
    """name -> the Python statement that sets one bomb off (in a fresh process)."""
    folder.mkdir(parents=True, exist_ok=True)
    fake = folder / "fake-root"
    (fake / "proc").mkdir(parents=True, exist_ok=True)
    if not (fake / "proc/stat").exists():
        (fake / "proc/stat").symlink_to("/dev/zero")
    zip_bomb, lying = folder / "zip.edgekit", folder / "lying.edgekit"
    zip_bomb.write_bytes(cases.bomb(zip_gib, lie=False))
    lying.write_bytes(cases.bomb(zip_gib, lie=True))
    tflite = one_model_artifact(folder / "tflite.edgekit", "tflite", huge_activation_tflite())
    onnx = one_model_artifact(folder / "onnx.edgekit", "onnx", value_info_onnx())
    shape = one_model_artifact(folder / "shape.edgekit", "onnx", cases.tiny_onnx(),
                               [1, 1, 46341, 46341])
    endless = one_model_artifact(folder / "endless.edgekit", "onnx", endless_onnx())
    digits = REPO / "examples" / "raspberrypi" / "digits.rpi4.edgekit"
    png = png_claiming(folder / "bomb.png", 100000, 100000)
    return {
        f"zip bomb {zip_gib:g} GiB": LOAD.format(path=str(zip_bomb), extra=""),
        f"zip bomb {zip_gib:g} GiB declaring 1000 bytes": LOAD.format(path=str(lying), extra=""),
        "two 1000 MB members at 70x": LOAD.format(
            path=str(two_gib_members(folder / "two.edgekit")), extra=""),
        "tflite declaring an 8 GiB activation": LOAD.format(path=str(tflite),
                                                            extra=", backend='litert'"),
        "onnx value info of 32 GiB": LOAD.format(path=str(onnx), extra=""),
        "input 1x1x46341x46341, threads=auto": (
            f"edgekit.load({str(shape)!r}, threads='auto', trusted_keys=[], "
            f"power_root={str(fake)!r})"),
        "proc/stat -> /dev/zero, threads=auto": (
            f"edgekit.load({str(digits)!r}, threads='auto', trusted_keys=[], "
            f"power_root={str(fake)!r}, tuner={{'budget_s': 0.3}}).close()"),
        "npz nested bomb in test vectors": LOAD.format(
            path=str(vectors_bomb(folder / "nested.edgekit", "nested")),
            extra="") + ".artifact.test_vectors()",
        "npy header claiming 4 TiB": LOAD.format(
            path=str(vectors_bomb(folder / "header.edgekit", "header")),
            extra="") + ".artifact.test_vectors()",
        "PNG claiming 100000x100000": (
            f"edgekit.load({str(digits)!r}, threads=1).predict_image({str(png)!r})"),
        "bench --batch 100000000": (
            "from edgekit.cli import main; code = main(['bench', "
            f"{str(digits)!r}, '--batch', '100000000', '--duration', '0']); "
            "assert code == 2, code; raise edgekit.errors.UserError('exit 2')"),
        "endless Loop, predict": (
            f"m = edgekit.load({str(endless)!r}, threads=1, run_timeout_s=1.0, "
            "trusted_keys=[]); m.predict(__import__('numpy').full((1, 3), 1e12, 'float32'))"),
    }


PROBE = """
import json, sys, time
sys.path.insert(0, {repo!r})
import edgekit, edgekit.errors
t0 = time.monotonic()
try:
    {statement}
    result = "no error"
except edgekit.errors.EdgekitError as exc:
    result = "typed " + type(exc).__name__ + ": " + str(exc)[-160:]
except BaseException as exc:
    result = "UNTYPED " + type(exc).__name__ + ": " + str(exc)[:160]
# VmHWM: this process's own peak (ru_maxrss keeps the parent's peak across fork and exec)
hwm = next(int(line.split()[1]) for line in open("/proc/self/status")
           if line.startswith("VmHWM:"))
print(json.dumps({{"result": result, "seconds": time.monotonic() - t0,
                  "peak_mb": hwm / 1024}}))
"""


def probe(statement: str, timeout: float = 300.0) -> dict:
    """Run one bomb in a fresh interpreter: its outcome, seconds and whole-process peak RSS."""
    code = PROBE.format(repo=str(REPO), statement=textwrap.dedent(statement))
    t0 = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"result": f"HANG (> {timeout:g} s)", "peak_mb": float("inf"),
                "seconds": time.monotonic() - t0}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"result": f"CRASH exit {proc.returncode}: {proc.stderr[-300:]}",
                "peak_mb": float("inf"), "seconds": time.monotonic() - t0}
    return json.loads(lines[-1])


def passed(report: dict) -> bool:
    """Refused typed (or, for a hostile system file, loaded), never untyped, hung or crashed,
    at a peak RSS under PEAK_BOUND_MB: what a bomb got at its worst."""
    bad = report["result"].startswith(("UNTYPED", "HANG", "CRASH"))
    return not bad and report["peak_mb"] < PEAK_BOUND_MB

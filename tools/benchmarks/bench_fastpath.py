"""The input fast path of issue 17, side by side in one process, printed as ratios.

    python tools/benchmarks/bench_fastpath.py [--vision A.edgekit --source A.onnx] [--rounds N]

On a 224x224 MobileNetV2-like net (random weights: speed only), batch 1, 1 and 2 threads:

1. .tflite ``predict`` (float NCHW) / a raw LiteRT ``set_tensor``/``invoke``/``get_tensor``
   with an input quantized beforehand (needs <= 1.05);
2. .tflite ``predict`` of the same image in NHWC / the raw call (no transpose: <= 1.05);
   and the same net written with float I/O (``tflite_float_io``: QUANTIZE and an int8
   TRANSPOSE inside the graph, on XNNPACK's threads) through ``predict`` / that raw call of
   the int8-input model (information: the in-graph alternative to the numpy write);
   and, for information, the input write with the rounding add (``tflite_io._MAGIC``) / with
   the separate rint + add + cast passes it replaced (thread CPU time);
3. ``submit(uint8 frame).result()`` / ``submit(float NCHW).result()`` (the frame is
   preprocessed on the caller's thread straight into NHWC);
4. edgekit ``--target host --format onnx`` through ``predict`` vs onnxruntime's own
   ``quantize_static`` U8S8 model through ``InferenceSession.run`` (speed, needs >= 1.00 at 1
   thread; as ``tools/benchmarks/bench_peers.py``).

Each pair runs in its own loop, blocks alternating which side goes first; a ratio is the median
of per-block ratios (1 thread: thread CPU time, 2 threads: wall time). Run it a few times on a
shared machine and read the medians.
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tools")]  # tools.* packages, and the zoo as ``zoo``

import edgekit  # noqa: E402
from tools.benchmarks.bench_peers import ort_session, ort_u8s8  # noqa: E402
from tools.benchmarks.common import bare_call, build_vision, one_input, paired  # noqa: E402


def tflite_rows(vision: Path, threads: int, rounds: int, float_io: Path | None = None
                ) -> list[tuple[str, float, str, bool]]:
    model = edgekit.load(vision, backend="litert", threads=threads, max_wait_ms=0)
    x = one_input(model)
    nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    frame = (np.random.default_rng(0).random(nhwc.shape[1:]) * 255).astype(np.uint8)
    raw = bare_call(model, x)
    rows = []
    r = paired(lambda: model.predict(x), raw, rounds, threads)
    rows.append((f".tflite predict NCHW / raw invoke ({threads}t)", r["ratio"], "<= 1.05",
                 r["ratio"] <= 1.05))
    r = paired(lambda: model.predict(nhwc), raw, rounds, threads)
    rows.append((f".tflite predict NHWC / raw invoke ({threads}t)", r["ratio"], "<= 1.05",
                 r["ratio"] <= 1.05))
    if float_io is not None:
        other = edgekit.load(float_io, backend="litert", threads=threads, max_wait_ms=0)
        np.testing.assert_allclose(other.predict(x), model.predict(x), atol=1e-6)
        r = paired(lambda: other.predict(x), raw, rounds, threads)
        other.close()
        rows.append((f"float-I/O .tflite predict NCHW / raw int8 invoke ({threads}t)",
                     r["ratio"], "info (time)", True))
    if threads == 1:  # the write alone, on this thread: no second interpreter in the loop
        rows.append((".tflite input write, rounding add / rint+add+cast passes (1t)",
                     write_ratio(model, x, rounds), "info (time)", True))
    # submit: the caller waits on the worker thread, so wall time at any thread count
    r = paired(lambda: model.submit(frame).result(), lambda: model.submit(x).result(),
               rounds, 2)
    rows.append((f"submit(uint8 frame) / submit(float NCHW) ({threads}t, wall)", r["ratio"],
                 "info (time)", True))
    model.close()
    return rows


def write_ratio(model: Any, x: np.ndarray, rounds: int) -> float:
    """The LiteRT input write (NCHW float -> int8 NHWC) with the rounding add
    (``tflite_io._MAGIC``) / with the separate rint, add and cast passes it replaced; the
    same codes, checked first."""
    plan = model.backend._in[0]  # noqa: SLF001 - the write path itself
    chain = copy.copy(plan)
    chain._magic = None  # noqa: SLF001 - the passes before the rounding add
    chain._buffer = chain._codes = None  # noqa: SLF001 - buffers of its own
    a, b = np.empty(plan.shape, plan.dtype), np.empty(plan.shape, plan.dtype)
    plan.write(x, a)
    chain.write(x, b)
    np.testing.assert_array_equal(a, b)
    return paired(lambda: plan.write(x, a), lambda: chain.write(x, b), rounds, 1)["ratio"]


def onnx_rows(source: Path, work: Path, threads: list[int], rounds: int
              ) -> list[tuple[str, float, str, bool]]:
    from edgekit.converters import build

    rng = np.random.default_rng(0)
    coarse = rng.random((16, 3, 14, 14)).astype(np.float32)
    data = np.ascontiguousarray(coarse.repeat(16, axis=2).repeat(16, axis=3))
    np.save(work / "calib.npy", data)
    host = build(str(source), target="host", calib=str(work / "calib.npy"), quiet=True,
                 output=work / "host.edgekit", formats=["onnx"])
    peer = ort_u8s8(source, work / "u8s8.onnx", data)
    x = data[:1].copy()
    rows = []
    for t in threads:
        model = edgekit.load(host.path, threads=t)
        session = ort_session(peer, t)
        feeds = {session.get_inputs()[0].name: x}
        r = paired(lambda s=session, f=feeds: s.run(None, f), lambda m=model: m.predict(x),
                   rounds, t)
        model.close()
        rows.append((f"edgekit onnx predict vs ORT U8S8 run ({t}t, speed)", r["ratio"],
                     ">= 1.00" if t == 1 else "info", r["ratio"] >= 1.0 or t != 1))
    return rows


def fastpath(vision: Path, source: Path, work: Path, rounds: int) -> list[tuple[Any, ...]]:
    from edgekit.converters import build

    float_io = build(str(source), target="rpi4", calib="synthetic", calib_samples=8, quiet=True,
                     output=work / "float_io.edgekit", formats=["tflite"],
                     tflite_float_io=True).path
    rows: list[tuple[Any, ...]] = []
    for threads in (1, 2):
        rows += tflite_rows(vision, threads, rounds, float_io)
    rows += onnx_rows(source, work, [1, 2], rounds)
    return rows


def print_rows(rows: list[tuple[Any, ...]]) -> None:
    width = max(len(r[0]) for r in rows)
    print(f"{'comparison':<{width}}  {'ratio':>7}  {'needs':<12} ok")
    for name, ratio, need, ok in rows:
        mark = "" if need.startswith("info") else ("PASS" if ok else "FAIL")
        print(f"{name:<{width}}  {ratio:>7.3f}  {need:<12} {mark}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vision", help="224x224 artifact with a .tflite (default: build)")
    parser.add_argument("--source", help="its float ONNX source (default: built with it)")
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        vision = Path(args.vision) if args.vision else build_vision(work / "mnv2_224.edgekit")
        source = Path(args.source) if args.source else vision.with_suffix(".onnx")
        rows = fastpath(vision, source, work, args.rounds)
    print_rows(rows)
    return 0 if all(ok for *_, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

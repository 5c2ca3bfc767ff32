"""Where a transformer's int8 error is: per tensor, the SQNR of the int8 model against float
(accumulated along the graph) and of that tensor's own int8 rounding (its calibrated scale
applied to the float tensor alone), with the channel spread that sets the rounding
(the widest channel's |max| over the median channel's: SmoothQuant's activation outliers).

The int8 model is onnxruntime's ``quantize_static`` the way the build's quantize stage calls
it (QDQ, U8 activations asymmetric, S8 weights symmetric per channel, min-max) on the
prepared (constant-folded) float graph; with ``--smooth ALPHA`` the float graph is smoothed
first (``tools/studies/smoothquant.py``).

    python tools/benchmarks/bench_moonshine_layers.py                      # Moonshine encoder
    python tools/benchmarks/bench_moonshine_layers.py --smooth 0.5 --top 30
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tools")]
MODEL = Path("/work/wt/rzfinal/moonshine_encoder/moonshine_encoder.onnx")
CALIB = Path("/work/wt/rzfinal/moonshine_encoder/calib.npz")
VAL = Path("/work/wt/rzfinal/moonshine_encoder/val.npz")


def sqnr_db(ref: np.ndarray, got: np.ndarray) -> float:
    noise = float(np.sum((ref.astype(np.float64) - got) ** 2))
    power = float(np.sum(ref.astype(np.float64) ** 2))
    return float("inf") if noise == 0 else 10 * np.log10(max(power, 1e-30) / noise)


def prepared(source: Path, shape: list[int], out: Path) -> Path:
    """The source pinned to ``shape`` and constant-folded (the build's pin + prepare)."""
    import onnx
    from edgekit.converters.graph.shapes import folded, pin_inputs
    from onnxruntime.quantization.shape_inference import quant_pre_process

    model = onnx.load(str(source))
    # pinned and constant-folded (shape subgraphs) as the build's pin stage does
    model = folded(pin_inputs(model, {model.graph.input[0].name: shape}), out.parent)
    pinned = out.with_name("pinned.onnx")
    onnx.save(model, str(pinned))
    with contextlib.chdir(out.parent):
        quant_pre_process(str(pinned), str(out), skip_optimization=False)
    return out


def weights_rounded(float_path: Path, out: Path) -> Path:
    """The float model with every Conv/MatMul/Gemm weight rounded to int8 per output channel
    (symmetric, as the build's quantizer) and kept float: the weights' share of the error."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(float_path))
    inits = {i.name: i for i in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type not in ("Conv", "MatMul", "Gemm") or node.input[1] not in inits:
            continue
        w = numpy_helper.to_array(inits[node.input[1]])
        trans_b = any(a.name == "transB" and a.i for a in node.attribute)
        axis = 0 if node.op_type == "Conv" or trans_b else w.ndim - 1
        top = np.abs(w).max(axis=tuple(i for i in range(w.ndim) if i != axis), keepdims=True)
        step = np.where(top > 0, top / 127, 1)
        inits[node.input[1]].CopyFrom(numpy_helper.from_array(
            (np.clip(np.rint(w / step), -127, 127) * step).astype(w.dtype), node.input[1]))
    onnx.save(model, str(out))
    return out


def widened(q_path: Path, headroom: float) -> None:
    """Every activation's Q/DQ scale times ``headroom`` (zero points kept): ranges wider than
    calibration saw, for held-out inputs past them, at a coarser step."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(q_path))
    inits = {i.name: i for i in model.graph.initializer}
    done: set[str] = set()
    for node in model.graph.node:
        if node.op_type not in ("QuantizeLinear", "DequantizeLinear") or node.input[0] in inits \
                or node.input[1] in done:
            continue
        source = next((n for n in model.graph.node if n.output and n.output[0] == node.input[0]
                       and n.op_type == "QuantizeLinear"), None)
        if node.op_type == "DequantizeLinear" and source is not None and source.input[0] in inits:
            continue  # a weight's DQ
        scale = inits[node.input[1]]
        scale.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(scale) * np.float32(headroom),
                                               scale.name))
        done.add(scale.name)
    onnx.save(model, str(q_path))


def quantized(float_path: Path, calib: list[dict[str, np.ndarray]], out: Path,
              exclude: str | None = None, int16: str | None = None, a16: bool = False) -> Path:
    """int8 QDQ; nodes matching ``exclude`` kept float, tensors of nodes matching ``int16``
    moved to int16 (the build's ``ptq/precision.apply``, as the guard's int16 rung)."""
    import re

    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(calib)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.items, None)

    nodes = [n.name for n in onnx.load(str(float_path)).graph.node]
    keep = [n for n in nodes if exclude and re.search(exclude, n)]
    quantize_static(str(float_path), str(out), Reader(), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QInt16 if a16 else QuantType.QUInt8,
                    weight_type=QuantType.QInt8,
                    extra_options={"WeightSymmetric": True, "ActivationSymmetric": a16},
                    nodes_to_exclude=keep)
    if int16:
        from edgekit.converters.ptq import precision

        precision.apply(out, {n for n in nodes if re.search(int16, n)}, set())
    return out


def all_outputs(path: Path, names: list[str], feeds: list[dict[str, np.ndarray]]
                ) -> list[dict[str, np.ndarray]]:
    import onnx
    from edgekit.converters.core.expose import exposed_bytes, unoptimized

    sess = unoptimized(exposed_bytes(onnx.load(str(path)), names))
    outs = [o.name for o in sess.get_outputs()]
    return [dict(zip(outs, sess.run(None, f), strict=True)) for f in feeds]


def tflite_outputs(q_path: Path, feeds: list[dict[str, np.ndarray]], versus: Path | None = None
                   ) -> list[dict[str, np.ndarray]]:
    """The QDQ model as the .tflite writer ships it (fused GELU lookup, LayerNorm), on LiteRT."""
    import onnx
    from edgekit.converters.tflite import convert

    from tests.converters.tflite.helpers import litert

    model = convert(onnx.load(str(q_path)))
    ops = {}
    for op in model.float_ops:
        ops[op["op_type"]] = ops.get(op["op_type"], 0) + 1
    print(f".tflite: {len(model.data) / 1e6:.1f} MB, float ops {ops or 'none'}")
    runner = litert(model, threads=2)
    names = [o["name"] for o in model.outputs]
    shipped = None
    if versus is not None:  # a built artifact, timed interleaved with this candidate
        import edgekit

        shipped = edgekit.load(versus, threads=2)
    outs, seconds, theirs = [], [], []
    for feed in feeds:
        start = time.perf_counter()
        outs.append(dict(zip(names, runner.run(feed), strict=True)))
        seconds.append(time.perf_counter() - start)
        if shipped is not None:
            start = time.perf_counter()
            shipped.predict(feed)
            theirs.append(time.perf_counter() - start)
    print(f".tflite on LiteRT, 2 threads: median {np.median(seconds) * 1e3:.1f} ms per 1 s chunk "
          f"(N={len(seconds)}; this host, under the load of the moment)")
    if theirs:
        print(f"  {versus.name} (edgekit.load, 2 threads), interleaved: median "
              f"{np.median(theirs) * 1e3:.1f} ms; candidate / it {np.median(seconds) / np.median(theirs):.2f}x")
    return outs


def transcripts_equal(float_path: Path, q_path: Path, feeds: list[dict[str, np.ndarray]],
                      tflite: bool = False, versus: Path | None = None) -> np.ndarray:
    """1 per chunk where the float decoder reads the same tokens from int8's states."""
    from tools.realzoo.moonshine import CHUNK, RATE, greedy_tokens

    ref = all_outputs(float_path, [], feeds)
    got = tflite_outputs(q_path, feeds, versus) if tflite else all_outputs(q_path, [], feeds)
    out = "last_hidden_state"
    if tflite:  # the writer against onnxruntime's QDQ of the same graph (same ranges)
        qdq = all_outputs(q_path, [], feeds)
        cat = lambda outs: np.concatenate([o[out].ravel() for o in outs])  # noqa: E731
        print(f"output SQNR: .tflite vs float {sqnr_db(cat(ref), cat(got)):.1f} dB, QDQ on "
              f"onnxruntime vs float {sqnr_db(cat(ref), cat(qdq)):.1f} dB, .tflite vs QDQ "
              f"{sqnr_db(cat(qdq), cat(got)):.1f} dB (n={len(feeds)})")
    return np.asarray([greedy_tokens(g[out][0], CHUNK / RATE) == greedy_tokens(r[out][0], CHUNK / RATE)
                       for g, r in zip(got, ref, strict=True)], np.float64)


def clopper_pearson(hits: int, n: int) -> tuple[float, float]:
    from scipy.stats import beta

    low = beta.ppf(0.025, hits, n - hits + 1) if hits else 0.0
    high = beta.ppf(0.975, hits + 1, n - hits) if hits < n else 1.0
    return float(low), float(high)


def main() -> int:
    import onnx
    from onnx import numpy_helper

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", type=Path, default=MODEL)
    p.add_argument("--calib", type=Path, default=CALIB)
    p.add_argument("--val", type=Path, default=VAL)
    p.add_argument("--calib-samples", type=int, default=32)
    p.add_argument("--samples", type=int, default=4, help="held-out samples compared")
    p.add_argument("--smooth", type=float, default=None, help="SmoothQuant alpha (off: none)")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--transcripts", type=int, default=0,
                   help="also score transcripts equal to float's on this many held-out chunks")
    p.add_argument("--calib-from-val", type=int, metavar="START",
                   help="held-out chunks from START on (other recordings) also calibrate; "
                   "transcripts are scored on the chunks before START only")
    p.add_argument("--calib-gain", type=float, default=1.0,
                   help="scale the calibration audio (held-out audio is ~8x louder)")
    p.add_argument("--headroom", type=float, default=1.0,
                   help="widen every activation range by this factor after calibration")
    p.add_argument("--versus", type=Path, help="with --tflite: a built .edgekit timed interleaved")
    p.add_argument("--a16", action="store_true",
                   help="onnxruntime's own int16 activations everywhere (QInt16, symmetric)")
    p.add_argument("--weights-only", action="store_true",
                   help="no activation quantization: only the weights rounded to int8")
    p.add_argument("--tflite", action="store_true",
                   help="score the transcripts of the written .tflite (LiteRT) instead, and stop")
    p.add_argument("--trace", type=int, default=0, help="print the first N tensors' SQNR")
    p.add_argument("--exclude", help="regex of node names kept float")
    p.add_argument("--int16", help="regex of node names moved to int16 activations")
    p.add_argument("--int16-headroom", type=float, default=None,
                   help="the int16 rung's grid covers this times int8's range "
                   "(ptq/precision.INT16_HEADROOM; default: its value)")
    p.add_argument("--int16-input", action="store_true",
                   help="an input only int16 layers read is int16 (ptq/precision.INT16_INPUTS)")
    args = p.parse_args()
    if args.int16_input:
        from edgekit.converters.ptq import precision

        precision.INT16_INPUTS = True
    if args.int16_headroom is not None:
        from edgekit.converters.ptq import precision

        precision.INT16_HEADROOM = args.int16_headroom

    calib_all, val_all = np.load(args.calib), np.load(args.val)
    name = next(iter(calib_all.files))
    # --calib-gain: the calibration speech louder (clipped to the waveform's [-1, 1]), to tell
    # clipping by a quiet calibration set from int8's rounding
    calib = [{name: np.clip(calib_all[name][i:i + 1] * args.calib_gain, -1, 1)}
             for i in range(args.calib_samples)]
    if args.calib_from_val is not None:  # other recordings join calibration, scored on the rest
        calib += [{name: val_all[name][i:i + 1]}
                  for i in range(args.calib_from_val, len(val_all[name]))]
        args.transcripts = min(args.transcripts, args.calib_from_val)
    val = [{name: val_all[name][i:i + 1]} for i in range(args.samples)]
    with tempfile.TemporaryDirectory() as tmp:
        float_path = prepared(args.model, list(calib[0][name].shape), Path(tmp) / "prepared.onnx")
        if args.smooth is not None:
            from tools.studies.smoothquant import smooth

            model = onnx.load(str(float_path))
            done = smooth(model, calib, args.smooth)
            print(f"smoothed (alpha {args.smooth}): {done}")
            float_path = Path(tmp) / "smoothed.onnx"
            onnx.save(model, str(float_path))
        if args.weights_only:
            q_path = weights_rounded(float_path, Path(tmp) / "w8.onnx")
        else:
            q_path = quantized(float_path, calib, Path(tmp) / "int8.onnx", args.exclude,
                               args.int16, args.a16)
            if args.headroom != 1:
                widened(q_path, args.headroom)
        fmodel, qmodel = onnx.load(str(float_path)), onnx.load(str(q_path))
        inits = {i.name: numpy_helper.to_array(i) for i in qmodel.graph.initializer}
        qparams = {n.input[0]: (inits[n.input[1]], inits[n.input[2]])
                   for n in qmodel.graph.node if n.op_type == "QuantizeLinear"
                   and n.input[1] in inits and n.input[0] not in inits}
        finits = {i.name for i in fmodel.graph.initializer}
        order = [(n, o) for n in fmodel.graph.node for o in n.output if o not in finits]
        names = [o for _, o in order]
        qnames = {o for n in qmodel.graph.node for o in n.output}
        if args.transcripts:
            agree = transcripts_equal(float_path, q_path, [{name: val_all[name][i:i + 1]}
                                                          for i in range(args.transcripts)],
                                      args.tflite, args.versus)
            low, high = clopper_pearson(int(agree.sum()), len(agree))
            where = ".tflite on LiteRT" if args.tflite else "QDQ on onnxruntime, unfused"
            print(f"transcripts equal to float's: {agree.mean():.1%} [{low:.1%}, {high:.1%}] "
                  f"n={len(agree)} ({where})")
            if args.tflite:
                return 0
        ref = all_outputs(float_path, names, val)
        got = all_outputs(q_path, [o for o in names if o in qnames], val)
    rows = []
    clipped: dict[str, float] = {}
    for node, out in order:
        if out not in got[0] or ref[0][out].dtype != np.float32 or ref[0][out].size < 16:
            continue
        r = np.concatenate([x[out].ravel() for x in ref])
        g = np.concatenate([x[out].ravel() for x in got])
        own = spread = float("nan")
        if out in qparams:
            scale, zero = (np.asarray(v) for v in qparams[out])
            lo, hi = np.iinfo(zero.dtype).min, np.iinfo(zero.dtype).max
            q = np.clip(np.rint(r / scale) + zero.astype(np.int64), lo, hi)
            own = sqnr_db(r, (q - zero.astype(np.int64)) * scale)
            # the clipping alone: held-out values past the calibrated range, cut to it
            clipped[out] = sqnr_db(r, np.clip(r, (lo - zero.astype(np.int64)) * scale,
                                              (hi - zero.astype(np.int64)) * scale))
            last = np.concatenate([x[out].reshape(-1, x[out].shape[-1]) for x in ref])
            top = np.abs(last).max(axis=0)
            spread = float(top.max() / max(np.median(top), 1e-12))
        rows.append((node.op_type, node.name, sqnr_db(r, g), own, spread))
    for op, node, acc, _own, _spread in rows[:args.trace]:
        print(f"  trace {op:10s} {node:55s} {acc:6.1f}")
    out_name = fmodel.graph.output[0].name
    print(f"output {out_name}: SQNR int8 vs float {rows[-1][2]:.1f} dB "
          f"(n={args.samples} held-out 1 s chunks, calibration {args.calib_samples})")
    quantized_rows = [r for r in rows if not np.isnan(r[3])]
    print(f"\nworst {args.top} tensors by their own int8 rounding (calibrated scale on the float "
          f"tensor): op, node, accumulated SQNR dB, own SQNR dB, channel spread max/median")
    for op, node, acc, own, spread in sorted(quantized_rows, key=lambda r: r[3])[:args.top]:
        print(f"  {op:10s} {node:55s} {acc:6.1f} {own:6.1f} {spread:7.1f}")
    print(f"\nworst {args.top} tensors by clipping alone (held-out values past the calibrated "
          f"range): node, SQNR of the clipping dB")
    for out, db in sorted(clipped.items(), key=lambda kv: kv[1])[:args.top]:
        print(f"  clip {out:60s} {db:6.1f}")
    by_op: dict[str, list[float]] = {}
    for op, _, _, own, _ in quantized_rows:
        by_op.setdefault(op, []).append(own)
    print("\nown-rounding SQNR by producing op (median, min, count):")
    for op, vals in sorted(by_op.items(), key=lambda kv: np.median(kv[1])):
        print(f"  {op:12s} {np.median(vals):6.1f} {np.min(vals):6.1f} {len(vals):4d}")
    print("\naccumulated SQNR along the graph, at each layer's LayerNorm output (input_layernorm Mul):")
    for _op, node, acc, own, spread in rows:
        if node.endswith("layernorm/Mul") or node.endswith("layer_norm/Mul"):
            print(f"  {node:55s} {acc:6.1f} dB (own {own:5.1f}, spread {spread:6.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

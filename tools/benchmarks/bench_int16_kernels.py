"""LiteRT's 16x8 kernels (int16 activations, int8 weights: the accuracy guard's int16 rung) with an
int64 bias (what the .tflite writer ships) against an int32 bias, and int8, side by side.

LiteRT's CONV_2D takes its optimized 16x8 path only with an int32 bias and zero points 0
(tensorflow/lite/kernels/conv.cc); an int64 bias runs the scalar reference kernel. This bench
writes the same QDQ model three ways and times them interleaved on one thread:

- int8: onnxruntime's ``quantize_static`` (U8S8 per channel, as ``stages/reference_ptq``);
- int16/int64: the nodes matching ``--span`` moved to int16 (``ptq/precision.apply``), every
  16x8 bias int64 (``tflite/sixteen.INT32_BIAS_16X8 = False``: the writer before);
- int16/shipped: as the writer ships it (int32 on FULLY_CONNECTED where it cannot overflow);
- int16/int32: the int32 rule (``bias_fits_int32``) on CONV_2D too (DEPTHWISE_CONV_2D refuses
  int32 on LiteRT 2.3): what a working LiteRT int32 conv path would give.

Printed: the bias types written, the median latency of each (N rounds, 90% interval), the ratios,
and each .tflite's outputs against onnxruntime's int16 QDQ model and against the int16/int64
.tflite (LiteRT's reference kernels), in output steps.

    python tools/benchmarks/bench_int16_kernels.py            # YOLOv8n (nudenet 320n), model.0-9
    python tools/benchmarks/bench_int16_kernels.py --span '^/model\\.[0-4]/' --rounds 10
    python tools/benchmarks/bench_int16_kernels.py --model /work/wt/rzfinal/ppocr_rec/ch_PP-OCRv4_rec_infer.onnx \\
        --calib /work/wt/rzfinal/ppocr_rec/calib.npz --span '^p2o\\.MatMul\\.' --rounds 30

With ``--kinds label=regex;label=regex``: per kind of op, the whole model int8 but that kind's
nodes int16 (as shipped), against int8 and against every kind int16 at once, interleaved: what
each 16x8 kernel costs in a real graph (Moonshine's encoder: FULLY_CONNECTED, BATCH_MATMUL,
SOFTMAX, the LayerNorm pieces):

    python tools/benchmarks/bench_int16_kernels.py --model /work/wt/rzfinal/moonshine_encoder/moonshine_encoder.onnx \\
        --calib /work/wt/rzfinal/moonshine_encoder/calib.npz --rounds 20 --kinds \\
        'fc=(proj|dense|fc[12])/MatMul;bmm=self_attn/MatMul(_1)?$;softmax=Softmax;layernorm=layernorm|layer_norm'
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tools")]
from benchmarks.common import median_ci  # noqa: E402

MODEL = Path("/work/wt/rzfinal/nudenet_320n/320n.onnx")
CALIB = Path("/work/wt/rzfinal/nudenet_320n/calib.npz")


def quantized(src: Path, calib: np.ndarray, folder: Path) -> Path:
    """The pinned, folded model's plain U8S8 QDQ (onnxruntime quantize_static)."""
    import onnx
    from edgekit.converters.graph.shapes import folded, pin_inputs
    from edgekit.converters.stages.quantize import ort_quantization_quiet
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    model = onnx.load(str(src))
    name = model.graph.input[0].name
    # pinned to one image and constant-folded (shape subgraphs: Shape, Range) as the build does
    model = folded(pin_inputs(model, {name: [1, *calib.shape[1:]]}), folder)
    pinned, prepared, out = folder / "pinned.onnx", folder / "prepared.onnx", folder / "int8.onnx"
    onnx.save(model, str(pinned))
    quant_pre_process(str(pinned), str(prepared), skip_optimization=True)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.rows = iter(calib[i:i + 1] for i in range(len(calib)))

        def get_next(self):
            row = next(self.rows, None)
            return None if row is None else {name: row}

    with ort_quantization_quiet():
        quantize_static(str(prepared), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        extra_options={"WeightSymmetric": True})
    return out


@contextlib.contextmanager
def int32_on_every_layer() -> Iterator[None]:
    """The writer's int32 rule on CONV_2D too (shipped: FULLY_CONNECTED only), not on
    DEPTHWISE_CONV_2D (its 1HWC weight: LiteRT 2.3 refuses an int32 bias there)."""
    from edgekit.converters.tflite.context import ConversionContext

    bias = ConversionContext.bias

    def wrapped(self, node, i, x, w, channels, *args, **kwargs):
        depthwise = w.q is not None and w.q.ndim == 4 and w.q.shape[0] == 1 and channels > 1
        return bias(self, node, i, x, w, channels, *args, **{**kwargs, "int32_16x8": not depthwise})

    ConversionContext.bias = wrapped
    try:
        yield
    finally:
        ConversionContext.bias = bias


def bias_types(data: bytes) -> Counter:
    from edgekit.converters.tflite.schema import TType

    from tests.converters.tflite.helpers import ops_of, read_tflite

    names = {v: k for k, v in vars(TType).items() if not k.startswith("_")}
    tensors = read_tflite(data).subgraphs[0].tensors
    return Counter(f"{name}:{names[tensors[op.inputs[2]].type]}" for name, op in ops_of(data)
                   if name in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED") and len(op.inputs) > 2
                   and tensors[op.inputs[2]].type in (TType.INT32, TType.INT64)
                   and tensors[op.inputs[0]].type == TType.INT16)


def by_kind(args: argparse.Namespace) -> None:
    import onnx
    from edgekit.converters.ptq.precision import apply
    from edgekit.converters.tflite import convert

    from tests.converters.tflite.helpers import litert

    kinds = dict(item.split("=", 1) for item in args.kinds.split(";"))
    calib = np.load(args.calib)
    x = next(iter(calib.values())).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        int8 = quantized(args.model, x[:args.samples], folder)
        model = onnx.load(str(int8))
        written = {"int8": convert(model)}
        spans = {**kinds, "all kinds": "|".join(f"(?:{r})" for r in kinds.values())}
        for label, regex in spans.items():
            picked = {n.name for n in model.graph.node if re.search(regex, n.name)}
            wide = folder / f"a16-{len(written)}.onnx"
            wide.write_bytes(int8.read_bytes())
            made = apply(wide, picked, set())["int16"]
            written[label] = convert(onnx.load(str(wide)))
            ops = Counter(model_op for model_op in (n.op_type for n in model.graph.node if n.name in made))
            print(f"  {label:10s} {len(made)} nodes int16 {dict(ops)}; biases "
                  f"{dict(bias_types(written[label].data)) or '-'}; float ops {len(written[label].float_ops)}")
        feeds = {model.graph.input[0].name: x[-1:]}
        runners = {k: litert(v, threads=1) for k, v in written.items()}
        times: dict[str, list[float]] = {k: [] for k in runners}
        for _ in range(args.rounds):  # interleaved: each round runs every variant once
            for label, run in runners.items():
                start = time.perf_counter()
                run.run(feeds)
                times[label].append(time.perf_counter() - start)
    med = {k: float(np.median(v)) for k, v in times.items()}
    for label, v in times.items():
        lo, hi = median_ci(np.asarray(v))
        print(f"  {label:10s} {med[label] * 1e3:8.1f} ms  [{lo * 1e3:.1f}, {hi * 1e3:.1f}]  "
              f"{med[label] / med['int8']:5.2f}x int8  N={args.rounds}, 1 thread")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=MODEL)
    ap.add_argument("--calib", type=Path, default=CALIB)
    ap.add_argument("--span", default=r"^/model\.[0-9]/", help="regex of the node names moved to int16")
    ap.add_argument("--samples", type=int, default=16, help="calibration samples")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--kinds", help="label=regex;...: time each kind of node int16 alone (see above)")
    args = ap.parse_args()
    if args.kinds:
        return by_kind(args)

    import onnx
    from edgekit.converters.ptq.precision import apply
    from edgekit.converters.tflite import convert, sixteen

    from tests.converters.tflite.helpers import litert, run_onnx

    calib = np.load(args.calib)
    x = next(iter(calib.values())).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        int8 = quantized(args.model, x[:args.samples], folder)
        wide = folder / "a16.onnx"
        wide.write_bytes(int8.read_bytes())
        model = onnx.load(str(int8))
        picked = {n.name for n in model.graph.node if re.search(args.span, n.name)}
        apply(wide, picked, set())
        written = {"int8": convert(onnx.load(str(int8)))}
        sixteen.INT32_BIAS_16X8 = False
        written["int16/int64"] = convert(onnx.load(str(wide)))
        sixteen.INT32_BIAS_16X8 = True
        written["int16/shipped"] = convert(onnx.load(str(wide)))
        with int32_on_every_layer():
            written["int16/int32"] = convert(onnx.load(str(wide)))
        print(f"quantized + written in {time.perf_counter() - t0:.0f} s; {len(picked)} nodes int16 "
              f"({args.span!r})")
        feeds = {model.graph.input[0].name: x[-1:]}
        ref = run_onnx(wide, feeds)
        runners = {k: litert(v, threads=1) for k, v in written.items()}
        base = runners["int16/int64"].run(feeds)

        def steps(got: list[np.ndarray], want: list[np.ndarray], tfl) -> float:
            return max(float(np.abs(g - w).max()) / float(np.ravel(o["quantization"]["scale"])[0])
                       for g, w, o in zip(got, want, tfl.outputs, strict=True))

        for label, tfl in written.items():
            got = runners[label].run(feeds)
            print(f"  {label:13s} biases {dict(bias_types(tfl.data)) or '-'}; float ops {len(tfl.float_ops)}; "
                  f"max output steps vs onnxruntime int16 QDQ {steps(got, ref, tfl):.1f}, "
                  f"vs int16/int64 .tflite {steps(got, base, tfl):.1f}")
        times: dict[str, list[float]] = {k: [] for k in runners}
        for _ in range(args.rounds):  # interleaved: each round runs every variant once
            for label, run in runners.items():
                start = time.perf_counter()
                run.run(feeds)
                times[label].append(time.perf_counter() - start)
        med = {k: np.median(v) for k, v in times.items()}
        for label, v in times.items():
            lo, hi = median_ci(np.asarray(v))
            print(f"  {label:13s} {med[label] * 1e3:8.1f} ms  [{lo * 1e3:.1f}, {hi * 1e3:.1f}]  N={args.rounds}, "
                  f"1 thread")
        print("ratios: " + "; ".join(f"{k} / int8 {med[k] / med['int8']:.1f}x" for k in med if k != "int8")
              + f"; int16/int64 / int16/int32 {med['int16/int64'] / med['int16/int32']:.2f}x")


if __name__ == "__main__":
    main()

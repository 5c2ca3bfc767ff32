"""Where a detector's int8 error comes from, and how artifacts compare on held-out photos
(docs/measurements/yolo-int8.md).

``sqnr``: every tensor the float model computes, against the same tensor of a QDQ model (its
``_DequantizeLinear_Output`` twin), both run by onnxruntime as written (``ORT_DISABLE_ALL``: the
QDQ graph is a fake-quant simulation), SQNR summed over the samples, in graph order. With
``--weights-float`` the QDQ model's weight DequantizeLinear nodes are replaced by the float
weights first: int8 activations alone.

``heldout``: artifacts (``edgekit.load``) or QDQ .onnx files against the float model on held-out
photos of a YOLO-style packed output (4 box rows, then class scores): pooled confident-cell F1
(a cell is confident when its best class score > 0.25), float detections kept and the detection
F1 (the build's decode: conf 0.25, class-wise NMS, IoU >= 0.5, same class), each with a 95%
bootstrap interval over photos; the class-score and box SQNR; and the class logits' mean and
rms error (int8 minus float) on float's confident cells: a bias there moves scores across 0.25.

    python tools/benchmarks/bench_yolo_int8.py sqnr FLOAT.onnx INT8_QDQ.onnx --data val.npz --samples 8
    python tools/benchmarks/bench_yolo_int8.py heldout FLOAT.onnx A.edgekit B.edgekit --data val.npz
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import numpy as np

CONFIDENT = 0.25  # class score of a confident cell (the realzoo metric's threshold)
RESAMPLES = 2000


def _session(model: object) -> object:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _exposed(model: object, names: list[str]) -> object:
    import onnx
    from onnx import helper

    out = onnx.ModelProto()
    out.CopyFrom(model)
    have = {o.name for o in out.graph.output}
    out.graph.output.extend(helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None)
                            for n in names if n not in have)
    return out


def float_weights(qdq: object, float_model: object) -> object:
    """``qdq`` with each weight's DequantizeLinear replaced by the float weight it quantizes."""
    import onnx

    floats = {i.name: i for i in float_model.graph.initializer}
    stored = {i.name for i in qdq.graph.initializer}
    kept = []
    for node in qdq.graph.node:
        base = node.input[0].removesuffix("_quantized") if node.input else ""
        if node.op_type == "DequantizeLinear" and node.input[0] in stored and base in floats:
            tensor = onnx.TensorProto()
            tensor.CopyFrom(floats[base])
            tensor.name = node.output[0]
            qdq.graph.initializer.append(tensor)
            continue
        kept.append(node)
    del qdq.graph.node[:]
    qdq.graph.node.extend(kept)
    return qdq


def sqnr(float_path: Path, qdq_path: Path, images: np.ndarray, weights_float: bool) -> None:
    import onnx

    float_model, qdq = onnx.load(str(float_path)), onnx.load(str(qdq_path))
    if weights_float:
        qdq = float_weights(qdq, float_model)
    made = {o for n in qdq.graph.node for o in n.output}
    kinds = {o: n.op_type for n in float_model.graph.node for o in n.output}
    pairs = [(t, t + "_DequantizeLinear_Output" if t + "_DequantizeLinear_Output" in made else t)
             for t in kinds if t + "_DequantizeLinear_Output" in made or t in made]
    run_f = _session(_exposed(float_model, [a for a, _ in pairs]))
    run_q = _session(_exposed(qdq, [b for _, b in pairs]))
    name = float_model.graph.input[0].name
    power = {a: [0.0, 0.0] for a, _ in pairs}
    for i in range(len(images)):
        got_f = run_f.run([a for a, _ in pairs], {name: images[i:i + 1]})
        got_q = run_q.run([b for _, b in pairs], {name: images[i:i + 1]})
        for (a, _), f, q in zip(pairs, got_f, got_q, strict=True):
            f64 = f.astype(np.float64)
            power[a][0] += float((f64 ** 2).sum())
            power[a][1] += float(((f64 - q) ** 2).sum())
    for a, _ in pairs:
        signal, noise = power[a]
        print(f"{10 * np.log10(signal / max(noise, 1e-30)):7.1f} dB  {kinds[a]:10s} {a}")


def _runner(path: str) -> Callable[[np.ndarray], np.ndarray]:
    if path.endswith(".onnx"):
        import onnx

        session = _session(onnx.load(path))
        name = session.get_inputs()[0].name
        return lambda x: session.run(None, {name: x})[0]
    import edgekit

    model = edgekit.load(path)
    return lambda x: np.asarray(model.predict(x))


def _f1(want: np.ndarray, have: np.ndarray, index: np.ndarray) -> float:
    """F1 of the confident cells of the photos ``index`` (pooled over their cells)."""
    both = (want[index] & have[index]).sum()
    return float(2 * both / max(want[index].sum() + have[index].sum(), 1))


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p.astype(np.float64), 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def _detections(reference: np.ndarray, got: np.ndarray, draws: list[np.ndarray]) -> str:
    from edgekit.converters.metrics.detection import decode_packed, match

    want, have = decode_packed(reference), decode_packed(got)
    matched = np.array([match(w, h) for w, h in zip(want, have, strict=True)], np.float64)
    floats = np.array([len(w.boxes) for w in want], np.float64)
    int8s = np.array([len(h.boxes) for h in have], np.float64)
    kept = [matched[k].sum() / max(floats[k].sum(), 1) for k in draws]
    f1 = [2 * matched[k].sum() / max(floats[k].sum() + int8s[k].sum(), 1) for k in draws]
    return (f"detections kept {int(matched.sum())}/{int(floats.sum())} "
            f"[{100 * np.percentile(kept, 2.5):.1f}, {100 * np.percentile(kept, 97.5):.1f}], "
            f"detection F1 {100 * 2 * matched.sum() / max(floats.sum() + int8s.sum(), 1):.1f}% "
            f"[{100 * np.percentile(f1, 2.5):.1f}, {100 * np.percentile(f1, 97.5):.1f}] "
            f"({int(int8s.sum())} int8 detections)")


def heldout(float_path: Path, paths: list[str], images: np.ndarray) -> None:
    reference = np.concatenate([_runner(str(float_path))(images[i:i + 1]) for i in range(len(images))])
    rng = np.random.default_rng(0)
    draws = [rng.integers(0, len(images), len(images)) for _ in range(RESAMPLES)]

    def db(f: np.ndarray, q: np.ndarray) -> float:
        return float(10 * np.log10((f ** 2).sum() / ((f - q) ** 2).sum()))

    for path in paths:
        run = _runner(path)
        got = np.concatenate([run(images[i:i + 1]) for i in range(len(images))]).reshape(reference.shape)
        want, have = reference[:, 4:].max(1) > CONFIDENT, got[:, 4:].max(1) > CONFIDENT

        low, high = np.percentile([_f1(want, have, k) for k in draws], [2.5, 97.5])
        print(f"{path}: pooled confident-cell F1 {100 * _f1(want, have, np.arange(len(images))):.1f}% "
              f"[{100 * low:.1f}, {100 * high:.1f}] ({want.sum()} float cells, {have.sum()} int8 cells, "
              f"{len(images)} photos); class-score SQNR {db(reference[:, 4:], got[:, 4:]):.1f} dB, "
              f"box SQNR {db(reference[:, :4], got[:, :4]):.1f} dB")
        confident = reference[:, 4:] > CONFIDENT
        error = (_logit(got[:, 4:]) - _logit(reference[:, 4:]))[confident]
        print(f"  {_detections(reference, got, draws)}; class logit error on {confident.sum()} confident "
              f"cells: mean {error.mean():+.3f}, rms {np.sqrt((error ** 2).mean()):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["sqnr", "heldout"])
    parser.add_argument("float_model", type=Path)
    parser.add_argument("others", nargs="+", help="sqnr: one QDQ .onnx; heldout: artifacts or .onnx")
    parser.add_argument("--data", type=Path, required=True, help=".npz with the images (first array)")
    parser.add_argument("--samples", type=int, default=None)
    parser.add_argument("--weights-float", action="store_true")
    args = parser.parse_args()
    with np.load(args.data) as data:
        images = data[data.files[0]][:args.samples].astype(np.float32)
    if args.what == "sqnr":
        sqnr(args.float_model, Path(args.others[0]), images, args.weights_float)
    else:
        heldout(args.float_model, args.others, images)


if __name__ == "__main__":
    main()

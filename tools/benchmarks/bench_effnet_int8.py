"""Where EfficientNet-Lite0's int8 loses against float, and what each PTQ lever buys back.

    python tools/benchmarks/bench_effnet_int8.py [--realzoo DIR] [--variants base,pertensor,...]
        [--layers] [--isolate]

On the real-model suite's pretrained EfficientNet-Lite0 (``DIR/efficientnet_lite0.onnx``,
``DIR/calib.npz`` 64 photo crops, ``DIR/val.npz`` 156 held-out crops of other photos), each
variant is a real ``edgekit build --target rpi4 --format both --guard-time 0
--accept-accuracy-drop`` with the variant's options; printed per variant:
  - top-1 agreement with float of the .tflite on LiteRT (the suite's metric) and of the .onnx
    on onnxruntime (exact int8), each with N and an exact binomial 95% interval;
  - the same by float-margin bucket (softmax top-1 minus top-2 probability: photo crops that are
    not ImageNet objects have tiny margins, and a flip there is not a lost answer);
  - how often the int8 top-5 contains the float top-1;
  - the logits' SQNR against float (dB, over all held-out samples).
``--layers``: each compute layer's output SQNR against float (the manifest's per-layer record:
accumulated error) and the dB it lost over the layer before it (where the loss enters).
``--isolate``: the agreement and logits SQNR with one class of layers kept float (stem,
depthwise, expand 1x1, project 1x1, head 1x1, classifier): which class costs how much.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO)]
from tools.realzoo.metrics import interval  # noqa: E402

REALZOO = Path("/work/wt/rzfinal/efficientnet_lite0")
STEM_SAMPLES, STEM_STEPS = 16, 200  # AdaRound of the stem, as measured (docs/measurements/effnet-int8.md)
MARGIN_BUCKETS = (0.0, 0.05, 0.2, 0.5, 1.01)  # float softmax top-1 minus top-2 probability
VARIANTS: dict[str, dict] = {
    "base": {},
    "no-bias-correct": {"bias_correct": False},
    "pertensor": {"method": "pertensor"},
    "percentile": {"method": "percentile"},
    "entropy": {"method": "entropy"},
    "adaround30": {"adaround": 30.0},
    "stem-adaround": {"adaround_first": 1},  # build_variant narrows --adaround to the stem
}


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def float_logits(model: Path, images: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return np.concatenate([sess.run(None, {name: images[i:i + 1]})[0] for i in range(len(images))])


def artifact_logits(artifact: Path, images: np.ndarray, backend: str) -> np.ndarray:
    import edgekit

    model = edgekit.load(artifact, backend=backend, threads=2)
    try:
        return np.concatenate([np.asarray(model.predict(images[i:i + 1])).reshape(1, -1)
                               for i in range(len(images))])
    finally:
        model.close()


def sqnr_db(ref: np.ndarray, got: np.ndarray) -> float:
    noise = float(np.sum((ref.astype(np.float64) - got) ** 2))
    return 10 * np.log10(float(np.sum(ref.astype(np.float64) ** 2)) / max(noise, 1e-30))


def scores(ref: np.ndarray, got: np.ndarray) -> dict[str, object]:
    """Agreement overall and by float margin, top-5 containment, logits SQNR."""
    top1_ref, top1_got = ref.argmax(1), got.argmax(1)
    agree = (top1_ref == top1_got).astype(float)
    top5 = np.argsort(-got, axis=1)[:, :5]
    in_top5 = np.array([t in row for t, row in zip(top1_ref, top5, strict=True)], float)
    prob = np.sort(softmax(ref.astype(np.float64)), axis=1)
    margin = prob[:, -1] - prob[:, -2]
    buckets = {}
    for lo, hi in zip(MARGIN_BUCKETS[:-1], MARGIN_BUCKETS[1:], strict=True):
        chosen = (margin >= lo) & (margin < hi)
        if chosen.any():
            buckets[f"margin [{lo:.2f}, {min(hi, 1.0):.2f})"] = interval(agree[chosen]).text()
    return {"top1_agreement": interval(agree).text(), "top5_contains_float_top1": interval(in_top5).text(),
            "logits_sqnr_db": round(sqnr_db(ref, got), 2), "by_margin": buckets}


def build_variant(model: Path, calib: Path, out: Path, options: dict) -> tuple[Path, float, dict]:
    """One build; ``adaround_first`` turns the quantize stage's AdaRound (``--adaround``) into
    AdaRound of the first that many layers only, however long they take."""
    import edgekit.converters.ptq.adaround as ada
    from edgekit.converters import build

    options = dict(options)
    first = options.pop("adaround_first", None)
    whole = ada.adaround
    if first is not None:  # the stage imports adaround from its module when it runs
        ada.adaround = lambda out, float_path, calib, seconds, **kw: whole(
            out, float_path, calib, float("inf"), first=first, samples=STEM_SAMPLES, steps=STEM_STEPS, **kw)
        options["adaround"] = 1.0
    start = time.perf_counter()
    try:
        result = build(str(model), target="rpi4", calib=str(calib), output=out, formats=["onnx", "tflite"],
                       quiet=True, guard_time=0, accept_accuracy_drop=True, **options)
    finally:
        ada.adaround = whole
    return result.path, time.perf_counter() - start, result.manifest


def layer_table(manifest: dict) -> list[str]:
    """Each layer's accumulated SQNR and the dB lost since the layer before (graph order)."""
    lines, before = [], None
    for rec in manifest.get("layers", []):
        db = rec["sqnr_db"]
        lost = "" if before is None else f"{before - db:+.2f}"
        lines.append(f"  {rec['name']:<22} {rec['op']:<22} {rec['precision']:<6} {db:7.2f} dB {lost}")
        before = db
    return lines


def layer_classes(model: Path) -> dict[str, list[str]]:
    """Compute layers by their role in an MBConv net (names from the float graph)."""
    import onnx

    graph = onnx.load(str(model)).graph
    inits = {t.name: t for t in graph.initializer}
    convs = [n for n in graph.node if n.op_type in ("Conv", "Gemm")]
    classes: dict[str, list[str]] = {"stem": [], "depthwise": [], "expand": [], "project": [],
                                     "head": [], "classifier": []}
    for index, node in enumerate(convs):
        weight = inits[node.input[1]]
        group = next((a.i for a in node.attribute if a.name == "group"), 1)
        name = node.input[1]
        if node.op_type == "Gemm":
            classes["classifier"].append(node.name)
        elif index == 0:
            classes["stem"].append(node.name)
        elif group > 1 and group == weight.dims[0]:
            classes["depthwise"].append(node.name)
        elif "expand" in name:
            classes["expand"].append(node.name)
        elif "project" in name:
            classes["project"].append(node.name)
        else:
            classes["head"].append(node.name)
    return classes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--realzoo", type=Path, default=REALZOO)
    parser.add_argument("--variants", default="base", help=f"comma-separated of {', '.join(VARIANTS)}")
    parser.add_argument("--options", help="JSON of extra build options for every variant")
    parser.add_argument("--layers", action="store_true", help="per-layer SQNR of the first variant")
    parser.add_argument("--isolate", action="store_true", help="each layer class kept float in turn")
    parser.add_argument("--json", type=Path, help="write the results here too")
    args = parser.parse_args()
    model, calib = args.realzoo / "efficientnet_lite0.onnx", args.realzoo / "calib.npz"
    images = next(iter(np.load(args.realzoo / "val.npz").values()))
    ref = float_logits(model, images)
    extra = json.loads(args.options) if args.options else {}
    plan = [(v, {**VARIANTS[v], **extra}) for v in args.variants.split(",")]
    if args.isolate:
        plan += [(f"{c} float", {"keep_float": names, **extra})
                 for c, names in layer_classes(model).items() if names]
    results = {}
    print(f"EfficientNet-Lite0 int8 vs float on {len(images)} held-out crops ({args.realzoo})", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for index, (label, options) in enumerate(plan):
            path, seconds, manifest = build_variant(model, calib, Path(tmp) / f"v{index}.edgekit", options)
            row = {"options": options if "keep_float" not in options else label,
                   "build_s": round(seconds, 1),
                   "tflite": scores(ref, artifact_logits(path, images, "litert")),
                   "onnx": scores(ref, artifact_logits(path, images, "onnxruntime"))}
            results[label] = row
            print(f"{label}: build {seconds:.1f} s", flush=True)
            for fmt in ("tflite", "onnx"):
                s = row[fmt]
                print(f"  {fmt}: top-1 agreement {s['top1_agreement']}, top-5 contains float top-1 "
                      f"{s['top5_contains_float_top1']}, logits SQNR {s['logits_sqnr_db']} dB", flush=True)
                for bucket, text in s["by_margin"].items():
                    print(f"    {bucket}: {text}")
            if args.layers and index == 0:
                print("\n".join(layer_table(manifest)), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

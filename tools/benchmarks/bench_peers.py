"""edgekit side by side with its peers, in one process, interleaved, printed as ratios.

    python tools/benchmarks/bench_peers.py [--quick] [--models mobilenet,efficientnet,...] [--threads 1,2]

For an EfficientNet-Lite-style and a MobileNetV2-style net at 224x224, and with
``--models`` their squeeze-excite relatives EfficientNet-B0 and MobileNetV3-large (random
weights: speed only, both quantizers from the same torch graph and the same calibration
data):

1. edgekit ``--format onnx --target host`` through ``Model.predict`` vs onnxruntime's own
   ``quantize_static`` (QDQ, per-channel U8S8) through ``InferenceSession.run``. Like with
   like: on this AVX2 CPU without VNNI, edgekit's ORT backend runs int8 *unfused* (exact)
   unless the model was built for the host (7-bit weights, ``reduce_range``), so the edgekit
   model is built with ``--target host``; onnxruntime's model gets ORT's defaults
   (fused, 8-bit weights, which saturate here: faster and inexact). Needs ratio >= 1.
2. edgekit's ``.tflite`` (rpi4 build) through ``Model.predict`` (float NCHW in) vs a raw
   LiteRT ``set_tensor``/``invoke``/``get_tensor`` of the same model with an input quantized
   beforehand. Needs predict within 5%.
3. For information: .tflite vs ONNX on this host, the estimator's Pi 4 figures, and which
   format each profile prefers and why (its ``[runtime] formats`` line).

Each pair runs in its own loop (two runtimes' worker pools in one loop disturb each other),
in blocks that alternate which side goes first; a ratio is the median of per-block ratios.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tools")]  # tools.* packages, and the zoo as ``zoo``

import edgekit  # noqa: E402
from tools.benchmarks.common import bare_call, paired, ratio_text, verdict  # noqa: E402

SIZE = 224


# -- models ------------------------------------------------------------------------------
def efficientnet_lite_like(num_classes: int = 1000, seed: int = 0) -> Any:
    """EfficientNet-Lite0's layout: MBConv blocks (expand, depthwise 3x3/5x5, project),
    ReLU6, no squeeze-excite (the Lite variants drop it for int8), 1280-wide head."""
    import torch
    from torch import nn

    def conv(cin: int, cout: int, k: int = 1, s: int = 1, groups: int = 1, act: bool = True
             ) -> nn.Sequential:
        layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups,
                                             bias=False), nn.BatchNorm2d(cout)]
        if act:
            layers.append(nn.ReLU6())
        return nn.Sequential(*layers)

    class MBConv(nn.Module):
        def __init__(self, cin: int, cout: int, k: int, s: int, expand: int) -> None:
            super().__init__()
            mid = cin * expand
            self.residual = s == 1 and cin == cout
            self.block = nn.Sequential(
                *([conv(cin, mid)] if expand != 1 else []),
                conv(mid, mid, k, s, groups=mid), conv(mid, cout, act=False))

        def forward(self, x: Any) -> Any:
            y = self.block(x)
            return x + y if self.residual else y

    # (expand, channels, repeats, stride, kernel): EfficientNet-B0/Lite0 stages
    stages = [(1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 40, 2, 2, 5), (6, 80, 3, 2, 3),
              (6, 112, 3, 1, 5), (6, 192, 4, 2, 5), (6, 320, 1, 1, 3)]
    torch.manual_seed(seed)
    layers: list[nn.Module] = [conv(3, 32, 3, 2)]
    cin = 32
    for expand, cout, repeats, stride, k in stages:
        for i in range(repeats):
            layers.append(MBConv(cin, cout, k, stride if i == 0 else 1, expand))
            cin = cout
    layers += [conv(cin, 1280), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
               nn.Linear(1280, num_classes)]
    net = nn.Sequential(*layers).eval()
    from zoo.common import randomize_bn

    # realistic BatchNorm statistics for random weights
    randomize_bn(net, torch.Generator().manual_seed(seed))
    return net


def make_models(names: list[str], work: Path) -> dict[str, Path]:
    import torch
    import zoo

    builders: dict[str, Callable[[], Any]] = {
        "mobilenet": lambda: zoo.mobilenetv2_like(num_classes=1000),
        "efficientnet": efficientnet_lite_like,
        # the squeeze-excite variants of both families (the zoo's, after the published designs)
        "efficientnet_b0": zoo.entry("efficientnet_b0").factory,
        "mobilenetv3": zoo.entry("mobilenetv3_large").factory}
    unknown = sorted(set(names) - set(builders))
    if unknown:
        raise SystemExit(f"bench_peers: unknown model(s) {', '.join(unknown)}; expected some of "
                         f"{', '.join(builders)}")
    x = torch.randn(1, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(0))
    return {name: zoo.export_onnx(builders[name](), x, work / f"{name}.onnx")
            for name in names}


def calibration(work: Path, count: int) -> tuple[Path, np.ndarray]:
    """The calibration set both quantizers see: smooth random images in [0, 1]."""
    rng = np.random.default_rng(0)
    coarse = rng.random((count, 3, SIZE // 16, SIZE // 16)).astype(np.float32)
    data = np.ascontiguousarray(coarse.repeat(16, axis=2).repeat(16, axis=3))
    path = work / "calib.npy"
    np.save(path, data)
    return path, data


def ort_u8s8(src: Path, dst: Path, data: np.ndarray) -> Path:
    """onnxruntime's own static quantization: QDQ, uint8 activations, per-channel int8."""
    from tools.benchmarks.bench_estimate import quantize  # the tools' one quantize_static recipe

    return quantize(src, dst, [{"input": row[None]} for row in data])


def ort_session(path: Path, threads: int) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), sess_options=so, providers=["CPUExecutionProvider"])


def profile_preferences() -> list[str]:
    """Each profile's preferred format order and the reason written next to it."""
    lines = []
    for toml in sorted((REPO / "targets").glob("*.toml")):
        for line in toml.read_text().splitlines():
            if line.startswith("formats"):
                value, _, why = line.partition("#")
                lines.append(f"  {toml.stem:<16} {value.split('=', 1)[1].strip():<20} "
                             f"{why.strip()}")
    return lines


def pi4_estimate(onnx: Path) -> str:
    from edgekit.converters.estimate import estimate

    est = estimate(str(onnx), "rpi4", threads=[1, 4])
    parts = []
    for precision, variant in est.variants.items():
        parts.append(f"{precision} " + ", ".join(
            f"{t}t {s * 1e3:.1f} ms" for t, s in sorted(variant.latency_s.items())))
    return "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="efficientnet,mobilenet",
                        help="of efficientnet, mobilenet, efficientnet_b0, mobilenetv3")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--quick", action="store_true", help="fewer rounds (noisier)")
    args = parser.parse_args(argv)
    from edgekit.converters import build

    from edgekit.device.cpu import exact_int8_needs_unfused

    rounds = 8 if args.quick else 20
    threads = [int(t) for t in args.threads.split(",")]
    rows: list[tuple[str, str, str, str, bool | None, str]] = []
    info: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        print("exporting, calibrating and building ...", file=sys.stderr)
        sources = make_models(args.models.split(","), work)
        calib, data = calibration(work, 16)
        x = data[:1].copy()
        for name, src in sources.items():
            host = build(str(src), target="host", calib=str(calib), quiet=True,
                         output=work / f"{name}.host.edgekit", formats=["onnx"])
            rpi4 = build(str(src), target="rpi4", calib=str(calib), quiet=True,
                         output=work / f"{name}.rpi4.edgekit", formats=["tflite"])
            peer = ort_u8s8(src, work / f"{name}.u8s8.onnx", data)
            for t in threads:
                print(f"{name}: {t} thread(s) ...", file=sys.stderr)
                ek = edgekit.load(host.path, threads=t)
                unfused = getattr(ek.backend, "unfused", False)
                sess = ort_session(peer, t)
                feeds = {sess.get_inputs()[0].name: x}
                onnx = paired(lambda s=sess, f=feeds: s.run(None, f),
                              lambda m=ek: m.predict(x), rounds, t)
                ek.close()
                ok = onnx["ratio"] >= 1.0
                rows.append((name, f"edgekit onnx predict vs ORT U8S8 run ({t}t)",
                             ratio_text(onnx), ">= 1.00 (speed)", ok, verdict(ok, onnx, 1.0)))
                lite = edgekit.load(rpi4.path, backend="litert", threads=t)
                raw = bare_call(lite, x)
                tfl = paired(lambda m=lite: m.predict(x), raw, rounds, t)
                lite.close()
                ok = tfl["ratio"] <= 1.05
                rows.append((name, f".tflite predict / raw LiteRT invoke ({t}t)",
                             ratio_text(tfl), "<= 1.05 (time)", ok, verdict(ok, tfl, 1.05)))
                rows.append((name, f".tflite predict / onnx predict ({t}t, separate loops)",
                             f"{tfl['a_ms'] / onnx['b_ms']:.3f}", "info (time)", None, ""))
                info.append(f"{name} {t}t: ORT U8S8 {onnx['a_ms']:.2f} ms, edgekit onnx "
                            f"{onnx['b_ms']:.2f} ms ({'unfused, exact' if unfused else 'fused'}"
                            f"), edgekit tflite {tfl['a_ms']:.2f} ms, raw LiteRT "
                            f"{tfl['b_ms']:.2f} ms")
            info.append(f"{name} Pi 4 estimate (rpi4 profile): {pi4_estimate(src)}")
    print(f"{'model':<15} {'comparison':<52} {'ratio [90% CI]':<22}  {'needs':<17} ok")
    for model, what, ratio, need, _, mark in rows:
        print(f"{model:<15} {what:<52} {ratio:<22}  {need:<17} {mark}")
    print("[90% CI]: a bootstrap interval of the median of per-block ratios; a bar inside "
          "it is a tie within this run's noise, not a measured miss or pass.")
    print("\n1 thread: thread CPU time; 2 threads: wall time. Absolute medians (a loaded "
          "shared machine: compare the ratios):")
    for line in info:
        print("  " + line)
    print(f"\nedgekit ONNX models built with --target host (7-bit weights): fused int8 kernels; "
          f"an rpi4 ONNX build would run unfused on this CPU "
          f"(exact_int8_needs_unfused: {exact_int8_needs_unfused(False)}). ORT's own U8S8 "
          f"model runs fused with 8-bit weights (saturating here, not exact).")
    print("format preference per profile (targets/*.toml [runtime] formats) and why:")
    print("\n".join(profile_preferences()))
    print("On x86 onnxruntime's int8 kernels beat XNNPACK's (the .tflite/onnx row above); the "
          "Pi 4 profile prefers tflite because XNNPACK is the best-measured int8 engine on "
          "the A72 (profile's [XNN] figures).")
    return 0 if all(ok is not False for *_, ok, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

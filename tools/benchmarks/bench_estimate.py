"""Offline estimator vs measurement: latency and peak memory on this machine (`host`).

    python tools/benchmarks/bench_estimate.py                 # 4 models x float32/int8 x 1,2 threads
    python tools/benchmarks/bench_estimate.py --recalibrate   # re-measure the host cost model first
    python tools/benchmarks/bench_estimate.py --published     # also: rpi4 estimates vs published figures

Models: MobileNetV2-like (224x224), a plain CNN, the trained digits CNN, a small transformer
(tools/zoo). int8 = onnxruntime quantize_static, QDQ, uint8 activations, per-channel int8
weights. Predicted = ``edgekit estimate --target host`` figures of each file; measured =
onnxruntime on this machine: latency is the fastest run over interleaved rounds (other
processes on a shared machine only add time), memory the peak RSS delta of loading and
running in a fresh subprocess. Prints predicted/measured ratios; exits 1 if any is outside
the tolerance (default +-30%).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tools")]  # tools.* packages, and the zoo as ``zoo``

import zoo  # noqa: E402
from edgekit.converters.estimate import estimate  # noqa: E402
from edgekit.converters.estimate.host_rates import load_or_calibrate  # noqa: E402
from edgekit.converters.estimate.measure import (  # noqa: E402
    latency_subprocess,
    memory,
    random_feeds,
    session,
)

# published Raspberry Pi 4 figures (shared/reference/board-facts.md): model -> (runtime,
# threads, fp32 ms, int8 ms)
PUBLISHED = {
    "mobilenet_v2": ("XNNPACK", 4, 46.0, 17.0),
    "mobilenet_v1": ("XNNPACK", 4, 77.0, 24.0),
    "mobilenet_v1 (ncnn)": ("ncnn", 4, 72.0, 40.0),
    "resnet18 (ncnn)": ("ncnn", 4, 176.0, 98.0),
}


def quantize(src: Path, dst: Path, samples: list[dict[str, np.ndarray]]) -> Path:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(samples)

        def get_next(self):  # noqa: ANN202 - onnxruntime's interface
            return next(self.items, None)

    pre = dst.with_suffix(".pre.onnx")
    quant_pre_process(str(src), str(pre), skip_symbolic_shape=True)
    quantize_static(str(pre), str(dst), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    per_channel=True)
    pre.unlink()
    return dst


def make_models(out: Path) -> list[tuple[str, Path, Path]]:
    """(name, float path, int8 QDQ path) for each benchmark model."""
    import logging

    logging.getLogger().setLevel(logging.ERROR)  # quantize_static's advice, once per model
    models = []
    for name in ("mobilenetv2_like", "plain_cnn", "transformer_block"):
        factory, _ = zoo.MODELS[name]
        path = zoo.export_onnx(factory(), zoo.example_input(name), out / f"{name}.onnx")
        sess = session(str(path), 1)
        calib = [random_feeds(sess, seed) for seed in range(8)]
        models.append((name, path, quantize(path, out / f"{name}.int8.onnx", calib)))
    digits, _ = zoo.digits_paths()
    x, _ = zoo.digits_data()
    sess = session(str(digits), 1)
    name = sess.get_inputs()[0].name
    calib = [{name: x[i:i + 1]} for i in range(32)]
    models.append(("digits_cnn", digits, quantize(digits, out / "digits_cnn.int8.onnx", calib)))
    return models


def realtime_ok() -> bool:
    """Whether this user may raise processes to real-time priority (tried in a child)."""
    import subprocess

    code = "import os; os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


def ratio_ok(ratio: float, tol: float) -> bool:
    return (1 - tol) <= ratio <= (1 + tol)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recalibrate", action="store_true")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--budget", type=float, default=0.15, help="seconds per config per round")
    parser.add_argument("--tolerance", type=float, default=0.30)
    parser.add_argument("--keep", help="folder for the exported models (default: a temp dir)")
    parser.add_argument("--published", action="store_true",
                        help="also compare rpi4 estimates with published Pi 4 figures")
    parser.add_argument("--realtime", action="store_true",
                        help="measure at real-time priority (root): steadier on a busy machine")
    args = parser.parse_args(argv)
    if args.realtime:  # this process stays ordinary: only the measuring children are raised
        print(f"real-time priority for measurements: {'on' if realtime_ok() else 'not permitted'}")
    threads = [int(t) for t in args.threads.split(",")]
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cpus")
    if args.recalibrate:  # in a child, like the measurements (priority, no torch)
        import subprocess

        subprocess.run([sys.executable, "-m", "edgekit.cli", "calibrate-host",
                        *(["--realtime"] if args.realtime else [])], check=True)
    cal = load_or_calibrate(report=print)
    print(f"host cost model: {cal['key']} ({cal['path']})")
    out = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-estimate-"))
    out.mkdir(parents=True, exist_ok=True)
    models = make_models(out)

    rows = []
    configs = [(str(p), t) for _, f, q in models for p in (f, q) for t in threads]
    start = time.perf_counter()
    timed = latency_subprocess(sorted({c[0] for c in configs}), threads, args.rounds,
                               args.budget, high_priority=args.realtime)
    measured = {(p, t): timed[p][t] for p, t in configs}
    for name, fpath, qpath in models:
        est_f = estimate(str(fpath), "host", threads=threads)
        est_q = estimate(str(qpath), "host", threads=threads)
        for label, path, variant, whatif in (
                ("float32", fpath, est_f.variants["float32"], None),
                ("int8", qpath, est_q.variants["int8"], est_f.variants["int8"])):
            mem = min((memory(str(path), 1) for _ in range(2)), key=lambda m: m["delta_bytes"])
            for t in threads:
                pred, meas = variant.latency_s[t], measured[(str(path), t)]
                rows.append({"model": name, "precision": label, "threads": t, "pred_ms": pred * 1e3,
                             "meas_ms": meas * 1e3, "ratio": pred / meas,
                             "whatif": whatif.latency_s[t] / meas if whatif else None})
            rows[-1]["mem"] = (variant.ram_bytes, mem["delta_bytes"])
    print(f"\nmeasured in {time.perf_counter() - start:.0f} s; load average now "
          f"{os.getloadavg()[0]:.2f}\n")
    print(f"{'model':18s} {'prec':7s} {'thr':>3s} {'predicted':>10s} {'measured':>10s} "
          f"{'ratio':>6s}   {'int8 what-if':>12s}")
    failures = []
    for r in rows:
        whatif = f"{r['whatif']:.2f}" if r["whatif"] else "-"
        flag = "" if ratio_ok(r["ratio"], args.tolerance) else "  <-- outside"
        if flag:
            failures.append(f"latency {r['model']} {r['precision']} {r['threads']}t")
        print(f"{r['model']:18s} {r['precision']:7s} {r['threads']:3d} {r['pred_ms']:8.3f}ms "
              f"{r['meas_ms']:8.3f}ms {r['ratio']:6.2f}   {whatif:>12s}{flag}")
    print(f"\n{'model':18s} {'prec':7s} {'predicted RAM':>14s} {'measured RSS':>13s} {'ratio':>6s}")
    for r in rows:
        if "mem" not in r:
            continue
        pred, meas = r["mem"]
        ratio = pred / meas if meas > 0 else float("inf")
        flag = "" if ratio_ok(ratio, args.tolerance) else "  <-- outside"
        if flag:
            failures.append(f"memory {r['model']} {r['precision']}")
        print(f"{r['model']:18s} {r['precision']:7s} {pred / 2**20:11.2f} MB {meas / 2**20:10.2f} MB "
              f"{ratio:6.2f}{flag}")
    lat = [r["ratio"] for r in rows]
    mem = [r["mem"][0] / r["mem"][1] for r in rows if "mem" in r]
    print(f"\nlatency ratios: min {min(lat):.2f} max {max(lat):.2f}; memory ratios: "
          f"min {min(mem):.2f} max {max(mem):.2f}; tolerance +-{args.tolerance:.0%}")
    if args.published:
        published(out)
    if failures:
        print("outside tolerance: " + ", ".join(failures))
        return 1
    print("all within tolerance")
    return 0


def reference_nets(out: Path) -> dict[str, Path]:
    """MobileNet v1 / v2 and ResNet-18 at 224x224 (random weights: only shapes matter here)."""
    from torch import nn

    def cbr(cin: int, cout: int, k: int, stride: int, groups: int = 1) -> list[nn.Module]:
        return [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
                nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]

    def mobilenet_v1() -> nn.Module:  # Howard et al. 2017, Table 1: 569 M MACs, 4.2 M params
        layers, cin = cbr(3, 32, 3, 2), 32
        for cout, stride in ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
                             *[(512, 1)] * 5, (1024, 2), (1024, 1)):
            layers += cbr(cin, cin, 3, stride, groups=cin) + cbr(cin, cout, 1, 1)
            cin = cout
        return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1024, 1000))

    class Basic(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.body = nn.Sequential(*cbr(cin, cout, 3, stride)[:-1], nn.ReLU(),
                                      nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
            self.skip = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                         if stride != 1 or cin != cout else nn.Identity())

        def forward(self, x):  # noqa: ANN001, ANN202
            return (self.body(x) + self.skip(x)).relu()

    def resnet18() -> nn.Module:  # He et al. 2016: 1.8 G MACs, 11.7 M params
        blocks, cin = [], 64
        for cout, stride in ((64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
                             (512, 1)):
            blocks.append(Basic(cin, cout, stride))
            cin = cout
        return nn.Sequential(*cbr(3, 64, 7, 2), nn.MaxPool2d(3, 2, 1), *blocks,
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000))

    import torch

    x = torch.randn(1, 3, 224, 224)
    nets = {"mobilenet_v2": zoo.mobilenetv2_like(), "mobilenet_v1": mobilenet_v1().eval(),
            "resnet18": resnet18().eval()}
    return {name: zoo.export_onnx(net, x, out / f"{name}.onnx") for name, net in nets.items()}


def published(out: Path) -> None:
    """rpi4 estimates of MobileNet v1/v2 and ResNet-18 beside published Pi 4 latencies."""
    print("\nrpi4 estimate vs published Raspberry Pi 4 figures (board-facts.md)")
    print(f"{'model':22s} {'runtime':8s} {'thr':>3s} {'fp32 pred/pub':>17s} {'int8 pred/pub':>17s}")
    paths = reference_nets(out)
    for label, (runtime, t, fp32, int8) in PUBLISHED.items():
        est = estimate(str(paths[label.split(" ")[0]]), "rpi4", threads=[t])
        pf = est.variants["float32"].latency_s[t] * 1e3
        pi = est.variants["int8"].latency_s[t] * 1e3
        print(f"{label:22s} {runtime:8s} {t:3d} {pf:6.1f}/{fp32:5.1f} ms {pi:6.1f}/{int8:5.1f} ms"
              f"   ratios {pf / fp32:.2f} {pi / int8:.2f}")


if __name__ == "__main__":
    sys.exit(main())

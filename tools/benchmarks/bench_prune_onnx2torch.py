"""Pruning the suite's ONNX models through onnx2torch (issue 34): PP-OCR mobile v2.0 cls
(MobileNetV3-small-like, squeeze-excite) and nudenet 320n (YOLOv8n).

Structured pruning removes channels from torch modules; the suite's MobileNetV3-style nets
and its detector are ONNX sources. onnx2torch 1.5.15 (installed with --no-deps into the
helper's venv) turns them into ``torch.fx`` GraphModules; its NMS and RoiAlign converters
import torchvision (unusable here: CUDA wheels), which neither model uses, so empty stand-in
modules are registered before the import. Paddle2ONNX keeps the weights in Constant nodes,
which onnx2torch does not read: they are moved to initializers first.

For each model: the torch module's agreement with onnxruntime, whether torch-pruning traces
it, the groups reconstruction can handle (read by one 1x1 conv only) with their latency share,
and at ``--share`` of the dense rpi4 int8 estimate: the build's widths (reconstruction plan,
else magnitude masks) and the pruned float model's top-1 agreement with the dense one on the
suite's held-out inputs (Wilson 95% interval), magnitude + BatchNorm re-estimated vs
reconstruction + refit where a group allows it.

``--steps N`` adds each method + distillation (N steps towards the dense model) on
``--distill`` unlabelled inputs: for ppocr_cls, printed lines made as the suite's (half of
them turned 180 degrees) from other text than the calibration and held-out lines; else the
calibration inputs.

    python tools/benchmarks/bench_prune_onnx2torch.py [--models ppocr_cls,nudenet_320n] [--share 0.8]
        [--steps 300] [--distill 512]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_prune_select import wilson  # noqa: E402 - the same interval

SUITE = Path("/work/wt/rzfinal")
SOURCES = {"ppocr_cls": "ch_ppocr_mobile_v2.0_cls_infer.onnx", "nudenet_320n": "320n.onnx"}


def to_torch(path: Path) -> object:
    import onnx
    from onnx import numpy_helper

    vision, ops = types.ModuleType("torchvision"), types.ModuleType("torchvision.ops")
    vision.ops, ops.roi_align = ops, None  # only onnx2torch's NMS / RoiAlign converters use them
    sys.modules.setdefault("torchvision", vision)
    sys.modules.setdefault("torchvision.ops", ops)
    from onnx2torch import convert

    model = onnx.load(str(path))
    kept = []
    for node in model.graph.node:  # Paddle2ONNX: weights in Constant nodes
        if node.op_type == "Constant" and node.attribute[0].name == "value":
            tensor = node.attribute[0].t
            tensor.name = node.output[0]
            model.graph.initializer.append(tensor)
        else:
            kept.append(node)
    del model.graph.node[:]
    model.graph.node.extend(kept)
    # Paddle2ONNX writes a conv's bias as Add(conv, Reshape(constant)): a tensor torch-pruning
    # cannot narrow with the conv (the pruned model then fails at that Add). onnxruntime's
    # basic level folds the constants and fuses the Add (and BatchNorm) into the conv.
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(Path(tmp) / "basic.onnx")
        ort.InferenceSession(model.SerializeToString(), options,
                             providers=["CPUExecutionProvider"])
        model = onnx.load(options.optimized_model_filepath)
    # the pooled features' Reshape to a constant [batch, channels] would keep the dense
    # width: [0, -1] follows whatever width pruning leaves
    pooled = {n.output[0] for n in model.graph.node if n.op_type == "GlobalAveragePool"}
    shapes = {n.input[1] for n in model.graph.node if n.op_type == "Reshape"
              and n.input[0] in pooled}
    for init in model.graph.initializer:
        if init.name in shapes and list(init.dims) == [2]:
            init.CopyFrom(numpy_helper.from_array(np.array([0, -1], np.int64), init.name))
    return convert(model).eval(), model


def distill_inputs(name: str, calib: np.ndarray, count: int) -> np.ndarray:
    """Unlabelled inputs to distil on: ppocr_cls lines from other text (seed 13; the suite's
    calibration lines use seed 11, its held-out lines 12), else the calibration inputs."""
    if name != "ppocr_cls":
        return calib
    from tools.realzoo import text
    from tools.realzoo.vision_sets import _lines, _paddle_line

    _, images = _lines(count, text.CALIB_FONTS, 13, 28)
    turned = [np.ascontiguousarray(im[::-1, ::-1]) if i % 2 else im for i, im in enumerate(images)]
    return np.stack([_paddle_line(im, 192) for im in turned])


def first(out: object) -> object:
    while isinstance(out, (tuple, list)):
        out = out[0]
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="ppocr_cls,nudenet_320n")
    parser.add_argument("--share", type=float, default=0.8)
    parser.add_argument("--steps", type=int, default=0, help="distillation steps (0: none)")
    parser.add_argument("--distill", type=int, default=512, help="distillation inputs")
    args = parser.parse_args()
    import onnxruntime as ort
    import torch
    from edgekit.converters.pruning import distill, prune_structured, reestimate_batchnorm
    from edgekit.converters.pruning.for_build import agreement
    from edgekit.converters.pruning.recon_plan import plan_by_reconstruction
    from edgekit.converters.pruning.reconstruct import consumer_of
    from edgekit.converters.pruning.widths import (
        latency_groups,
        measure_groups,
        op_seconds_by_module,
        plan_widths,
    )
    from edgekit.targets import load_profile

    profile = load_profile("rpi4")
    print(f"load average {'/'.join(f'{v:.1f}' for v in os.getloadavg())}", flush=True)
    for name in args.models.split(","):
        folder = SUITE / name
        calib = np.load(folder / "calib.npz")
        val = np.load(folder / "val.npz")
        x, held = calib[calib.files[0]], val[val.files[0]]
        net, model = to_torch(folder / SOURCES[name])
        session = ort.InferenceSession(model.SerializeToString())
        with torch.no_grad():
            got = first(net(torch.from_numpy(x[:4]))).numpy()
        want = session.run(None, {session.get_inputs()[0].name: x[:4]})[0]
        print(f"\n== {name}: onnx2torch vs onnxruntime max abs error "
              f"{float(np.abs(got - want).max()):.3g} (output scale {float(np.abs(want).max()):.3g});"
              f" calib {len(x)}, held-out {len(held)}", flush=True)
        example = (torch.from_numpy(x[:1]),)
        try:
            found, dense_s = latency_groups(net, example, profile)
        except Exception as exc:  # noqa: BLE001 - the reason is the finding
            print(f"torch-pruning cannot trace it: {type(exc).__name__}: {exc}")
            continue
        handled = [(g, consumer_of(t)) for g, t in found]
        eligible = [g for g, c in handled if c is not None and g.protected is None]
        print(f"dense rpi4 int8 estimate {dense_s * 1e3:.3f} ms; {len(found)} prunable groups, "
              f"{len(eligible)} handled by reconstruction ("
              + ", ".join(f"{g.name} {g.channels} ch, {g.latency_s / dense_s:.1%}" for g in eligible)
              + "); protected: " + ", ".join(sorted({str(g.protected) for g, _ in handled
                                                      if g.protected})), flush=True)
        goal = dense_s * args.share
        started = time.perf_counter()
        recon = plan_by_reconstruction(net, example, [x], profile, goal)
        print(f"reconstruction plan: {recon.predicted_latency_s * 1e3:.3f} ms for a goal of "
              f"{goal * 1e3:.3f} ms (reachable: {recon.reachable and recon.predicted_latency_s <= goal * 1.01}; "
              f"{time.perf_counter() - started:.0f} s)", flush=True)
        started = time.perf_counter()
        groups, _ = measure_groups(net, example, [x], profile)
        plan = plan_widths(groups, dense_s, goal)
        widths = plan.widths
        pruned_s = op_seconds_by_module(prune_structured(net, example, 0.0, widths)[0], example,
                                        profile)[1]
        print(f"magnitude-mask plan: {pruned_s * 1e3:.3f} ms ({pruned_s / dense_s:.1%}), "
              f"thinned: " + ", ".join(f"{g.name} {g.channels}->{widths[g.name]}" for g in groups
                                       if widths[g.name] < g.channels)
              + f" ({time.perf_counter() - started:.0f} s)", flush=True)
        print("| method | top-1 agreement with dense float | 95% interval | seconds |")
        print("| --- | --- | --- | --- |")
        reference = None
        for label, kwargs in (("magnitude + BatchNorm re-estimated", {}),
                              ("reconstruction + refit where a group allows, else magnitude",
                               {"calib": [x]})):
            started = time.perf_counter()
            pruned, report = prune_structured(net, example, 0.0, widths, **kwargs)
            if report.reconstruction is None:
                reestimate_batchnorm(pruned, [x])
            share, reference = agreement(pruned, net, [held], reference)
            k, n = round(share * len(held)), len(held)
            low, high = wilson(k, n)
            refit = ("" if report.reconstruction is None else
                     f" ({len(report.reconstruction.layers)} refit)")
            print(f"| {label}{refit} | {k}/{n} = {share:.1%} | [{low:.1%}, {high:.1%}] | "
                  f"{time.perf_counter() - started:.0f} |", flush=True)
            if args.steps:
                data = distill_inputs(name, x, args.distill)
                result = distill(pruned, net, [data], args.steps, seed=0, progress=False)
                share, reference = agreement(pruned, net, [held], reference)
                k = round(share * len(held))
                low, high = wilson(k, n)
                print(f"| {label}{refit} + distillation ({result.distill_steps} steps on "
                      f"{len(data)} inputs, held-out loss {result.loss_before:.4f} -> "
                      f"{result.loss_after:.4f}) | {k}/{n} = {share:.1%} | [{low:.1%}, "
                      f"{high:.1%}] | {time.perf_counter() - started:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``yolo_reconstruct learn``: block reconstruction (``tools/studies/reconstruct.py``) on a
kept build folder's QDQ model; writes ``ranges-learned.json`` ({tensor: [low, high]}) and
``reconstruct-report.json`` (per block: held-out block SQNR before/after, seconds)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np


def class_saliency(float_path: Path, samples: np.ndarray) -> np.ndarray:
    """Per sample and input pixel, the float model's best class score of the cells covering it
    (YOLOv8's packed output: 4 box rows then class rows over the 3 levels' cells, strides 8/16/32)."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(float_path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    scores = np.concatenate([session.run(None, {name: samples[i:i + 1]})[0] for i in range(len(samples))])
    best = scores[:, 4:].max(1)  # [N, cells]
    height, width = samples.shape[2:]
    out = np.zeros((len(samples), height, width), np.float32)
    start = 0
    for stride in (8, 16, 32):
        h, w = height // stride, width // stride
        level = best[:, start:start + h * w].reshape(-1, h, w)
        out = np.maximum(out, level.repeat(stride, 1).repeat(stride, 2))
        start += h * w
    return out


def class_sensitivity(qdq: object, float_model: object, samples: np.ndarray, seed: int = 0,
                      floor: float = 0.1) -> dict[str, np.ndarray]:
    """Per block boundary tensor (float name), the squared gradient of ``sum(v * scores)`` with
    random signs ``v`` over the packed output's class rows (one Hutchinson probe per sample: its
    expectation is the sum over class scores of each element's squared sensitivity; saturated
    background cells give ~0), divided by its mean, plus ``floor`` (some plain MSE everywhere)."""
    import torch

    from tools.studies.reconstruct import (
        _boundaries,
        float_name,
        partition,
        ultralytics_block,
    )
    from tools.studies.reconstruct_graph import QdqGraph

    quantized = QdqGraph(qdq)
    blocks = partition(quantized, ultralytics_block)
    consts = set(quantized.consts) | set(quantized.arrays)
    ins, outs = _boundaries(blocks, {o.name for o in qdq.graph.output}, consts)  # type: ignore[attr-defined]
    names = sorted({float_name(t) for ts in (*ins, *outs) for t in ts})
    graph = QdqGraph(float_model)
    input_name = float_model.graph.input[0].name  # type: ignore[attr-defined]
    output_name = float_model.graph.output[0].name  # type: ignore[attr-defined]
    generator = torch.Generator().manual_seed(seed)
    found: dict[str, list[np.ndarray]] = {n: [] for n in names if n != input_name}
    for start in range(0, len(samples), 4):
        x = torch.from_numpy(samples[start:start + 4]).requires_grad_(True)
        env = graph.run(graph.nodes, {input_name: x})
        for n in found:
            env[n].retain_grad()
        scores = env[output_name][:, 4:]
        signs = torch.randint(0, 2, scores.shape, generator=generator).float() * 2 - 1
        (signs * scores).sum().backward()
        for n in found:
            found[n].append((env[n].grad ** 2).numpy())
        print(f"sensitivity: {start + len(x)}/{len(samples)}", file=sys.stderr, flush=True)
    out = {}
    for n, parts in found.items():
        g = np.concatenate(parts)
        out[n] = g / max(float(g.mean()), 1e-30) + floor
    return out


def main(argv: list[str]) -> int:
    import onnx

    from tools.studies.reconstruct import Settings, reconstruct

    parser = argparse.ArgumentParser(prog="yolo_reconstruct learn", description=__doc__)
    parser.add_argument("folder", type=Path, help="kept build folder: int8-minmax.onnx, prepared.onnx")
    parser.add_argument("--calib", type=Path, required=True)
    parser.add_argument("--iters", type=int, default=Settings.iters)
    parser.add_argument("--batch", type=int, default=Settings.batch)
    parser.add_argument("--drop", type=float, default=Settings.drop)
    parser.add_argument("--lr-step", type=float, default=Settings.lr_step)
    parser.add_argument("--lr-zero", type=float, default=Settings.lr_zero)
    parser.add_argument("--out", default="ranges-learned.json")
    parser.add_argument("--per-channel-loss", action="store_true")
    parser.add_argument("--only", default="", help="blocks to learn, comma-separated (model.022)")
    parser.add_argument("--focus", type=float, default=0.0,
                        help="weigh block errors by 1 + FOCUS * float's best class score at each pixel")
    parser.add_argument("--fisher", action="store_true",
                        help="weigh block errors by the class scores' squared sensitivity (class_sensitivity)")
    parser.add_argument("--start", type=Path, help="a previous report-*.json: begin from its grids")
    args = parser.parse_args(argv)
    with np.load(args.calib) as data:
        samples = data[data.files[0]].astype(np.float32)
    settings = Settings(iters=args.iters, batch=args.batch, drop=args.drop, lr_step=args.lr_step,
                        lr_zero=args.lr_zero, per_channel_loss=args.per_channel_loss,
                        only=tuple(b for b in args.only.split(",") if b), focus=args.focus)
    saliency = class_saliency(args.folder / "prepared.onnx", samples) if args.focus > 0 else None
    start = json.loads(args.start.read_text())["quantizers"] if args.start else None
    qdq, float_model = onnx.load(str(args.folder / "int8-minmax.onnx")), onnx.load(str(args.folder / "prepared.onnx"))
    sensitivity = class_sensitivity(qdq, float_model, samples) if args.fisher else None
    learned = reconstruct(qdq, float_model, samples, settings,
                          progress=lambda line: print(line, file=sys.stderr, flush=True), start=start,
                          saliency=saliency, sensitivity=sensitivity)
    (args.folder / args.out).write_text(json.dumps({k: list(v) for k, v in learned.ranges.items()}, indent=1))
    report = {"settings": asdict(settings), "seconds": learned.seconds, "load": os.getloadavg(),
              "samples": len(samples), "blocks": [asdict(b) for b in learned.blocks],
              "quantizers": learned.quantizers}
    (args.folder / args.out.replace("ranges", "report")).write_text(json.dumps(report, indent=1))
    print(f"learned {len(learned.ranges)} grids in {learned.seconds:.0f} s (load {os.getloadavg()[0]:.1f})",
          file=sys.stderr)
    return 0

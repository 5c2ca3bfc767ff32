"""Artifacts and timing loops shared by the runtime benchmarks (``bench_runtime.py``,
``bench_runtime_power.py``, ``bench_fastpath.py``, ``bench_peers.py``)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tools")]  # tools.* packages, and the zoo as ``zoo``



def build_small(out: Path) -> Path:
    from edgekit.converters import build

    onnx, npz = REPO / "examples/raspberrypi/digits_cnn.onnx", REPO / "examples/raspberrypi/digits.npz"
    build(str(onnx), target="rpi4", calib=str(npz), output=out, quiet=True,
          formats=["onnx", "tflite"])
    return out


def build_vision(out: Path) -> Path:
    """MobileNetV2-like at 224x224, 1000 classes (random weights: speed only), both formats."""
    import torch
    import zoo
    from edgekit.converters import build

    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    onnx = zoo.export_onnx(zoo.mobilenetv2_like(num_classes=1000), x, out.with_suffix(".onnx"))
    build(str(onnx), target="rpi4", calib="synthetic", output=out, quiet=True,
          formats=["onnx", "tflite"], calib_samples=8)
    return out


def build_medium(out: Path) -> Path:
    """MobileNetV2-like (zoo, random weights: speed only) at 128x128: large enough that a
    second thread pays off here (about 1.5x), small enough to build in seconds."""
    import torch
    import zoo
    from edgekit.converters import build

    x = torch.randn(1, 3, 128, 128, generator=torch.Generator().manual_seed(0))
    onnx = zoo.export_onnx(zoo.mobilenetv2_like(num_classes=100), x, out.with_suffix(".onnx"),
                           dynamic_batch=True)
    build(str(onnx), target="rpi4", calib="synthetic", output=out, quiet=True,
          formats=["onnx"], calib_samples=16)
    return out


def one_input(model: Any, rows: int = 1) -> np.ndarray:
    from edgekit.commands.bench import bench_feeds

    return next(iter(bench_feeds(model, rows).values()))


def closed_loop(model: Any, x: np.ndarray, seconds: float) -> tuple[int, float]:
    """Back-to-back predict calls for ``seconds``; (samples, elapsed)."""
    n, start = 0, time.perf_counter()
    end = start + seconds
    while time.perf_counter() < end:
        model.predict(x)
        n += 1
    return n * x.shape[0], time.perf_counter() - start


def interleaved(models: dict[str, Any], x: np.ndarray, rounds: int, slice_s: float
                ) -> dict[str, float]:
    """Throughput (samples/s) of each model over alternating slices. The order rotates each
    round and slices are 100 ms apart: an idle onnxruntime pool spin-waits ~40 ms of CPU,
    which would be billed to the next slice."""
    done = {k: [0, 0.0] for k in models}
    names = list(models)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            time.sleep(0.1)
            n, s = closed_loop(models[name], x, slice_s)
            done[name][0] += n
            done[name][1] += s
    return {k: n / s for k, (n, s) in done.items()}


def bare_call(model: Any, x: np.ndarray) -> Any:
    """The runtime's own call with nothing of edgekit's around it: onnxruntime's native run
    of the float feed; for .tflite the interpreter with an input quantized beforehand."""
    backend = model.backend
    if model.format == "onnx":
        feeds = {model.inputs[0].name: x}
        if backend.native_call is not None:  # the C run itself, as predict calls it
            native, names, options = backend.native_call
            return lambda: native(names, feeds, options)
        run = backend.run
        return lambda: run(feeds)
    interpreter = backend.interpreter
    plan, out = backend._in[0], backend._out[0].index  # noqa: SLF001 - the raw call needs them
    ready = plan.quantize(x)

    def raw() -> None:
        interpreter.set_tensor(plan.index, ready)
        interpreter.invoke()
        interpreter.get_tensor(out)

    return raw

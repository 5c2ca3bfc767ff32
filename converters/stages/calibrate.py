"""Calibrate: run the float model on calibration data and record each tensor's range.

Uses onnxruntime's calibrators, fed in small chunks so memory stays bounded (ORT's
histogram calibrators keep every intermediate output of one ``collect_data`` call; fed
all at once they held 4.4 GB for 64 images of 224x224). Ranges are saved as ORT
calibration caches, one per method, for the quantize stage.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from typing import Any

import numpy as np
from edgekit.converters.core.interrupt import interruptible
from edgekit.converters.inputs.sharded import optimized_session

from edgekit.errors import UserError

from ..context import CALIBRATION_METHODS, BuildContext, Dataset
from ..pipeline import Stage, StageConfig

CHUNK_SAMPLES = 8  # samples per collect_data call: bounds the calibrator's memory
# Entropy with ORT's defaults keeps 128 bins, which reproduces MinMax exactly; these give a
# real KL-divergence search (TensorRT's classic 2048 bins / 128 quantized levels).
ENTROPY_OPTIONS = {"num_bins": 2048, "num_quantized_bins": 128}
PERCENTILE_OPTIONS = {"num_bins": 2048, "percentile": 99.999}


def methods_for(method: str) -> list[str]:
    if method == "auto":
        return list(CALIBRATION_METHODS)
    if method not in CALIBRATION_METHODS:
        raise UserError(
            f"unknown calibration method {method!r}; allowed: {', '.join(CALIBRATION_METHODS)}, auto"
        )
    return [method]


def feeds(data: Dataset, batched: bool, start: int, stop: int) -> list[dict[str, np.ndarray]]:
    """Model feeds for samples [start, stop): one batch when the batch axis is free, else rows."""
    if batched:
        return [data.feeds(start, stop)]
    return [data.feeds(i, i + 1) for i in range(start, stop)]


class _ListReader:
    """The smallest CalibrationDataReader: hands out a list of feeds once."""

    def __init__(self, items: list[dict[str, np.ndarray]]) -> None:
        self._items = iter(items)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._items, None)


@dataclass(frozen=True)
class CalibrateConfig(StageConfig):
    methods: tuple[str, ...] = ("minmax",)  # one range file (and quantized candidate) each


class Calibrate(Stage):
    name = "calibrate"
    Config = CalibrateConfig
    config: CalibrateConfig
    requires = frozenset({"calib", "float_path", "inputs"})
    provides = frozenset({"quantization", "ranges"})

    def __init__(self) -> None:
        super().__init__()
        self.choices: dict[str, int] = {}

    def configure(self, ctx: BuildContext) -> CalibrateConfig:
        return CalibrateConfig(tuple(methods_for(ctx.config.method)))

    def params(self, ctx: BuildContext) -> dict[str, Any]:
        params = {"methods": sorted(ctx.ranges), "samples": len(ctx.calib) if ctx.calib else 0,
                  "chunk": CHUNK_SAMPLES, "entropy": ENTROPY_OPTIONS, "percentile": PERCENTILE_OPTIONS}
        if self.choices:
            params["pertensor_choices"] = self.choices  # tensors whose range each method gave
        return params

    def run(self, ctx: BuildContext) -> None:
        from onnxruntime.quantization import CalibrationMethod
        from onnxruntime.quantization.calibrate import create_calibrator, save_tensors_data
        from tqdm import tqdm

        data = ctx.calib
        batched = not all(isinstance(i["shape"][i.get("batch_axis", 0)], int)
                          for i in ctx.inputs)
        symmetric = ctx.activation_type == "int8"
        options = {
            "minmax": (CalibrationMethod.MinMax, {"symmetric": symmetric}),
            "percentile": (CalibrationMethod.Percentile, {**PERCENTILE_OPTIONS, "symmetric": symmetric}),
            "entropy": (CalibrationMethod.Entropy, {**ENTROPY_OPTIONS, "symmetric": symmetric}),
        }
        computed: dict[str, object] = {}  # method -> ORT TensorsData (pertensor reuses them)
        asked = list(self.config.methods)
        needed = [m for m in ("minmax", "percentile", "entropy") if m in asked or "pertensor" in asked]
        if ctx.config.executor != "local":
            computed = self._sharded(ctx, batched, {m: options[m][1] for m in needed}, asked)
            needed = []
        for method in needed:
            enum, extra = options[method]
            # ORT's calibrators print progress lines to stdout; ours is the tqdm bar below.
            quiet = contextlib.redirect_stdout(io.StringIO())
            with quiet:
                calibrator = create_calibrator(
                    ctx.float_path, None,
                    augmented_model_path=str(ctx.workdir / f"augmented-{method}.onnx"),
                    calibrate_method=enum, extra_options=extra,
                )
            calibrator.infer_session = optimized_session(calibrator)
            bar = tqdm(total=len(data), desc=f"calibrating ({method})", unit="sample",
                       # None: tqdm draws only on a terminal, so piped logs keep no bar lines
                       disable=True if ctx.config.quiet else None, leave=False)
            for start in range(0, len(data), CHUNK_SAMPLES):
                stop = min(start + CHUNK_SAMPLES, len(data))
                with contextlib.redirect_stdout(io.StringIO()):  # Ctrl-C between and within chunks
                    interruptible(calibrator.collect_data,
                                  _ListReader(feeds(data, batched, start, stop)))
                bar.update(stop - start)
            bar.close()
            path = ctx.workdir / f"ranges-{method}.json"
            with contextlib.redirect_stdout(io.StringIO()):
                ranges = interruptible(calibrator.compute_data)
            computed[method] = ranges
            if method in asked:
                save_tensors_data(ranges, path)
                ctx.ranges[method] = path
            del calibrator
        if "pertensor" in asked:
            self._per_tensor(ctx, computed, batched, symmetric)

    def _sharded(self, ctx: BuildContext, batched: bool, options: dict[str, dict[str, Any]],
                 asked: list[str]) -> dict[str, object]:
        """The same ranges, computed on shards of the data by the build's executor."""
        from edgekit.converters.inputs.sharded import Recipe, calibrate_sharded
        from onnxruntime.quantization.calibrate import save_tensors_data

        from ..executor.shards import executor_for

        recipe = Recipe(ctx.float_path.read_bytes(), batched, CHUNK_SAMPLES, options)
        found = calibrate_sharded(executor_for(ctx.config.executor), recipe, ctx.calib,
                                  list(options), ctx.config.shards, ctx.config.quiet)
        for method in options:
            if method in asked:
                path = ctx.workdir / f"ranges-{method}.json"
                save_tensors_data(found[method], path)
                ctx.ranges[method] = path
        return dict(found)

    def _per_tensor(self, ctx: BuildContext, computed: dict[str, object], batched: bool,
                    symmetric: bool) -> None:
        """Each tensor's range from the method that quantizes its values best (range_choice.py)."""
        from edgekit.converters.ptq.range_choice import combine, sample_values
        from onnxruntime.quantization.calibrate import save_tensors_data

        data = ctx.calib
        tensors = list(computed["minmax"].keys())  # type: ignore[attr-defined]
        chunks = (f for s in range(0, len(data), CHUNK_SAMPLES)
                  for f in feeds(data, batched, s, min(s + CHUNK_SAMPLES, len(data))))
        sampled = sample_values(ctx.float_path, tensors, chunks, ctx.config.seed)
        ranges, wins = combine(computed, sampled, symmetric)
        path = ctx.workdir / "ranges-pertensor.json"
        save_tensors_data(ranges, path)
        ctx.ranges["pertensor"] = path
        self.choices = wins
        ctx.quantization["pertensor_choices"] = wins
        ctx.report("  per-tensor ranges: " + ", ".join(f"{m} {n}" for m, n in wins.items()) + " tensor(s)")

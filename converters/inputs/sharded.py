"""Calibration on shards of the data, merged into exactly the ranges one process computes.

One process (``stages/calibrate.py``) feeds onnxruntime's calibrators chunk after chunk. MinMax
keeps a running min/max: shards merge with min/max, which is exact in any grouping. The
histogram calibrators (percentile, entropy) are order-dependent: the first chunk fixes the bin
grid and a later chunk with a wider range re-grids (onnxruntime's ``HistogramCollector``:
``merge_histogram`` widens by whole bins on both sides; the absolute-value collector appends
bins on the right). A grid change depends only on each chunk's range, never its values, so:

1. every shard reports each of its chunks' ranges per tensor (``ChunkRanges``);
2. the driver replays the collector's re-gridding over all chunks in order (the same numpy
   expressions), giving the grid each chunk was binned on and where those bins sit in the
   final grid (``replay_value`` / ``replay_absolute``);
3. every shard bins each chunk on its grid, exactly as the collector's ``np.histogram`` call
   does, and sums them at their final offsets (``ChunkHistograms``);
4. integer counts add in any order; onnxruntime's own ``compute_collection_result`` turns the
   merged histograms into thresholds.

Every chunk is therefore binned by the same call on the same values as in one process, and
the ranges files are identical. It costs one more pass over the data (step 1), which shards.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from edgekit.converters.context import Dataset
from edgekit.converters.executor import Executor
from edgekit.converters.executor.shards import shard_bounds

Grid = Any  # (bins, threshold) for the value collector, an edges array for the absolute one


@dataclass(frozen=True)
class Recipe:
    """What one process's calibrate stage was told: the model, how it is fed, each method's
    onnxruntime options."""

    model: bytes
    batched: bool  # one feed per chunk (free batch axis) or one per sample
    chunk: int  # samples per collect_data call
    options: dict[str, dict[str, Any]]  # method -> create_calibrator extra_options

    def chunks(self, data: Dataset) -> Iterator[list[dict[str, np.ndarray]]]:
        for start in range(0, len(data), self.chunk):
            stop = min(start + self.chunk, len(data))
            yield ([data.feeds(start, stop)] if self.batched
                   else [data.feeds(i, i + 1) for i in range(start, stop)])

    @contextlib.contextmanager
    def calibrator(self, method: str) -> Iterator[Any]:
        """onnxruntime's calibrator for ``method`` on a private copy of the model (nothing
        is shared with another task, and nothing is left behind)."""
        from onnxruntime.quantization import CalibrationMethod
        from onnxruntime.quantization.calibrate import create_calibrator

        enums = {"minmax": CalibrationMethod.MinMax, "percentile": CalibrationMethod.Percentile,
                 "entropy": CalibrationMethod.Entropy}
        with tempfile.TemporaryDirectory(prefix="edgekit-calib-") as tmp:
            model = Path(tmp) / "float.onnx"
            model.write_bytes(self.model)
            with contextlib.redirect_stdout(io.StringIO()):
                calibrator = create_calibrator(model, None,
                                               augmented_model_path=str(Path(tmp) / "aug.onnx"),
                                               calibrate_method=enums[method],
                                               extra_options=self.options[method])
            calibrator.infer_session = optimized_session(calibrator)
            with contextlib.redirect_stdout(io.StringIO()):
                yield calibrator


def optimized_session(calibrator: Any) -> Any:
    """The calibrator's augmented model in a session with every graph optimization, as the
    build's float reference runs: onnxruntime's calibrators open it with none (no NCHWc
    convolutions), which made calibration the build's slowest stage. Ranges move in the
    last float bits only (EfficientNet-Lite0: at most 7e-5 of a range bound, 16 photos);
    the measured minmax pass 0.93 -> 0.58 s CPU for 16 images (``tools/benchmarks/bench_build.py``).
    Every calibrator, local or on shards, runs this one session kind: the same ranges."""
    import onnxruntime as ort
    from edgekit.converters.core.runner import NO_SPINNING

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry(*NO_SPINNING)  # threads wait without spinning: same ranges
    options.log_severity_level = 3
    return ort.InferenceSession(calibrator.augmented_model_path, sess_options=options,
                                providers=calibrator.execution_providers)


def _activations(calibrator: Any, feeds: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """One chunk's calibrated tensors, flattened as the collector flattens them."""
    names = [o.name for o in calibrator.infer_session.get_outputs()]
    merged: dict[str, list[np.ndarray]] = {}
    for feed in feeds:
        for name, value in zip(names, calibrator.infer_session.run(None, feed), strict=True):
            merged.setdefault(name, []).append(value)
    return {n: np.asarray(v).flatten() for n, v in merged.items()
            if n in calibrator.tensors_to_calibrate}


class _ListReader:
    """The smallest CalibrationDataReader: hands out a list of feeds once."""

    def __init__(self, items: list[dict[str, np.ndarray]]) -> None:
        self._items = iter(items)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._items, None)


def _range(flat: np.ndarray) -> tuple[Any, Any]:
    if flat.size > 0:
        return np.nanmin(flat), np.nanmax(flat)
    return np.array(0, dtype=flat.dtype), np.array(0, dtype=flat.dtype)


# --------------------------------------------------------------------------- shard tasks
@dataclass(frozen=True)
class MinMaxShard:
    recipe: Recipe

    def __call__(self, data: Dataset) -> Any:
        with self.recipe.calibrator("minmax") as calibrator:
            for feeds in self.recipe.chunks(data):
                with contextlib.redirect_stdout(io.StringIO()):
                    calibrator.collect_data(_ListReader(feeds))
            return calibrator.calibrate_tensors_range


@dataclass(frozen=True)
class ChunkRanges:
    """Per chunk, per tensor: (min, max, threshold, |x| min, |x| max), as the collectors
    compute them."""

    recipe: Recipe
    method: str

    def __call__(self, data: Dataset) -> tuple[list[str], list[dict[str, tuple[Any, ...]]]]:
        found: list[dict[str, tuple[Any, ...]]] = []
        order: list[str] = []
        with self.recipe.calibrator(self.method) as calibrator:
            for feeds in self.recipe.chunks(data):
                acts = _activations(calibrator, feeds)
                order = order or list(acts)
                row = {}
                for name, flat in acts.items():
                    low, high = _range(flat)
                    threshold = np.array(max(abs(low), abs(high)), dtype=flat.dtype)
                    absolute = np.absolute(flat)
                    amin, amax = ((absolute.min(), np.nanmax(absolute)) if flat.size
                                  else (low, high))
                    row[name] = (low, high, threshold, amin, amax)
                found.append(row)
        return order, found


@dataclass(frozen=True)
class ChunkHistograms:
    """One shard's counts: each chunk binned on its grid, added at its final offset."""

    recipe: Recipe
    method: str
    absolute: bool
    grids: dict[str, list[Grid]]  # tensor -> grid per global chunk
    offsets: dict[str, list[int]]  # tensor -> final offset per global chunk
    sizes: dict[str, int]  # tensor -> final bin count
    num_bins: int

    def __call__(self, item: tuple[int, Dataset]) -> dict[str, np.ndarray]:
        first, data = item  # the shard's first global chunk index, its samples
        sums = {name: np.zeros(size, dtype=np.int64) for name, size in self.sizes.items()}
        with self.recipe.calibrator(self.method) as calibrator:
            for k, feeds in enumerate(self.recipe.chunks(data), start=first):
                for name, flat in _activations(calibrator, feeds).items():
                    grid, at = self.grids[name][k], self.offsets[name][k]
                    if self.absolute:
                        bins = self.num_bins if k == 0 else grid
                        hist = np.histogram(np.absolute(flat), bins=bins)[0]
                    else:
                        bins, threshold = grid
                        hist = np.histogram(flat, bins, range=(-threshold, threshold))[0]
                    sums[name][at:at + len(hist)] += hist
        return sums


# --------------------------------------------------------------------------- replays
def replay_value(ranges: list[tuple[Any, ...]], num_bins: int) -> tuple[list[Grid], list[int], int, Any]:
    """``HistogramCollector.collect_value``/``merge_histogram``'s grids, chunk by chunk:
    (grid per chunk, final offset per chunk, final bin count, final threshold)."""
    grids: list[Grid] = []
    widened: list[int] = []  # bins added on each side when chunk k re-gridded
    bins, old = num_bins, None
    for _low, _high, threshold in (r[:3] for r in ranges):
        half = 0
        if old is None:
            old = threshold
        elif threshold <= old:
            pass
        elif old == 0:
            old = threshold
        else:
            old_stride = 2 * old / bins
            half = int((threshold - old) // old_stride + 1)
            bins = bins + 2 * half
            old = half * old_stride + old
        grids.append((bins, old))
        widened.append(half)
    after = np.cumsum(widened[::-1])[::-1]  # bins added from chunk k on
    offsets = [int(after[k] - widened[k]) for k in range(len(widened))]
    return grids, offsets, bins, old


def replay_absolute(ranges: list[tuple[Any, ...]], num_bins: int,
                    dtype: np.dtype) -> tuple[list[Grid], list[int], int, np.ndarray]:
    """``HistogramCollector.collect_absolute_value``'s edges, chunk by chunk (bins only ever
    appended on the right, so every offset is 0)."""
    grids: list[Grid] = []
    stored: np.ndarray | None = None
    for _low, _high, _threshold, amin, amax in ranges:
        if stored is None:
            used = np.histogram(np.array([amin, amax], dtype=dtype), bins=num_bins)[1]
        else:
            used = stored
            if amax > stored[-1]:
                width = stored[1] - stored[0]
                used = np.hstack((stored, np.arange(stored[-1] + width, amax + width, width)))
        grids.append(used)
        stored = used.astype(dtype)
    assert stored is not None
    return grids, [0] * len(grids), len(stored) - 1, stored


def _min_max(ranges: list[tuple[Any, ...]]) -> tuple[Any, Any]:
    low, high = ranges[0][0], ranges[0][1]
    for r in ranges[1:]:  # the collector's own builtins min/max chain, in chunk order
        low, high = min(low, r[0]), max(high, r[1])
    return low, high


# --------------------------------------------------------------------------- driver
def calibrate_sharded(executor: Executor, recipe: Recipe, data: Dataset, methods: list[str],
                      shards: int, quiet: bool = False) -> dict[str, Any]:
    """method -> onnxruntime ``TensorsData``, equal to one process's ``compute_data()``."""
    bounds = shard_bounds(len(data), shards)
    assert all(start % recipe.chunk == 0 for start, _ in bounds)
    pieces = [data.take(slice(start, stop)) for start, stop in bounds]
    firsts = [start // recipe.chunk for start, _ in bounds]
    found: dict[str, Any] = {}
    for method in methods:
        if method == "minmax":
            found[method] = _merge_minmax(executor.map(
                MinMaxShard(recipe), pieces, label="calibrating (minmax)", quiet=quiet))
        else:
            found[method] = _histogram_method(executor, recipe, method, pieces, firsts, quiet)
    return found


def _merge_minmax(parts: list[Any]) -> Any:
    from onnxruntime.quantization.calibrate import MinMaxCalibrater

    class _Merger:  # merge_range reads only this flag from its calibrator
        moving_average = False

    merged = parts[0]
    for part in parts[1:]:
        merged = MinMaxCalibrater.merge_range(_Merger(), merged, part)  # type: ignore[arg-type]
    return merged


def _histogram_method(executor: Executor, recipe: Recipe, method: str, pieces: list[Dataset],
                      firsts: list[int], quiet: bool) -> Any:
    from onnxruntime.quantization.calibrate import (
        CalibrationMethod,
        HistogramCollector,
        TensorsData,
    )

    options = recipe.options[method]
    symmetric = bool(options.get("symmetric", method == "percentile"))
    absolute = method == "percentile" and symmetric  # the collector's own choice
    num_bins = int(options["num_bins"])
    parts = executor.map(ChunkRanges(recipe, method), pieces,
                         label=f"calibrating ({method}, ranges)", quiet=quiet)
    order = parts[0][0]
    per_chunk = [row for _, rows in parts for row in rows]
    ranges = {name: [row[name] for row in per_chunk] for name in order}
    dtypes = {name: ranges[name][0][0].dtype for name in order}
    replays = {name: (replay_absolute(ranges[name], num_bins, dtypes[name]) if absolute
                      else replay_value(ranges[name], num_bins)) for name in order}
    task = ChunkHistograms(recipe, method, absolute,
                           {n: r[0] for n, r in replays.items()},
                           {n: r[1] for n, r in replays.items()},
                           {n: r[2] for n, r in replays.items()}, num_bins)
    counts = executor.map(task, list(zip(firsts, pieces, strict=True)),
                          label=f"calibrating ({method}, histograms)", quiet=quiet)
    collector = HistogramCollector(method=method, symmetric=symmetric, num_bins=num_bins,
                                   num_quantized_bins=options.get("num_quantized_bins", 128),
                                   percentile=options.get("percentile", 99.999), scenario="same")
    for name in order:
        hist = np.sum([c[name] for c in counts], axis=0)
        low, high = _min_max(ranges[name])
        bins, last = replays[name][2], replays[name][3]
        if absolute:
            collector.histogram_dict[name] = (hist, last, low, high)
        else:
            edges = np.histogram(np.empty(0, dtype=dtypes[name]), bins, range=(-last, last))[1]
            collector.histogram_dict[name] = (hist, edges, low, high, last)
    with contextlib.redirect_stdout(io.StringIO()):
        thresholds = collector.compute_collection_result()
    kind = CalibrationMethod.Entropy if method == "entropy" else CalibrationMethod.Percentile
    return TensorsData(kind, thresholds)


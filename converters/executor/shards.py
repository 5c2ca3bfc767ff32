"""A dataset split into shards that run on an executor, with results equal to one process's.

Shards are cut on multiples of ``ALIGN`` samples, a multiple of both the calibration chunk (8)
and the runner's batch (32): every shard runs exactly the batches one process would, so each
sample's outputs are bit-identical wherever its shard ran, and concatenating the shards in
order gives one process's array.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..context import BuildConfig, Dataset
from . import Executor, parse_executor

ALIGN = 32  # lcm of stages.calibrate.CHUNK_SAMPLES (8) and runner.BATCH (32)
DEFAULT_SHARDS = 4

_EXECUTORS: dict[str, Executor] = {}


def executor_for(spec: str) -> Executor:
    """One executor per spec for this process: a build's stages share one Ray connection."""
    if spec not in _EXECUTORS:
        _EXECUTORS[spec] = parse_executor(spec)
    return _EXECUTORS[spec]


def shard_bounds(samples: int, shards: int, align: int = ALIGN) -> list[tuple[int, int]]:
    """[start, stop) of at most ``shards`` contiguous pieces covering ``samples``, every
    start a multiple of ``align``; the pieces are as even as that allows."""
    if samples <= 0:
        return []
    blocks = -(-samples // align)
    count = max(1, min(shards, blocks))
    per, extra = divmod(blocks, count)
    bounds, block = [], 0
    for i in range(count):
        size = per + (1 if i < extra else 0)
        bounds.append((block * align, min((block + size) * align, samples)))
        block += size
    return bounds


@dataclass(frozen=True)
class OutputsTask:
    """One shard's model outputs: the model travels as bytes, so a worker on another node
    needs no shared folder for it."""

    model: bytes
    exact_int8: bool

    def __call__(self, data: Dataset) -> list[np.ndarray]:
        from edgekit.converters.core.runner import run_dataset

        return run_dataset(self.model, data, exact_int8=self.exact_int8)


def run_dataset_on(executor: Executor, model: Path, data: Dataset, *, exact_int8: bool = False,
                   shards: int = DEFAULT_SHARDS, label: str = "validating",
                   quiet: bool = False) -> list[np.ndarray]:
    """``runner.run_dataset(model, data)`` with the samples split over the executor."""
    from edgekit.converters.core.runner import run_dataset

    bounds = shard_bounds(len(data), shards)
    if executor.name == "local" or len(bounds) < 2:
        return run_dataset(model, data, exact_int8=exact_int8)
    pieces = [data.take(slice(start, stop)) for start, stop in bounds]
    results = executor.map(OutputsTask(Path(model).read_bytes(), exact_int8), pieces,
                           label=label, quiet=quiet)
    return [np.concatenate([r[j] for r in results]) for j in range(len(results[0]))]


def build_outputs(config: BuildConfig, model: Path, data: Dataset, *,
                  exact_int8: bool = False) -> list[np.ndarray]:
    """A build's validation run: on its ``--executor`` in ``config.shards`` shards."""
    return run_dataset_on(executor_for(config.executor), model, data, exact_int8=exact_int8,
                          shards=config.shards, quiet=config.quiet)

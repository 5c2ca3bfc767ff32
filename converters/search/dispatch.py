"""The search's candidate builds as tasks on the build's executor.

A candidate is the stages left after the search's cached prefix (``calibrate`` and
``quantize`` of one pruning ratio and calibration method) and the validation run of the model
they make. With ``--executor local`` each runs in this process through the ``PrefixCache``,
only when the search asks for the next one: exactly the build before executors. On Ray every
candidate of one batch (the calibration methods of one ratio) is a task, one per worker
running ahead; the search still takes them in order and stops at the first that fits with
margin (the tasks already started finish unwatched, no more start), so its choices, table and artifact are the local ones.

A task receives the prefix's context with its files as bytes (a worker on another node
needs no shared folder) and works in its own temporary folder; it sends back each stage's
context with the files it made, which land in the driver's build folder and in the
``PrefixCache`` as if they had run here (the accuracy guard re-quantizes from them).

The candidates are the pieces when there are several: inside a task, calibration and
validation run in the task's own process (one piece, not shards; their results are the
sharded ones bit for bit). A batch of one candidate (one calibration method) runs in the
driver as before, its calibration and validation in shards on the executor: nested tasks
would only add worker start-ups (measured: a six-ratio minmax search took 3x as long).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..context import BuildContext, Timings, temp_under
from ..executor.shards import build_outputs, executor_for
from ..pipeline import Pipeline, StageConfig
from .cache import Key, PrefixCache

# not shipped: the driver's callback and timer, the PyTorch export (no stage after pruning
# reads it), and the folder (each side has its own)
LOCAL_ONLY = ("report", "timings", "torch_export", "workdir")


@dataclass(frozen=True)
class Same:
    """A field a stage left as the prefix had it (datasets, models, the config): not sent
    back, the driver has it."""


@dataclass(frozen=True)
class FileRef:
    """A path in a shipped context: ``key`` names the file in the accompanying table."""

    key: str


@dataclass
class Shipped:
    """A context's values, paths swapped for ``FileRef``s, and the files they name."""

    values: dict[str, Any]
    files: dict[str, bytes] = field(default_factory=dict)


@dataclass
class CandidateResult:
    contexts: list[dict[str, Any]]  # per stage run: field -> Same(), a FileRef or the value
    files: dict[str, bytes]  # FileRef key -> bytes of the files the stages made
    outputs: list[np.ndarray]  # the candidate's validation outputs
    lines: list[str]  # what the stages reported, said again by the driver
    seconds: dict[str, float]  # the task's Timings
    pid: int  # the worker process that ran it (tests: not the one killed)


def _leaves(value: Any, kind: type, swap: Any) -> Any:
    """``value`` with every ``kind`` in it (itself, or a dict's values) passed through ``swap``:
    paths out to ``FileRef``s on the way to a task, and ``FileRef``s back to paths."""
    if isinstance(value, kind):
        return swap(value)
    if isinstance(value, dict) and any(isinstance(v, kind) for v in value.values()):
        return {k: swap(v) if isinstance(v, kind) else v for k, v in value.items()}
    return value


def ship(ctx: BuildContext) -> Shipped:
    """The prefix context as a task receives it; files are keyed by the driver's path."""
    files: dict[str, bytes] = {}

    def swap(path: Path) -> Any:
        if not path.is_file():
            return path  # e.g. the output path, written by the driver only
        files.setdefault(str(path), path.read_bytes())
        return FileRef(str(path))

    values = {f.name: _leaves(getattr(ctx, f.name), Path, swap) for f in fields(ctx)
              if f.name not in LOCAL_ONLY}
    return Shipped(values, files)


@dataclass(frozen=True)
class CandidateTask:
    """Runs ``stages`` on the shipped prefix with one candidate's stage configs, then
    validates ``ctx.candidates[method]`` as ``Search.evaluate`` does."""

    prefix: Shipped
    stages: tuple[str, ...]

    def __call__(self, item: tuple[Mapping[str, StageConfig], str]) -> CandidateResult:
        configs, method = item
        with tempfile.TemporaryDirectory(prefix="edgekit-candidate-") as tmp:
            root = Path(tmp)
            here: dict[str, Path] = {}  # driver key -> this worker's copy
            for i, (key, data) in enumerate(self.prefix.files.items()):
                path = root / "in" / str(i) / Path(key).name
                path.parent.mkdir(parents=True)
                path.write_bytes(data)
                here[key] = path
            lines: list[str] = []
            values = {k: _leaves(v, FileRef, lambda ref: here[ref.key])
                      for k, v in self.prefix.values.items()}
            base = BuildContext(**values, workdir=root / "base", report=lines.append,
                                timings=Timings())
            # this task is the piece: its calibration and validation run here, unsharded
            base.config = replace(base.config, executor="local")
            chain = []
            with temp_under(root):
                ctx = base
                for name in self.stages:
                    ctx = ctx.fork(name)
                    Pipeline([name], {name: configs[name]} if name in configs else None).run(ctx)
                    chain.append(ctx)
                outputs = build_outputs(ctx.config, ctx.candidates[method], ctx.val,
                                        exact_int8=True)
            return self._result(base, chain, here, outputs, lines)

    def _result(self, base: BuildContext, chain: list[BuildContext], here: dict[str, Path],
                outputs: list[np.ndarray], lines: list[str]) -> CandidateResult:
        driver_key = {str(path): key for key, path in here.items()}
        files: dict[str, bytes] = {}

        def swap(path: Path) -> Any:
            if str(path) in driver_key:
                return FileRef(driver_key[str(path)])  # the driver has it already
            if not path.is_file():
                return path
            files.setdefault(str(path), path.read_bytes())
            return FileRef(str(path))

        contexts = []
        for ctx in chain:
            values: dict[str, Any] = {}
            for f in fields(ctx):
                if f.name in LOCAL_ONLY:
                    continue
                value = getattr(ctx, f.name)
                # shared with the prefix (datasets, models, config): the driver has it
                values[f.name] = Same() if value is getattr(base, f.name) else _leaves(value, Path, swap)
            contexts.append(values)
        return CandidateResult(contexts, files, outputs, lines, dict(base.timings.seconds),
                               os.getpid())


def _land(result: CandidateResult, cache: PrefixCache, key: Key, prefix: BuildContext,
          stages: tuple[str, ...], configs: Mapping[str, StageConfig]) -> BuildContext:
    """The task's contexts in this process: its files in the build folder, each context in
    the cache under the key ``PrefixCache.run`` would have given it."""
    written: dict[str, Path] = {}
    ctx = prefix
    for name, values in zip(stages, result.contexts, strict=True):
        workdir = ctx.workdir / f"{name}-{len(cache.contexts)}"
        workdir.mkdir(parents=True, exist_ok=True)

        def swap(ref: FileRef, folder: Path = workdir) -> Path:
            if ref.key not in result.files:
                return Path(ref.key)  # a driver path the task received
            if ref.key not in written:  # a file made by this stage lands in its folder
                path = folder / Path(ref.key).name
                path.write_bytes(result.files[ref.key])
                written[ref.key] = path
            return written[ref.key]

        own = {k: getattr(prefix, k) if isinstance(v, Same) else _leaves(v, FileRef, swap)
               for k, v in values.items()}
        ctx = BuildContext(**own, workdir=workdir, report=prefix.report, timings=prefix.timings,
                           torch_export=prefix.torch_export)
        key = (*key, (name, configs.get(name)))
        cache.contexts[key] = ctx
        cache.runs[name] = cache.runs.get(name, 0) + 1
    for line in result.lines:
        prefix.report(line)
    for part, seconds in result.seconds.items():
        prefix.timings.seconds[part] = prefix.timings.seconds.get(part, 0.0) + seconds
    return ctx


def candidate_builds(cache: PrefixCache, until: str,
                     each: list[tuple[Mapping[str, StageConfig], str]]
                     ) -> Iterator[tuple[BuildContext, list[np.ndarray] | None]]:
    """For each ``(configs, method)``, in order: the context after ``until`` and, when the
    candidate ran as a task, its validation outputs (None: the caller validates here).
    Stop iterating (close the iterator) to drop the candidates not taken."""
    executor = executor_for(cache.base.config.executor)
    prefixes = [cache.prefix(until, configs) for configs, _ in each]
    keys = {key for key, _, _ in prefixes}
    if executor.name == "local" or len(each) < 2 or len(keys) != 1 or not prefixes[0][2]:
        # in this process, one by one (also: a single candidate, whose calibration and
        # validation go out in shards; nothing left to run; no common prefix)
        for configs, _ in each:
            yield cache.run(until, configs), None
        return
    key, prefix, stages = prefixes[0]
    task = CandidateTask(ship(prefix), stages)
    items = [({n: configs[n] for n in stages if n in configs}, method) for configs, method in each]
    results = executor.imap(task, items, label="candidates", quiet=cache.base.config.quiet)
    try:
        for (configs, _), result in zip(each, results, strict=True):
            yield _land(result, cache, key, prefix, stages, configs), result.outputs
    finally:
        results.close()  # type: ignore[attr-defined]  # a generator: starts no more tasks

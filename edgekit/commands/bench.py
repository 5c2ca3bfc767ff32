"""``edgekit bench``: latency percentiles and throughput per thread count and batch size.

In the style of TFLite's ``benchmark_model``: warm-up runs, then timed runs for a duration
(and at least ``--runs``), percentiles of each call, throughput, peak memory. Inputs are
the artifact's own test vectors (real data) when it has them.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

import click
import numpy as np

from edgekit.commands.params import BATCH_SIZES, FAST_INT8, SECONDS, THREADS_OR_AUTO
from edgekit.errors import UserError


def bench_feeds(model: Any, batch: int) -> dict[str, np.ndarray]:
    """``batch`` rows of the artifact's test vectors (tiled), else seeded random data."""
    from edgekit.adapt.probe import probe_feeds

    vectors: dict[str, np.ndarray] = {}
    if model.spec.test_vectors:
        vectors = model.artifact.test_vectors()
    feeds = {}
    rows = probe_feeds(model.inputs, vectors)
    for spec, (name, row) in zip(model.inputs, rows.items(), strict=True):
        source = vectors.get(f"in/{spec.name}", row)
        reps = -(-batch // max(1, len(source)))
        feeds[name] = np.ascontiguousarray(np.concatenate([source] * reps)[:batch], np.float32)
    return feeds


def bench_one(path: str, threads: int | str, batch: int, duration: float, runs: int,
              warmup: int, policy: str = "balanced", backend: str | None = None,
              **load_options: Any) -> dict[str, Any]:
    """Load, warm up, time ``predict`` calls; one row of the bench table."""
    import edgekit
    from edgekit.runtime.stats import PowerModel, peak_rss_mb, percentiles_ms, reset_peak_rss

    reset_peak_rss()
    t0 = time.perf_counter()
    model = edgekit.load(path, backend=backend, threads=threads, policy=policy, **load_options)
    load_s = time.perf_counter() - t0
    try:
        feeds = bench_feeds(model, batch)
        x = feeds if len(feeds) > 1 else next(iter(feeds.values()))
        for _ in range(warmup):
            model.predict(x)
        times: list[float] = []
        start = time.perf_counter()
        end = start + duration
        while True:
            t = time.perf_counter()
            model.predict(x)
            done = time.perf_counter()
            times.append(done - t)
            if done >= end and len(times) >= max(1, runs):
                break
        elapsed = time.perf_counter() - start
        chosen = model.threads
        power = PowerModel.from_profile(model.spec.target.profile)
        seconds_per_sample = float(np.median(times)) / batch
        mj = round(power.energy_j(chosen, seconds_per_sample) * 1e3, 4)
        stats = model.stats() if model.meter is not None else {}
        if stats.get("energy_source", "modelled") != "modelled":  # a power sensor measured it
            mj = round(stats["energy_j_per_sample"] * 1e3, 4)
        label = f"auto->{chosen}" if threads == "auto" else str(threads)
        return {
            "threads": label, "threads_used": chosen, "batch": batch, "runs": len(times),
            "seconds": round(elapsed, 3), "load_s": round(load_s, 3),
            "latency_ms": percentiles_ms(times),
            "samples_per_s": round(len(times) * batch / elapsed, 2),
            "peak_rss_mb": round(peak_rss_mb() or 0.0, 1),
            "mj_per_sample": mj, "energy_source": stats.get("energy_source", "modelled"),
            "runtime": model.runtime, "format": model.format,
        }
    finally:
        model.close()


def check_batch_memory(spec: Any, batch: int) -> None:
    """A batch whose float inputs fit half the target's RAM (``edgekit/artifact/memory_budget.py``),
    else a ``UserError`` before anything is allocated (--batch 100000000 ran out of memory)."""
    from edgekit.artifact.memory_budget import allowance

    limit = allowance(spec.target.profile)
    row = sum(4 * math.prod(d if isinstance(d, int) and d > 0 else 1 for d in entry.shape[1:])
              for entry in spec.inputs)
    if batch * row > limit:
        raise UserError(f"--batch {batch}: its inputs take {batch * row} bytes; expected at "
                        f"most {limit} (half the RAM of target {spec.target.name!r}): at most "
                        f"--batch {max(1, limit // max(1, row))}")


def add_speedups(rows: list[dict[str, Any]]) -> None:
    """``speedup``: samples/s over the same format's and batch's 1-thread row (thread
    scaling at a glance; < 1 means more threads cost here)."""
    base = {(r["format"], r["batch"]): r["samples_per_s"] for r in rows if r["threads"] == "1"}
    for r in rows:
        one = base.get((r["format"], r["batch"]))
        r["speedup"] = round(r["samples_per_s"] / one, 3) if one else None


def table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'format':<7} {'threads':<9} {'batch':>5} {'runs':>7} {'p50 ms':>9} {'p90 ms':>9} "
            f"{'p95 ms':>9} {'p99 ms':>9} {'samples/s':>11} {'speedup':>8} {'peak MB':>8} "
            f"{'mJ/sample':>10}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lat = r["latency_ms"]
        speedup = f"{r['speedup']:.2f}x" if r.get("speedup") else "-"
        lines.append(
            f"{r.get('format', ''):<7} {r['threads']:<9} {r['batch']:>5} {r['runs']:>7} {lat['p50']:>9.3f} "
            f"{lat['p90']:>9.3f} {lat['p95']:>9.3f} {lat['p99']:>9.3f} "
            f"{r['samples_per_s']:>11.1f} {speedup:>8} {r['peak_rss_mb']:>8.1f} {r['mj_per_sample']:>10.4f}"
        )
    return "\n".join(lines)


def runtimes_for(spec: Any) -> list[str | None]:
    """One installed runtime per format in the artifact (None: let load choose)."""
    from edgekit.backends import backends_for

    names: list[str | None] = []
    for entry in spec.models:
        installed = [c.name for c in backends_for(entry.format) if c.available()]
        if installed:
            names.append(installed[0])
    return names or [None]


@click.command(name="bench")
@click.argument("artifact", type=click.Path(dir_okay=False))
@click.option("--threads", "threads", default="1,auto", show_default=True, type=THREADS_OR_AUTO,
              help="Thread counts and/or 'auto', comma separated (e.g. 1,2,4,auto).")
@click.option("--batch", "batches", default="1", show_default=True, type=BATCH_SIZES,
              help="Batch sizes, comma separated (e.g. 1,4).")
@click.option("--duration", default=10.0, show_default=True, type=SECONDS,
              help="Seconds of timed runs per configuration.")
@click.option("--runs", default=1, show_default=True, type=click.IntRange(1),
              help="At least this many timed runs per configuration.")
@click.option("--warmup", default=5, show_default=True, type=click.IntRange(0),
              help="Untimed warm-up runs per configuration.")
@click.option("--policy", default="balanced", show_default=True,
              type=click.Choice(["balanced", "latency", "efficiency"]),
              help="Tuner policy for 'auto'.")
@click.option("--backend", help="Force a runtime (onnxruntime, litert, tflite-runtime); "
              "default: every format the artifact holds, each on its first installed runtime.")
@FAST_INT8
@click.option("--json", "as_json", is_flag=True, help="Rows as JSON.")
@click.option("--soak", type=click.FloatRange(min=0.0, min_open=True), metavar="SECONDS",
              help="Soak: run this long (first --threads and --batch value) and record per "
              "interval latency, temperature, CPU frequency, throttling and energy.")
@click.option("--rate", type=click.FloatRange(min=0.0, min_open=True),
              help="Soak: requests per second (default: flat out).")
@click.option("--interval", "interval_s", default=5.0, show_default=True,
              type=click.FloatRange(min=0.1), help="Soak: seconds per interval.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False),
              help="Soak: the SVG plot to write (default: ARTIFACT's name + .soak.svg here).")
@click.option("--root", default="/", show_default=True, type=click.Path(file_okay=False),
              help="Soak: root of the sysfs/proc tree the sensors are read from.")
def command(artifact: str, threads: list[int | str], batches: list[int], duration: float,
            runs: int, warmup: int, policy: str, backend: str | None, fast_int8: bool,
            as_json: bool, soak: float | None = None, rate: float | None = None,
            interval_s: float = 5.0, plot_path: str | None = None, root: str = "/") -> None:
    """Benchmark ARTIFACT: per thread count and batch size, latency percentiles of
    Model.predict, throughput, peak memory and the profile's energy estimate. With --soak:
    the board's numbers as it heats (per-interval table, an SVG plot, the settled p95)."""
    from edgekit.artifact.archive import read_artifact
    from edgekit.runtime.stats import usable_cpus

    if soak is not None:
        from edgekit.commands.soak_run import soak_command

        soak_command(artifact, threads[0], batches[0], soak, rate, interval_s, plot_path,
                     root, warmup, policy, backend, as_json, bench_feeds)
        return
    spec = read_artifact(artifact).spec
    fixed = spec.inputs[0].shape[0] if spec.inputs else None
    for b in batches:
        if isinstance(fixed, int) and fixed > 1 and b != fixed:
            raise UserError(f"this model has a fixed batch of {fixed}; --batch must be "
                            f"{fixed}, got {b}")
        check_batch_memory(spec, b)
    threads = list(dict.fromkeys(threads))  # capped counts may repeat
    rows = []
    for runtime in [backend] if backend else runtimes_for(spec):
        for t in threads:
            for b in batches:
                rows.append(bench_one(artifact, t, b, duration, runs, warmup, policy, runtime,
                                      exact_int8=not fast_int8))
    add_speedups(rows)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    runtimes = ", ".join(dict.fromkeys(r["runtime"] for r in rows))
    click.echo(f"{artifact}: target {spec.target.name}, runtime(s) {runtimes}, "
               f"{usable_cpus()} usable CPUs, warm-up {warmup}, {duration:g} s per row")
    click.echo(table(rows))

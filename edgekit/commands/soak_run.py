"""``edgekit bench --soak SECONDS``: load, warm up, soak (``edgekit/ops/soak.py``), print the
per-interval table as it goes, the summary, and write the SVG plot."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import numpy as np


def default_plot(artifact: str) -> str:
    name = os.path.basename(artifact)
    stem = name[:-len(".edgekit")] if name.endswith(".edgekit") else name
    return f"{stem}.soak.svg"


def soak_command(artifact: str, threads: int | str, batch: int, seconds: float,
                 rate: float | None, interval_s: float, plot_path: str | None, root: str,
                 warmup: int, policy: str, backend: str | None, as_json: bool,
                 bench_feeds: Callable[[Any, int], dict[str, np.ndarray]]) -> None:
    """``bench_feeds``: the bench's inputs for a model and batch (``commands/bench.py``,
    handed over: that module imports this one)."""
    import edgekit
    from edgekit.ops.soak import HEADER, line, plot, run_soak, summarize, summary_lines
    from edgekit.tempfiles import atomic_write_text

    plot_path = plot_path or default_plot(artifact)
    with edgekit.load(artifact, backend=backend, threads=threads, policy=policy,
                      power_root=root) as model:
        feeds = bench_feeds(model, batch)
        x: Any = feeds if len(feeds) > 1 else next(iter(feeds.values()))
        for _ in range(warmup):
            model.predict(x)
        pace = f"{rate:g}/s" if rate else "flat out"
        if not as_json:  # the table row by row as intervals end: a long soak shows progress
            click.echo(f"{artifact}: soak {seconds:g} s {pace}, {model.runtime} "
                       f"{model.threads or 'default'} thread(s), batch {batch}, "
                       f"{interval_s:g} s intervals, sensors under {root}")
            click.echo(HEADER)
        intervals = run_soak(model, x, seconds, rate, interval_s, root,
                             on_interval=None if as_json else lambda i: click.echo(line(i)))
        summary = summarize(intervals)
        title = (f"{os.path.basename(artifact)}: soak {seconds:g} s {pace}, {model.runtime}, "
                 f"{model.threads or 'default'} thread(s)")
    atomic_write_text(Path(plot_path), plot(intervals, summary, title))
    if as_json:
        click.echo(json.dumps({"intervals": [i.as_dict() for i in intervals],
                               "summary": summary, "plot": plot_path}, indent=2))
        return
    click.echo("(* throttling: a current get_throttled bit or a capped cpufreq)")
    for text in summary_lines(summary):
        click.echo(text)
    click.echo(f"plot: {plot_path}")

"""``edgekit emulate``: verify an artifact on a target's own CPU model under QEMU."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from edgekit.commands.quiet import quiet_flag

if TYPE_CHECKING:
    import numpy as np


@click.command(name="emulate")
@click.argument("artifact", type=click.Path(dir_okay=False))
@click.option("--target", "-t", required=True,
              help="Target profile whose CPU to emulate (rpi4: cortex-a72, rpi-zero2w: cortex-a53).")
@click.option("--runs", default=3, show_default=True, type=click.IntRange(0, 100),
              help="Timed inferences per format after verification (emulated: keep it small).")
@click.option("--timeout", default=1800.0, show_default=True, type=float,
              help="Seconds allowed for the emulated run.")
@click.option("--rebuild-sysroot", is_flag=True, help="Rebuild the cached sysroot first.")
@click.option("--json", "as_json", is_flag=True, help="Print the guest's full report as JSON.")
@quiet_flag
@click.option("--val", "val_path", type=click.Path(dir_okay=False, exists=True),
              help="Held-out .npz (arrays named by input or x, labels as y): run it on the "
                   "emulated target and report the task metric next to the host's.")
@click.option("--metric", default=None,
              help="Task metric for --val: top1, detection, ctc, sqnr or module:function "
                   "(default: chosen from the outputs, top1 for class scores).")
@click.option("--val-samples", default=256, show_default=True, type=click.IntRange(1),
              help="At most this many --val samples (emulated: one at a time).")
@click.option("--max-drop", default=0.5, show_default=True, type=float,
              help="Points the target may lose against the host on --val (share metrics).")
def command(artifact: str, target: str, runs: int, timeout: float, rebuild_sysroot: bool,
            as_json: bool, quiet: bool, val_path: str | None, metric: str | None,
            val_samples: int, max_drop: float) -> None:
    """Run ARTIFACT's test vectors on TARGET's CPU model under QEMU (arm64 sysroot built
    once and cached), then time a few emulated runs; with --val, the task metric on the
    emulated target next to the host's. Exits 2 when verification fails or the target
    loses more than --max-drop points."""
    from edgekit.converters.emulation import emulate, prepare
    from edgekit.targets import load_profile

    from edgekit.errors import VerificationError

    def progress(message: str) -> None:
        if not quiet:
            click.echo(message, err=True)

    profile = load_profile(target)
    if rebuild_sysroot:
        prepare(profile, progress=progress, rebuild=True)
    result = emulate(artifact, profile, runs=runs, progress=progress, timeout=timeout)
    if as_json:
        click.echo(json.dumps({"target": result.target, "cpu_model": result.cpu.model,
                               "passed": result.passed, "seconds": round(result.seconds, 2),
                               "notes": result.notes, "guest": result.guest}, indent=2))
    else:
        click.echo("\n".join(result.lines()))
    lost = val_report(artifact, profile, result.cpu.model, val_path, metric, val_samples,
                      max_drop, progress, timeout) if val_path else []
    sys.stdout.flush()
    if lost:
        raise VerificationError(f"{artifact}: on {target} ({result.cpu.model}) " + "; ".join(lost))
    if not result.passed:
        # VerificationError is a UserError: the CLI maps it to its exit code with this message.
        raise VerificationError(
            f"{artifact}: emulated verification on {target} ({result.cpu.model}) failed"
            + (f": {result.guest['error']}" if "error" in result.guest else
               " (outputs outside tolerance, see the report above)")
        )


def val_report(artifact: str, profile: object, cpu: str, val_path: str, metric: str | None,
               limit: int, max_drop: float, progress: Callable[[str], None],
               timeout: float) -> list[str]:
    """Print the metric per format, host next to target; return the formats that lost too much."""
    from edgekit.converters.emulation.accuracy import host_outputs, load_val, scores_on_target
    from edgekit.converters.metrics import get_metric
    from edgekit.converters.metrics.task_accuracy import on_output

    from edgekit.artifact.archive import read_artifact

    spec = read_artifact(artifact).spec
    feeds, labels = load_val(val_path, [i.name for i in spec.inputs], limit)
    output = 0
    if metric is None:
        def outputs() -> list[np.ndarray]:
            return next(iter(host_outputs(artifact, feeds).values()))[1]

        metric, output = default_metric(spec.validation, outputs, labels is not None)
    judge = get_metric(metric)
    progress(f"running {len(next(iter(feeds.values())))} --val samples under emulation")
    scores, _ = scores_on_target(artifact, profile, feeds, labels, on_output(judge, output) if output else judge,
                                 metric, progress=progress, timeout=timeout)
    lost = []
    for score in scores:
        click.echo(f"val {score.line(cpu)}")
        drop = score.drop_points
        if drop is not None and drop > max_drop:
            lost.append(f"{score.format} loses {drop:.2f} points of {metric} (> {max_drop})")
    return lost


def default_metric(validation: dict[str, Any], outputs: Callable[[], list[np.ndarray]],
                   has_labels: bool) -> tuple[str, int]:
    """(metric, output judged) when no --metric is given: the one the build judged, as its
    manifest records it (``validation.metric``), else the build's rule (``choose_default``)
    on every --val sample's host outputs. Chosen from 2 samples, a sigmoid detection table
    often has no confident cell yet and read as the signal where the build judged 'cells'.
    A recorded 'detection' may have had the build's --postprocess, which emulate cannot
    replay: the rule decides then."""
    from edgekit.converters.metrics import METRICS, choose_default

    recorded = validation.get("metric") or {}
    name = recorded.get("name")
    if isinstance(name, str) and name in METRICS and name != "detection":
        return name, int(recorded.get("output", 0))
    choice = choose_default(outputs(), has_labels=has_labels)
    return choice.name, choice.output

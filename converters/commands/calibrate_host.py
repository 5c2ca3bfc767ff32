"""``edgekit calibrate-host``: measure this machine for the ``host`` cost model and cache it.

About half a minute of onnxruntime micro-benchmarks (conv, depthwise, gemm in float32 and int8
QDQ at 1 and 2 threads, elementwise, per-op overhead, weight streaming, session memory);
the figures are cached per CPU model and onnxruntime version, where ``edgekit estimate
--target host`` reads them.
"""

from __future__ import annotations

import json

import click

from edgekit.commands.quiet import is_quiet


@click.command(name="calibrate-host")
@click.option("--show", is_flag=True, help="Print the cached figures without measuring.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.option("--realtime", is_flag=True,
              help="Measure at real-time priority (root): steadier figures on a busy machine.")
def command(show: bool, as_json: bool, realtime: bool) -> None:
    """Measure this machine's rates for `--target host` estimates (cached)."""
    import os

    from edgekit.converters.estimate.host_rates import load_or_calibrate
    from edgekit.converters.estimate.measure import realtime as go_realtime

    boosted = realtime and not show and go_realtime()
    if realtime and not show and not boosted:
        click.echo("warning: real-time priority not permitted; measuring at normal priority",
                   err=True)
    load = os.getloadavg()[0]
    if not show and not boosted and load > 0.5 * (os.cpu_count() or 1):
        click.echo(f"warning: load average {load:.1f} on {os.cpu_count()} cpus: other processes "
                   "may slow the measurement (try --realtime)", err=True)

    report = None if as_json or is_quiet() else click.echo  # -q: the result lines only
    if not show and not as_json and not is_quiet():
        click.echo("measuring onnxruntime on this machine (about half a minute)...")
    entry = load_or_calibrate(run=not show, force=not show, report=report)
    if as_json:
        click.echo(json.dumps({k: entry[k] for k in ("key", "path", "rates", "created")
                               if k in entry}, indent=2))
        return
    if show:
        for key, value in sorted(entry["rates"].items()):
            click.echo(f"  {key:24s} {value:10.3f}")
    click.echo(f"cached for {entry['key']}\n  in {entry['path']}")

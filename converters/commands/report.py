"""``edgekit report``: an artifact's HTML report (per-layer SQNR, precision per layer, the
search's accuracy/latency front), one self-contained file that opens offline in a browser.

    edgekit report model.edgekit -o report.html
"""

from __future__ import annotations

from pathlib import Path

import click


@click.command(name="report")
@click.argument("artifact", type=click.Path(dir_okay=False))
@click.option("--output", "-o", type=click.Path(dir_okay=False),
              help="HTML file to write (default: <artifact>.report.html beside it).")
def command(artifact: str, output: str | None) -> None:
    """Write ARTIFACT's HTML report: per-layer SQNR, the precision of each layer and the
    budget search's accuracy/latency front."""
    from edgekit.converters.report.html import write_report

    from edgekit.artifact.archive import read_artifact
    from edgekit.tempfiles import check_writable

    target = Path(output) if output else Path(artifact).with_suffix(".report.html")
    check_writable(target, "report (-o)")
    loaded = read_artifact(artifact)  # hashes checked: a report of a corrupt file would mislead
    click.echo(str(write_report(loaded.manifest, target, Path(artifact).name)))

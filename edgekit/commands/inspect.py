"""``edgekit inspect``: an artifact's manifest as a readable table (or JSON)."""

from __future__ import annotations

import json

import click


@click.command(name="inspect")
@click.argument("artifact", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="The whole manifest as JSON.")
def command(artifact: str, as_json: bool) -> None:
    """Show an artifact's manifest as a readable table."""
    from edgekit.artifact import read_artifact
    from edgekit.inspect import manifest_table

    manifest = read_artifact(artifact).manifest
    click.echo(json.dumps(manifest, indent=2) if as_json else manifest_table(manifest))

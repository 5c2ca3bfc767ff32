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
    from edgekit.trust import discover_trusted_keys
    from edgekit.verify import describe_signature

    loaded = read_artifact(artifact)  # shown even when not trusted here: inspect runs nothing
    if as_json:
        click.echo(json.dumps(loaded.manifest, indent=2))
        return
    signer = describe_signature(loaded.signature)
    trusted = discover_trusted_keys()
    if trusted and loaded.signature is not None:
        match = next((k for k in trusted if k.raw == loaded.signature.public_key), None)
        signer = (f"signed by key {loaded.signature.key_id} (trusted: {match.describe()})"
                  if match else f"signed by key {loaded.signature.key_id} (NOT trusted here: "
                  f"load refuses it; trusted: {', '.join(k.key_id for k in trusted)})")
    elif trusted:
        signer = "unsigned (load refuses it: trusted keys are configured here)"
    click.echo(manifest_table(loaded.manifest) + f"\nsignature\n  {signer}")

"""``edgekit inspect``: an artifact's manifest as a readable table (or JSON)."""

from __future__ import annotations

import json

import click


@click.command(name="inspect")
@click.argument("artifact", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="The whole manifest as JSON.")
@click.option("--layers", "layers", is_flag=True,
              help="Per compute layer: precision and output SQNR against float, worst first, "
                   "and why a layer runs wider than int8.")
def command(artifact: str, as_json: bool, layers: bool) -> None:
    """Show an artifact's manifest as a readable table.

    A file whose members fail their hash check is shown anyway, marked HASH MISMATCH and
    unverified, and the command exits 2 (as loading it would fail)."""
    from edgekit.artifact.archive import read_artifact
    from edgekit.errors import ArtifactError
    from edgekit.ops.inspect import layers_table, manifest_table, unverified_manifest
    from edgekit.ops.verify import describe_signature
    from edgekit.trust.keys import discover_trusted_keys

    try:
        loaded = read_artifact(artifact)  # shown even when not trusted here: inspect runs nothing
    except ArtifactError as exc:
        # A file that fails its hash check is still shown (forensics: what does it claim?),
        # under a banner that cannot be missed, and the command still fails.
        manifest = unverified_manifest(artifact) if "hash" in str(exc) else None
        if manifest is None:
            raise
        banner = f"!!! HASH MISMATCH: {exc}\n!!! the manifest below is UNVERIFIED; do not deploy"
        try:
            if layers:
                from edgekit.artifact.manifest import Manifest

                shown = Manifest.from_dict(manifest).layers
                text = (json.dumps([la.to_dict() for la in shown], indent=2) if as_json
                        else layers_table(shown))
            else:
                text = json.dumps(manifest, indent=2) if as_json else manifest_table(manifest)
        except (KeyError, TypeError, AttributeError, ValueError, ArtifactError):
            text = json.dumps(manifest, indent=2)  # a manifest too damaged for the table
        click.echo(text if as_json else f"{banner}\n{text}")
        raise
    if layers:
        click.echo(json.dumps([la.to_dict() for la in loaded.spec.layers], indent=2) if as_json
                   else layers_table(loaded.spec.layers))
        return
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

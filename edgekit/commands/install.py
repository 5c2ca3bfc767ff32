"""``edgekit install``: verify an artifact on this device, then make it current (rollback-able)."""

from __future__ import annotations

from pathlib import Path

import click

DEFAULT_ROOT = "~/edgekit"


@click.command(name="install")
@click.argument("artifact", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--root", default=DEFAULT_ROOT, show_default=True,
              help="Folder holding one slot per artifact name (the bundle installer's --prefix).")
@click.option("--name", help="Slot name [default: the file name without .edgekit].")
@click.option("--service", help="systemd unit to restart after the switch "
                                "[default: edgekit-NAME].")
@click.option("--backend", help="Verify on this runtime only (onnxruntime, litert, tflite-runtime).")
def command(artifact: Path, root: str, name: str | None, service: str | None,
            backend: str | None) -> None:
    """Copy ARTIFACT beside the current one, run its test vectors here (and check its
    signature when trusted keys are configured), then switch ROOT/NAME/current to it
    atomically and restart the service. On any failure the current one stays (exit 1 for a failed check, 2 for bad input)."""
    from edgekit.ops.deploy import default_name, install
    from edgekit.tempfiles import check_writable

    check_writable(Path(root).expanduser(), "--root", folder=True)
    slot = name or default_name(artifact)
    result = install(artifact, Path(root).expanduser(), slot, service or f"edgekit-{slot}",
                     backend)
    click.echo("\n".join(result.report.lines()))
    click.echo(f"current:  {result.slot / 'current'} -> {result.release.name}")
    if result.previous is not None:
        click.echo(f"previous: {result.previous.name} (edgekit rollback {slot} --root {root})")
    click.echo(f"service:  {result.restarted}")

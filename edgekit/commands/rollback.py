"""``edgekit rollback``: switch an installed artifact back to its previous release."""

from __future__ import annotations

from pathlib import Path

import click

from edgekit.commands.install import DEFAULT_ROOT


@click.command(name="rollback")
@click.argument("name")
@click.option("--root", default=DEFAULT_ROOT, show_default=True,
              help="Folder holding the slots (as given to edgekit install).")
@click.option("--service", help="systemd unit to restart [default: edgekit-NAME].")
def command(name: str, root: str, service: str | None) -> None:
    """Make ROOT/NAME/previous current again (atomic switch) and restart the service."""
    from edgekit.ops.deploy import rollback
    from edgekit.tempfiles import check_writable

    slot = Path(root).expanduser() / name
    if slot.is_dir():  # a missing slot is rollback's own error
        check_writable(slot, "--root", folder=True)

    now, before = rollback(Path(root).expanduser(), name, service or f"edgekit-{name}")
    click.echo(f"current:  {now.name} (was {before.name}, kept as previous)")

"""``edgekit bundle``: artifacts + device wheels + an offline installer for one target."""

from __future__ import annotations

from pathlib import Path

import click

from edgekit.commands.quiet import quiet_flag


@click.command(name="bundle")
@click.argument("artifacts", nargs=-1, required=True,
                type=click.Path(dir_okay=False, path_type=Path))
@click.option("--target", "-t", required=True, help="Board profile (rpi4, rpi5, ...).")
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path),
              help="A folder, or FILE.tar.gz for a reproducible tarball.")
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
@quiet_flag
def command(artifacts: tuple[Path, ...], target: str, output: Path, force: bool,
            quiet: bool) -> None:
    """Bundle ARTIFACTS for TARGET: the artifacts, this project's device wheel, the target's
    wheels pinned by sha256, install.sh (offline venv install, verify, atomic switch,
    systemd unit) and BUNDLE.sha256. Same inputs, same bytes."""
    from edgekit.converters.bundle import build_bundle
    from edgekit.targets import load_profile

    from edgekit.tempfiles import check_writable

    check_writable(output, "bundle (-o)")  # before the wheels are fetched

    def progress(message: str) -> None:
        if not quiet:
            click.echo(message, err=True)

    result = build_bundle(list(artifacts), load_profile(target), output, force=force,
                          progress=progress)
    click.echo(f"bundle: {result.path} ({result.size_bytes / 1e6:.1f} MB, "
               f"{len(result.wheels)} wheels, {result.seconds:.1f} s)")
    click.echo(f"on the device: sh install.sh   (artifacts: {', '.join(result.artifacts)})")

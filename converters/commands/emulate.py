"""``edgekit emulate``: verify an artifact on a target's own CPU model under QEMU."""

from __future__ import annotations

import json
import sys

import click


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
@click.option("--quiet", "-q", is_flag=True, help="No sysroot progress output.")
def command(artifact: str, target: str, runs: int, timeout: float, rebuild_sysroot: bool,
            as_json: bool, quiet: bool) -> None:
    """Run ARTIFACT's test vectors on TARGET's CPU model under QEMU (arm64 sysroot built
    once and cached), then time a few emulated runs. Exits 2 when verification fails."""
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
    sys.stdout.flush()
    if not result.passed:
        # VerificationError is a UserError: the CLI maps it to its exit code with this message.
        raise VerificationError(
            f"{artifact}: emulated verification on {target} ({result.cpu.model}) failed"
            + (f": {result.guest['error']}" if "error" in result.guest else
               " (outputs outside tolerance, see the report above)")
        )

"""``edgekit targets``: the board profiles, one line each."""

from __future__ import annotations

import click


@click.command(name="targets")
def command() -> None:
    """List the target profiles."""
    from edgekit.targets import list_profiles, load_profile

    click.echo(f"{'name':<17} {'cpu':<22} {'ram':<14} {'formats':<14} description")
    for name in list_profiles():
        p = load_profile(name)
        cpu = f"{p.cpu.cores}x {p.cpu.core}" + (f" {p.cpu.freq_mhz}MHz" if p.cpu.freq_mhz else "")
        ram = "/".join(f"{r // 1024}G" if r >= 1024 else f"{r}M" for r in p.memory.ram_mb if r) or "-"
        click.echo(f"{name:<17} {cpu:<22} {ram:<14} {','.join(p.runtime.formats):<14} {p.description}")

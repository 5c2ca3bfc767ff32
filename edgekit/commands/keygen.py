"""``edgekit keygen``: write an Ed25519 key pair for signing artifacts."""

from __future__ import annotations

import click


@click.command(name="keygen")
@click.argument("private_key", type=click.Path(dir_okay=False))
@click.option("--public", "public_key", type=click.Path(dir_okay=False),
              help="Where the public key goes (default: PRIVATE_KEY.pub).")
@click.option("--force", is_flag=True, help="Replace existing key files.")
def command(private_key: str, public_key: str | None, force: bool) -> None:
    """Write a new Ed25519 key pair: PRIVATE_KEY (mode 0600; keep it on the build host) and
    its public key (copy it to the devices' trusted-key folder or $EDGEKIT_TRUSTED_KEYS)."""
    from edgekit.tempfiles import check_writable
    from edgekit.trust.signing import generate_key_pair

    check_writable(private_key, "private key")
    check_writable(public_key or f"{private_key}.pub", "public key (--public)")
    public = generate_key_pair(private_key, public_key, overwrite=force)
    click.echo(f"key id {public.key_id}\n  private key {private_key} (mode 0600, never copy "
               f"it to a device)\n  public key  {public.source}")

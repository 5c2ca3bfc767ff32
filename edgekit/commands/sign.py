"""``edgekit sign``: sign an artifact's manifest with an Ed25519 private key."""

from __future__ import annotations

import click


@click.command(name="sign")
@click.argument("artifact", type=click.Path(dir_okay=False))
@click.option("--key", "key", required=True, type=click.Path(dir_okay=False),
              help="The private key (from `edgekit keygen`).")
@click.option("--output", "-o", type=click.Path(dir_okay=False),
              help="Write the signed artifact here (default: replace ARTIFACT atomically).")
@click.option("--release-version", type=click.IntRange(0, (1 << 53) - 1),
              help="The release number the signature binds (devices can refuse older ones "
                   "with --min-release) [default: the artifact's, else 1].")
def command(artifact: str, key: str, output: str | None, release_version: int | None) -> None:
    """Sign ARTIFACT: its members are verified against their hashes first, then the
    manifest (which hashes every member, names the target, and gets a release section with
    the release number and the signing time) is signed; an old signature is replaced."""
    from edgekit.artifact.archive import read_artifact, write_artifact
    from edgekit.tempfiles import check_writable
    from edgekit.trust.signing import load_private_key

    check_writable(output or artifact, "signed artifact (-o)")
    private = load_private_key(key)  # a bad key fails before anything is read or written
    loaded = read_artifact(artifact)
    members = {name: loaded.read(name) for name in loaded.members}
    target = output or artifact
    write_artifact(target, loaded.manifest, members, sign_key=private,
                   release_version=release_version)
    signed = read_artifact(target)
    key_id = signed.signature.key_id if signed.signature else "?"
    bound = signed.spec.release.describe() if signed.spec.release else "no release"
    click.echo(f"signed {target} with key {key_id} ({bound})")

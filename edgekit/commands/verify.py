"""``edgekit verify``: run an artifact's bundled test vectors on this machine's runtimes."""

from __future__ import annotations

import click


@click.command(name="verify")
@click.argument("artifact", type=click.Path())
@click.option("--backend", help="Only this runtime (onnxruntime, litert, tflite-runtime).")
@click.option("--trusted-key", "trusted_keys", multiple=True, type=click.Path(),
              help="A public key (or folder of *.pub) trusted to sign artifacts; added to "
                   "$EDGEKIT_TRUSTED_KEYS and the trusted-key folders. Repeatable.")
@click.option("--pin-target", help="Refuse an artifact built for another target "
              "[default: $EDGEKIT_PIN_TARGET].")
@click.option("--min-release", type=click.IntRange(0, (1 << 53) - 1),
              help="Refuse a release numbered below this [default: $EDGEKIT_MIN_RELEASE].")
def command(artifact: str, backend: str | None, trusted_keys: tuple[str, ...],
            pin_target: str | None, min_release: int | None) -> None:
    """Check the signature against the trusted keys (when any is configured), then run the
    bundled test vectors here and report how close each output came (share within 0/1/2
    quantization steps, max, worst-slice SQNR) against the recorded tolerance. Exits 2 when
    the artifact holds no model for --backend; a failed check exits 1."""
    from edgekit.errors import VerificationError
    from edgekit.ops.verify import verify_artifact
    from edgekit.trust.release import Pin

    report = verify_artifact(artifact, backend=backend, trusted_keys=list(trusted_keys),
                             pin=Pin(target=pin_target, min_version=min_release))
    click.echo("\n".join(report.lines()))
    if not report.passed:
        raise VerificationError("test vectors did not reproduce within the tolerance the "
                                "manifest records (see the distribution above)")

"""One exception hierarchy for edgekit.

``EdgekitError`` is the root. Its children say *whose* fault it is:

* ``UserError`` and its subclasses: the input was wrong (bad model file, unknown
  target, wrong array shape). The CLI prints the message and exits with 2.
* ``BudgetError``: the build worked but no candidate fits the target's budgets.
  The CLI exits with 3.
* ``VerificationError`` (a ``UserError``): a check that ran and failed; exits 1.
* ``InternalError``: a bug in edgekit or a dependency misbehaving. The CLI exits 1.

Every message names what was expected and what came, so that a user can act on it.
"""

from __future__ import annotations


class EdgekitError(Exception):
    """Root of every error edgekit raises on purpose."""

    exit_code = 1


class UserError(EdgekitError):
    """The caller gave something edgekit cannot use; fixing the input fixes it."""

    exit_code = 2


class ModelFormatError(UserError):
    """A source model that is not what it claims to be (not ONNX, truncated, invalid)."""


class UnsupportedModelError(UserError):
    """A valid model using something edgekit cannot handle (op, dtype, opset)."""


class TargetError(UserError):
    """Unknown target profile or a profile file that does not validate."""


class CalibrationError(UserError):
    """Missing, empty or mismatching calibration / validation data."""


class ArtifactError(UserError):
    """A .edgekit file that is corrupt, truncated or of another schema (hashes catch these),
    or, for the subclasses below, not signed as the device requires (signatures catch
    tampering: anyone can recompute a hash)."""


class ResourceLimitError(ArtifactError):
    """An artifact whose declared sizes (members, tensors) do not fit the target's RAM:
    refused before anything is inflated or allocated."""


class SignatureError(ArtifactError):
    """A signature that is malformed or does not match its manifest (changed after signing)."""


class UntrustedArtifactError(SignatureError):
    """Trusted keys are configured and the artifact is unsigned or signed by another key."""


class SigningKeyError(UserError):
    """A key file that is missing, unreadable, not an Ed25519 key, or a private key that
    others may read."""


class SigningUnavailableError(UserError):
    """Signing or verifying needs the ``cryptography`` package (``pip install edgekit-sdk[sign]``)."""


class InputError(UserError, ValueError):
    """An input array of the wrong name, shape or dtype given to a model."""


class RuntimeUnavailableError(UserError):
    """No installed runtime can execute any model in the artifact."""


class ExportError(UserError):
    """A PyTorch model that could not be imported, loaded or exported to ONNX."""


class QueueFullError(UserError):
    """The batcher's bounded queue is full; the caller should slow down or retry."""


class VerificationError(UserError):
    """Bundled test vectors did not reproduce within tolerance: a failed check, not a usage
    mistake, so exit 1 (as a failed test run does), not click's usage-error code 2."""

    exit_code = 1


class BudgetError(EdgekitError):
    """No build candidate met every budget of the target."""

    exit_code = 3

    def __init__(self, message: str, table: str = "") -> None:
        super().__init__(message)
        self.table = table


class InternalError(EdgekitError):
    """Something went wrong that is not the user's fault: a bug to report."""

    exit_code = 1


# -- running a loaded model ---------------------------------------------------------------
class ModelClosedError(UserError):
    """``predict``/``submit`` on a model (or a backend) after ``close()``."""


class InferenceError(InternalError):
    """The runtime failed while running one input (the message names the runtime and the
    input; ``__cause__`` is the runtime's own exception)."""


class RunTimeoutError(InferenceError):
    """One run exceeded ``run_timeout_s``; the request failed and the session was replaced."""


class BatcherDeadError(InternalError):
    """The batcher's worker stopped on an unexpected error: pending requests fail with this,
    and ``submit`` raises it (load the model again)."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, carrying what it left behind (``"no artifact written"``) for the CLI to say.
    A ``KeyboardInterrupt``, so every handler that cleans up on one still runs."""

    def __init__(self, left: str) -> None:
        super().__init__(left)
        self.left = left

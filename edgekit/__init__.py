"""edgekit: run int8 models on small devices, sized to their budgets.

On the device only numpy and one runtime are needed::

    import edgekit
    m = edgekit.load("model.edgekit")
    y = m.predict(x)

This module must stay light: it never imports onnx, torch or edgekit.converters.
"""

from __future__ import annotations

from edgekit.errors import (
    ArtifactError,
    EdgekitError,
    InputError,
    InternalError,
    UserError,
)

__version__ = "0.1.0"

__all__ = [
    "ArtifactError",
    "EdgekitError",
    "InputError",
    "InternalError",
    "Model",
    "UserError",
    "__version__",
    "load",
]


def load(path, **options):  # noqa: ANN001, ANN201 - re-exported, documented in model.load
    """Load a ``.edgekit`` artifact and return a ready :class:`edgekit.model.Model`."""
    from edgekit.model import load as _load

    return _load(path, **options)


def __getattr__(name: str):  # noqa: ANN202
    if name == "Model":
        from edgekit.model import Model

        return Model
    raise AttributeError(f"module 'edgekit' has no attribute {name!r}")

"""edgekit: run int8 models on small devices, sized to their budgets.

On the device only numpy and one runtime are needed::

    import edgekit
    m = edgekit.load("model.edgekit")
    y = m.predict(x)

This module must stay light: it never imports onnx, torch or edgekit.converters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from edgekit.errors import (
    ArtifactError,
    EdgekitError,
    InputError,
    InternalError,
    UserError,
)

if TYPE_CHECKING:
    from edgekit.model import Model, load
    from edgekit.runtime.options import RuntimeOptions

__version__ = "0.3.0"  # setup.py reads it: bump with each release (round 3)

__all__ = [
    "ArtifactError",
    "EdgekitError",
    "InputError",
    "InternalError",
    "Model",
    "RuntimeOptions",
    "UserError",
    "__version__",
    "load",
]

def __getattr__(name: str):  # noqa: ANN202
    # imported on first use, so that ``import edgekit`` (the CLI's start) loads no runtime;
    # ``edgekit.load`` is ``edgekit.model.load`` itself (import statements, not importlib:
    # ``python -X importtime`` lists only what an import statement loads)
    if name in ("load", "Model"):
        from edgekit import model as module
    elif name == "RuntimeOptions":
        from edgekit.runtime import options as module
    else:
        raise AttributeError(f"module 'edgekit' has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value  # once: later lookups skip this hook
    return value

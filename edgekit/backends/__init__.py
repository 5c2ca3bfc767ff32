"""Runtime backends, by model format, in the order they are tried.

Imported lazily (by dotted path) so that ``import edgekit`` loads no runtime.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from edgekit.backends.base import Backend, BackendOptions, TensorSpec
from edgekit.errors import RuntimeUnavailableError

if TYPE_CHECKING:
    from edgekit.artifact.archive import Artifact
    from edgekit.artifact.manifest import ModelEntry

# format -> backends able to run it, preferred first
REGISTRY: dict[str, list[str]] = {
    "onnx": ["edgekit.backends.onnxruntime:OnnxRuntimeBackend"],
    "tflite": [
        "edgekit.backends.litert:LiteRTBackend",
        "edgekit.backends.litert:TFLiteRuntimeBackend",
    ],
}


def backend_class(dotted: str) -> type[Backend]:
    module, _, name = dotted.partition(":")
    return getattr(importlib.import_module(module), name)


def backends_for(fmt: str) -> list[type[Backend]]:
    """Backend classes registered for a model format (whether installed or not)."""
    classes = []
    for dotted in REGISTRY.get(fmt, []):
        try:
            classes.append(backend_class(dotted))
        except ImportError:  # module not written yet / optional
            continue
    return classes


def by_name(name: str) -> type[Backend]:
    """A backend class by its runtime name (``onnxruntime``, ``litert``, ``tflite-runtime``)."""
    every = {cls.name: cls for fmt in REGISTRY for cls in backends_for(fmt)}
    if name not in every:
        from edgekit.errors import UserError

        raise UserError(f"unknown backend {name!r}; allowed: {', '.join(sorted(every))}")
    return every[name]


def choose_model(artifact: Artifact, backend: str | None = None
                 ) -> tuple[ModelEntry, type[Backend]]:
    """Pick the model entry and backend class: the one whose runtime is installed, in the
    order of the target profile's preferred formats."""
    spec = artifact.spec
    entries = {m.format: m for m in spec.models}
    if backend is not None:
        cls = by_name(backend)
        if cls.format not in entries:
            raise RuntimeUnavailableError(
                f"backend {backend!r} runs {cls.format} models; the artifact holds "
                f"{', '.join(entries)}"
            )
        if not cls.available():
            raise RuntimeUnavailableError(
                f"backend {backend!r} is not installed (pip install {cls.package})"
            )
        return entries[cls.format], cls
    preferred = spec.target.profile.runtime.formats
    order = [f for f in preferred if f in entries] + [f for f in entries if f not in preferred]
    tried = []
    for fmt in order:
        for cls in backends_for(fmt):
            if cls.available():
                return entries[fmt], cls
            tried.append(f"{cls.name} (pip install {cls.package})")
    raise RuntimeUnavailableError(
        f"no installed runtime can run this artifact (it holds {', '.join(order)}); "
        f"install one of: {', '.join(tried) or 'nothing registered'}"
    )


__all__ = ["REGISTRY", "Backend", "BackendOptions", "TensorSpec", "backends_for", "by_name",
           "choose_model"]

"""Runtime backends, by model format, in the order they are tried.

Imported lazily (by dotted path) so that ``import edgekit`` loads no runtime.
"""

from __future__ import annotations

import importlib

from edgekit.backends.base import Backend, BackendOptions, TensorSpec

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


__all__ = ["REGISTRY", "Backend", "BackendOptions", "TensorSpec", "backends_for", "by_name"]

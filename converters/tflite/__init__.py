"""ONNX QDQ int8 -> integer TFLite, written with the official schema bindings (no TensorFlow).

``convert(model)`` returns a :class:`TFLiteModel` (bytes, input/output quantization and
layouts, float fallback ops). The op converters live in ``ops/``, one module per op kind.
"""

from edgekit.converters.tflite.convert import TFLiteModel, convert

__all__ = ["TFLiteModel", "convert"]

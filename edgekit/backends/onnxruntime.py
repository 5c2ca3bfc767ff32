"""onnxruntime backend: the QDQ int8 ONNX model on ORT's CPU execution provider."""

from __future__ import annotations

from typing import Any

import numpy as np

from edgekit.backends.base import Backend, BackendOptions, TensorSpec
from edgekit.errors import ArtifactError


class OnnxRuntimeBackend(Backend):
    name = "onnxruntime"
    format = "onnx"
    package = "onnxruntime"

    def __init__(
        self,
        model: bytes,
        inputs: list[TensorSpec],
        outputs: list[TensorSpec],
        options: BackendOptions,
        entry: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(model, inputs, outputs, options, entry)
        import onnxruntime as ort

        so = ort.SessionOptions()
        # QDQ graphs only become integer kernels after EXTENDED fusions; ALL adds layout ones.
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = max(0, int(options.threads))
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.log_severity_level = 3
        if not options.allow_spinning:
            so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        for key, value in options.extra.get("session_config", {}).items():
            so.add_session_config_entry(key, str(value))
        try:
            self.session = ort.InferenceSession(
                model, sess_options=so, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise ArtifactError(f"onnxruntime could not load the model: {exc}") from exc
        self._output_names = [o.name for o in outputs]

    @classmethod
    def available(cls) -> bool:
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            return False
        return True

    @classmethod
    def version(cls) -> str:
        import onnxruntime

        return onnxruntime.__version__

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self.session.run(self._output_names, feeds)

"""onnxruntime backend: the QDQ int8 ONNX model on ORT's CPU execution provider."""

from __future__ import annotations

from typing import Any

import numpy as np

from edgekit.backends.base import Backend, BackendOptions, TensorSpec
from edgekit.device.cpu import (
    ORT_DISABLED_OPTIMIZERS,
    UNFUSED_FOLD_WEIGHTS,
    exact_int8_needs_unfused,
)
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
        # On x86 without VNNI those kernels saturate 8-bit weights (edgekit/device/cpu.py): there the
        # model runs unfused, exact and slower, unless it was built for this CPU (7-bit weights)
        # or the caller asks for speed (extra exact_int8=False).
        exact = options.extra.get("exact_int8")
        self.unfused = bool(exact_int8_needs_unfused(bool(self.entry.get("reduce_range")))
                            if exact is None else exact and exact_int8_needs_unfused(False))
        so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_BASIC if self.unfused
                                       else ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
        if self.unfused:
            so.add_session_config_entry(*UNFUSED_FOLD_WEIGHTS)
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
                model, sess_options=so, providers=["CPUExecutionProvider"],
                disabled_optimizers=ORT_DISABLED_OPTIMIZERS,
            )
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise ArtifactError(f"onnxruntime could not load the model: "
                                f"{type(exc).__name__}: {str(exc)[:300]}") from exc
        self._output_names = [o.name for o in outputs]
        # InferenceSession.run is a Python wrapper that re-checks the feed names, OrtValue
        # ownership and graph capture on every call (a few % of a small model) and
        # falls back between execution providers (we only use the CPU one). The C++ run
        # checks names, shapes and types itself; bind it once, with the output names, so
        # that ``backend.run(feeds)`` is one small frame around the C call.
        # one RunOptions for every run: terminate() flags it from another thread
        self._run_options = ort.RunOptions()
        native = getattr(getattr(self.session, "_sess", None), "run", None)
        if callable(native):
            self.run = _bind(native, self.session, self._output_names,  # type: ignore[method-assign]
                             self._run_options)
            self.native_call = (native, self._output_names, self._run_options)

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
        # only used when the native session is not reachable (see __init__)
        return self.session.run(self._output_names, feeds, self._run_options)

    def terminate(self) -> bool:
        # onnxruntime checks the flag between nodes (and inside Loop/Scan bodies)
        self._run_options.terminate = True
        return True

    def resume(self) -> None:
        self._run_options.terminate = False

    def close(self) -> None:
        self.session = None
        super().close()


def _bind(native: Any, session: Any, output_names: list[str], run_options: Any) -> Any:
    """``run(feeds)`` calling the C++ session directly (with one shared ``RunOptions``).

    ``_sess.run(output_names, feeds, run_options)`` is onnxruntime's internal call; should a
    release change it (TypeError), or a feed be of a type only the wrapper converts, the
    public ``session.run`` answers instead, with its clearer messages. Exceptions cost
    nothing on the path that does not raise (CPython 3.11)."""

    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        try:
            return native(output_names, feeds, run_options)
        except TypeError:
            return session.run(output_names, feeds, run_options)

    return run

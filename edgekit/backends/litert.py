"""LiteRT backends: the integer .tflite model on LiteRT's interpreter (XNNPACK delegate).

``LiteRTBackend`` uses the ai-edge-litert wheel; ``TFLiteRuntimeBackend`` the older
tflite-runtime wheel (built against numpy < 2) as a fallback. Both take the manifest's float
arrays in the manifest's layout: they quantize them straight into the interpreter's int8
input buffers in the model's layout (NHWC for images; see ``tflite_io``), and dequantize
and transpose the outputs back. A model written with float I/O (``convert(int8_io=False)``)
quantizes and transposes inside the graph, on XNNPACK's threads: its inputs are copied.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Mapping
from importlib import metadata
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from edgekit.backends.base import MEMORY_ALLOWANCE, Backend, BackendOptions, TensorSpec
from edgekit.backends.native_log import quiet_native_info
from edgekit.backends.tflite_io import InputPlan, dequantize, dequantize_table
from edgekit.errors import ArtifactError, InputError, ResourceLimitError

if TYPE_CHECKING:
    from edgekit.numerics.drift import InputCounter

NHWC = (0, 2, 3, 1)


class _TFLiteBackend(Backend):
    format = "tflite"
    module: ClassVar[str]  # module holding ``Interpreter``

    def __init__(
        self,
        model: bytes,
        inputs: list[TensorSpec],
        outputs: list[TensorSpec],
        options: BackendOptions,
        entry: dict[str, Any] | None = None,
    ) -> None:
        """``entry`` is the artifact's models[] entry: its inputs/outputs give each tensor's
        layout permutation (and name); scales come from the model itself."""
        super().__init__(model, inputs, outputs, options, entry)
        interpreter_cls = importlib.import_module(self.module).Interpreter
        kwargs: dict[str, Any] = {"model_content": bytes(model)}
        if options.threads > 0:
            kwargs["num_threads"] = int(options.threads)
        try:
            # the default op resolver applies the XNNPACK delegate to the ops it supports
            with quiet_native_info():  # the runtime's XNNPACK INFO line, on every load
                self.interpreter = interpreter_cls(**kwargs)
                # the tensor table is read before the arena is: a 0.1 MB model declaring
                # an 8 GiB activation is refused here, not allocated
                check_declared(self.interpreter.get_tensor_details(),
                               options.extra.get(MEMORY_ALLOWANCE))
                self.interpreter.allocate_tensors()
            entry = entry or {}
            # a corrupt model can still fail here (a tensor name that is not UTF-8)
            in_details = self.interpreter.get_input_details()
            out_details = self.interpreter.get_output_details()
        except ResourceLimitError:
            raise
        except Exception as exc:  # the runtime raises ValueError/RuntimeError of its own
            raise ArtifactError(f"{self.name} could not load the .tflite model: "
                                f"{type(exc).__name__}: {str(exc)[:300]}") from exc
        self._lock = threading.Lock()  # one interpreter runs one invoke at a time
        self._in = self._match(inputs, in_details, entry.get("inputs"), "input")
        self._out = self._match(outputs, out_details, entry.get("outputs"), "output")
        # inputs whose model layout is NHWC of the manifest's NCHW: they take NHWC arrays too
        self.nhwc_inputs = frozenset(spec.name for spec, plan in zip(inputs, self._in,
                                                                      strict=True)
                                     if plan.perm == NHWC)
        self._fast: tuple[str, tuple[int, ...], InputPlan, InputPlan, np.ndarray | None,
                          Any, Any] | None = None
        if len(self._in) == 1 and len(self._out) == 1 and (
                self._out[0].perm == tuple(range(len(self._out[0].perm)))):
            plan = self._in[0]
            source = tuple(plan.shape[i] for i in plan.inverse)  # in the manifest's layout
            out = self._out[0]
            # the runtime's own view makers ("safe to hold forever"; their arrays are not):
            # one Python call fewer per tensor per run
            self._fast = (inputs[0].name, source, plan, out,
                          dequantize_table(out.dtype, out.scale, out.zero_point),
                          self.interpreter.tensor(plan.index), self.interpreter.tensor(out.index))

    # -- mapping manifest tensors onto the model's ---------------------------------------
    @staticmethod
    def _match(specs: list[TensorSpec], details: list[dict], described: list[dict] | None,
               kind: str) -> list[InputPlan]:
        if len(specs) != len(details):
            raise ArtifactError(
                f"the manifest lists {len(specs)} {kind}(s), the .tflite model has "
                f"{len(details)}")
        by_name = {d["name"]: d for d in (described or [])}
        plans: list[InputPlan] = []
        for i, (spec, detail) in enumerate(zip(specs, details, strict=True)):
            info = by_name.get(spec.name) or ((described or [None] * len(specs))[i] or {})
            shape = tuple(int(d) for d in detail["shape"])
            # a null perm counts as absent, as the manifest's parser reads it
            perm = (tuple(info["perm"]) if info.get("perm") is not None
                    else _guess_perm(spec.shape, shape))
            if len(perm) != len(shape):
                raise ArtifactError(
                    f"{kind} {spec.name!r}: the manifest's layout perm {list(perm)} does not "
                    f"fit the .tflite tensor {list(shape)}; expected one axis per dim")
            q = detail.get("quantization_parameters") or {}
            scales, zps = q.get("scales", np.zeros(0)), q.get("zero_points", np.zeros(0))
            quantized = np.dtype(detail["dtype"]) != np.float32 and len(scales) == 1
            plans.append(InputPlan(
                index=int(detail["index"]), dtype=np.dtype(detail["dtype"]), shape=shape,
                perm=perm, scale=float(scales[0]) if quantized else None,
                zero_point=int(zps[0]) if quantized else 0, name=spec.name))
        return plans

    def refuse_nonfinite(self, refuse: bool) -> bool:
        """A quantized input's write finds NaN/inf with the min and max that decide its
        clipping (``tflite_io._min``); a float input is copied as it is."""
        for plan in self._in:
            plan.refuse_nonfinite = refuse and plan.scale is not None
        return refuse and all(plan.scale is not None for plan in self._in)

    def watch_inputs(self, counters: Mapping[str, InputCounter]) -> frozenset[str]:
        """A quantized input's write counts what it clips for the drift watch (it knows
        from its min and max whether anything does)."""
        watched = set()
        for plan, spec in zip(self._in, self.inputs, strict=True):
            plan.watch = counters.get(spec.name) if plan.scale is not None else None
            if plan.watch is not None:
                watched.add(spec.name)
        return frozenset(watched)

    # -- running -------------------------------------------------------------------------
    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        fast = self._fast
        if fast is not None:
            # one input already in the shape the model takes (after its layout permutation),
            # one output: every check below is answered; on a 50 us model they would add 30%
            name, shape, plan, out, table, input_view, output_view = fast
            x = feeds[name]
            if x.shape == shape or x.shape == plan.shape and name in self.nhwc_inputs:
                with self._lock:
                    plan.write(x, input_view(), x.shape != shape)
                    self.interpreter.invoke()
                    raw = output_view()
                    if table is not None:
                        return [table.take(raw.view(np.uint8))]
                    return [dequantize(raw, out.scale, out.zero_point)]
        arrays = [np.asarray(feeds[spec.name]) for spec in self.inputs]
        first = self.inputs[0] if self.inputs else None
        axis = first.batch_axis if first is not None else 0
        model_batch = ((self._in[0].shape[0] if axis == 0 else first.fixed_batch)
                       if first is not None and self._in and self._in[0].shape else 1)
        batch = arrays[0].shape[axis] if arrays and arrays[0].ndim > axis else 1
        if self._in and batch != model_batch and model_batch == 1:
            # the .tflite is written for batch 1: run the rows one by one, each input on its
            # batch axis and each output joined on its own (a recurrent state [L, N, H])
            rows = [self._invoke([np.take(a, [i], axis=spec.batch_axis)
                                  for a, spec in zip(arrays, self.inputs, strict=True)])
                    for i in range(batch)]
            return [np.concatenate([r[j] for r in rows], axis=spec.batch_axis)
                    for j, spec in enumerate(self.outputs)]
        return self._invoke(arrays)

    def _invoke(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        interpreter = self.interpreter
        with self._lock:
            for plan, array, spec in zip(self._in, arrays, self.inputs, strict=True):
                # NHWC handed to an NHWC model (Session.prepare_feeds let it through)
                laid_out = spec.name in self.nhwc_inputs and array.shape == plan.shape \
                    and not _fits(array.shape, spec.shape)
                shape = array.shape if laid_out else plan.laid_out(array).shape
                if tuple(shape) != plan.shape:
                    raise InputError(
                        f"input {spec.name!r}: the .tflite model expects {list(plan.shape)} "
                        f"(layout perm {list(plan.perm)} of the manifest layout), got "
                        f"{list(shape)} after transposing")
                # a view of the interpreter's own buffer, dropped before invoke (LiteRT
                # refuses to run while one is alive)
                plan.write(array, interpreter.tensor(plan.index)(), laid_out)
            interpreter.invoke()
            return self._results()

    def _results(self) -> list[np.ndarray]:
        results = []
        for plan in self._out:
            value = dequantize(self.interpreter.tensor(plan.index)(), plan.scale,
                               plan.zero_point)
            if value.ndim == len(plan.perm) and plan.perm != tuple(range(value.ndim)):
                value = np.ascontiguousarray(np.transpose(value, plan.inverse))
            results.append(value)
        return results

    def pixel_input(self, spec: dict[str, Any]) -> bool:
        """True when ``run_pixels`` can take uint8 frames for this model's single input."""
        return len(self._in) == 1 and self._in[0].pixel_table(spec) is not None

    def pixel_clips(self) -> np.ndarray | None:
        """[C, 256]: the pixel values ``run_pixels``' table clips (the drift watch's)."""
        return self._in[0].pixel_clips if self._in else None

    def run_pixels(self, frame: np.ndarray, spec: dict[str, Any]) -> list[np.ndarray]:
        """A uint8 camera frame (NHWC, batch 1) straight to the int8 input: one table
        lookup, the same codes ``preprocess.normalize`` + quantization give."""
        plan = self._in[0]
        table = plan.pixel_table(spec)
        if table is None or frame.size != int(np.prod(plan.shape)):
            raise InputError(
                f"input {self.inputs[0].name!r}: expected a uint8 frame of "
                f"{list(plan.shape)} (NHWC) pixels, got {frame.dtype}{list(frame.shape)}")
        with self._lock:
            plan.write_pixels(frame, table, self.interpreter.tensor(plan.index)())
            self.interpreter.invoke()
            return self._results()

    @classmethod
    def available(cls) -> bool:
        try:
            importlib.import_module(cls.module)
        except Exception:  # tflite-runtime fails on numpy 2 with AttributeError/ImportError
            return False
        return True

    @classmethod
    def version(cls) -> str:
        try:
            return metadata.version(cls.package)
        except metadata.PackageNotFoundError:
            return "unknown"

    def close(self) -> None:
        self.interpreter = None
        super().close()


def check_declared(details: list[dict[str, Any]], allowance: int | None) -> None:
    """Every tensor of the model (shape x element size) within ``allowance`` bytes."""
    if allowance is None:
        return
    for detail in details:
        count = 1
        for dim in detail.get("shape", ()):
            count *= max(1, int(dim))
        size = count * np.dtype(detail.get("dtype", np.float32)).itemsize
        if size > allowance:
            raise ResourceLimitError(
                f".tflite tensor {str(detail.get('name'))[:80]!r} declares "
                f"{[int(d) for d in detail.get('shape', ())]} = {size} bytes; expected at "
                f"most {allowance} bytes, half the target's RAM (nothing was allocated)")


def _fits(shape: tuple[int, ...], spec_shape: tuple[Any, ...]) -> bool:
    """``shape`` matches the manifest's (symbolic dims and a larger batch match anything)."""
    return len(shape) == len(spec_shape) and all(
        not isinstance(want, int) or want <= 0 or want == got or axis == 0
        for axis, (want, got) in enumerate(zip(spec_shape, shape, strict=True)))


def _guess_perm(manifest_shape: tuple, model_shape: tuple[int, ...]) -> tuple[int, ...]:
    """Without a manifest entry: NHWC when the model's 4-D shape is the NHWC permutation of
    the manifest's NCHW one, else the identity."""
    rank = len(model_shape)
    if rank == 4 and len(manifest_shape) == 4:
        dims = [d if isinstance(d, int) and d > 0 else None for d in manifest_shape]
        nhwc = [dims[i] for i in NHWC]
        if all(a is None or a == b for a, b in zip(nhwc[1:], model_shape[1:], strict=True)) \
                and list(model_shape[1:]) != [d for d in dims[1:]]:
            return NHWC
    return tuple(range(rank))


class LiteRTBackend(_TFLiteBackend):
    name = "litert"
    package = "ai-edge-litert"
    module = "ai_edge_litert.interpreter"


class TFLiteRuntimeBackend(_TFLiteBackend):
    """Fallback for boards where only tflite-runtime installs (it needs numpy < 2)."""

    name = "tflite-runtime"
    package = "tflite-runtime"
    module = "tflite_runtime.interpreter"

"""What every runtime backend provides, and the tensor spec they share with the manifest."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from edgekit.errors import ModelClosedError

if TYPE_CHECKING:
    from edgekit.numerics.drift import InputCounter


@dataclass(frozen=True)
class TensorSpec:
    """One model input or output as the manifest states it (the user's view)."""

    name: str
    shape: tuple[int | str, ...]
    dtype: str = "float32"
    layout: str = ""
    quantization: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_manifest(cls, entry: dict[str, Any]) -> TensorSpec:
        known = {"name", "shape", "dtype", "layout", "quantization"}
        return cls(
            name=entry["name"],
            shape=tuple(entry["shape"]),
            dtype=entry.get("dtype") or "float32",  # null: absent, as parsed
            layout=entry.get("layout") or "",
            quantization=dict(entry.get("quantization") or {}),
            extra={k: v for k, v in entry.items() if k not in known},
        )

    @property
    def batch_axis(self) -> int:
        """The axis holding samples: 0, or the build's ``--batch-axis`` (a recurrent state
        ``[layers, N, hidden]`` keeps them on 1)."""
        return int(self.extra.get("batch_axis") or 0)

    @property
    def fixed_batch(self) -> int | None:
        """The batch dimension when it is a fixed number, else None (symbolic batch)."""
        axis = self.batch_axis
        if len(self.shape) > axis and isinstance(self.shape[axis], int) and self.shape[axis] > 0:
            return self.shape[axis]
        return None

    def describe(self) -> str:
        dims = "x".join(str(d) for d in self.shape)
        layout = f" {self.layout}" if self.layout else ""
        return f"{self.name}: {self.dtype}[{dims}]{layout}"


# BackendOptions.extra key: bytes one declared tensor may take (the session sets it from the
# target's RAM, edgekit/artifact/memory_budget.py); a backend that can read its tensor table before
# allocating checks it there
MEMORY_ALLOWANCE = "memory_allowance"


@dataclass
class BackendOptions:
    """Knobs fixed when a session is created (runtimes cannot change them afterwards)."""

    threads: int = 0  # 0 = the runtime's own default
    allow_spinning: bool = True  # onnxruntime: spin-wait between ops; off saves power when idle
    extra: dict[str, Any] = field(default_factory=dict)


class Backend(ABC):
    """A loaded model in one runtime. ``run`` takes and returns the manifest's float view."""

    name: ClassVar[str]  # e.g. "onnxruntime"
    format: ClassVar[str]  # model format it executes: "onnx" or "tflite"
    package: ClassVar[str]  # pip distribution that provides the runtime
    # inputs this model takes in NHWC as well as in the manifest's NCHW (a .tflite laid out
    # NHWC): Session.prepare_feeds hands those NHWC arrays through untransposed
    nhwc_inputs: frozenset[str] = frozenset()
    # ``(fn, output_names, run_options)`` when the runtime's own C call can be made as
    # ``fn(output_names, feeds, run_options)`` with nothing in between: ``Model.predict``
    # calls it directly (one Python frame fewer on a ~100 us model). None: call ``run``.
    native_call: tuple[Callable[..., list[np.ndarray]], list[str], Any] | None = None

    def __init__(
        self,
        model: bytes,
        inputs: list[TensorSpec],
        outputs: list[TensorSpec],
        options: BackendOptions,
        entry: dict[str, Any] | None = None,
    ) -> None:
        """``entry`` is the artifact's models[] entry for this model (formats that re-lay or
        re-quantize tensors, such as tflite, read their I/O details from it)."""
        self.inputs = inputs
        self.outputs = outputs
        self.options = options
        self.entry = entry or {}

    @classmethod
    @abstractmethod
    def available(cls) -> bool:
        """True when the runtime can be imported here."""

    @classmethod
    @abstractmethod
    def version(cls) -> str:
        """Version string of the runtime package."""

    @abstractmethod
    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Run one batch. ``feeds`` are validated arrays in the manifest's dtype and layout;
        the result lists outputs in manifest order, as float arrays."""

    def refuse_nonfinite(self, refuse: bool) -> bool:
        """Have the backend's own input path refuse NaN/inf (``InputError``) where it finds
        them anyway; True when it does so for every input, so the caller's check can go."""
        return False

    def watch_inputs(self, counters: Mapping[str, InputCounter]) -> frozenset[str]:
        """Have the backend's own input path count what int8 clips (the drift watch) where
        it finds out anyway; the names of the inputs it counts (the rest are sampled)."""
        return frozenset()

    def close(self) -> None:
        """Release native resources; from now on ``run`` raises ``ModelClosedError`` (the
        same on every runtime). Subclasses free their session, then call this."""
        self.native_call = None
        self.run = _closed_run(self.name)  # type: ignore[method-assign]

    def resume(self) -> None:
        """Accept runs again after ``terminate`` stopped one (onnxruntime's flag stays set
        until cleared); nothing to do where runs cannot be stopped."""
        return None

    def terminate(self) -> bool:
        """Ask a run in progress on another thread to stop (a run timeout); True when the
        runtime can (onnxruntime), False when the run is left to finish (LiteRT)."""
        return False


def _closed_run(runtime: str) -> Callable[[dict[str, np.ndarray]], list[np.ndarray]]:
    def run(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        raise ModelClosedError(f"the {runtime} session is closed (expected an open model; "
                               "load it again)")

    return run

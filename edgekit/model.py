"""``edgekit.load`` and the ``Model`` it returns: numpy in, numpy out."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from edgekit.artifact import Artifact, read_artifact
from edgekit.backends import Backend, BackendOptions, TensorSpec, backends_for, by_name
from edgekit.errors import InputError, RuntimeUnavailableError

_FLOAT_KINDS = ("f",)


def choose_model(artifact: Artifact, backend: str | None = None) -> tuple[dict, type[Backend]]:
    """Pick the model entry and backend class: the one whose runtime is installed, in the
    order of the target profile's preferred formats."""
    manifest = artifact.manifest
    entries = {m["format"]: m for m in manifest["models"]}
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
    preferred = manifest["target"]["profile"]["runtime"]["formats"]
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


class Model:
    """A loaded artifact, ready to predict. Use :func:`edgekit.load` to make one."""

    def __init__(self, artifact: Artifact, backend: str | None = None, threads: int = 0,
                 allow_spinning: bool = True) -> None:
        self.artifact = artifact
        self.manifest: dict[str, Any] = artifact.manifest
        self.entry, self.backend_class = choose_model(artifact, backend)
        self.inputs = [TensorSpec.from_manifest(e) for e in self.manifest["inputs"]]
        self.outputs = [TensorSpec.from_manifest(e) for e in self.manifest["outputs"]]
        self._model_bytes = artifact.read(self.entry["path"])
        self._backend = self.make_backend(BackendOptions(threads=threads,
                                                         allow_spinning=allow_spinning))

    # -- sessions ---------------------------------------------------------------------
    def make_backend(self, options: BackendOptions) -> Backend:
        """A new session of this model (threads are fixed per session by every runtime)."""
        return self.backend_class(self._model_bytes, self.inputs, self.outputs, options)

    def swap_backend(self, backend: Backend) -> None:
        """Replace the live session; callers already inside ``predict`` finish on the old one."""
        old, self._backend = self._backend, backend
        old.close()

    @property
    def backend(self) -> Backend:
        return self._backend

    @property
    def runtime(self) -> str:
        return self.backend_class.name

    @property
    def format(self) -> str:
        return self.entry["format"]

    @property
    def threads(self) -> int:
        return self._backend.options.threads

    # -- inference --------------------------------------------------------------------
    def prepare_feeds(self, x: np.ndarray | dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Check names, shapes and dtypes against the manifest; return float32 feeds."""
        if not isinstance(x, dict):
            if len(self.inputs) != 1:
                names = ", ".join(s.name for s in self.inputs)
                raise InputError(f"this model has {len(self.inputs)} inputs ({names}): pass a dict")
            x = {self.inputs[0].name: x}
        missing = [s.name for s in self.inputs if s.name not in x]
        extra = [k for k in x if k not in {s.name for s in self.inputs}]
        if missing or extra:
            raise InputError(
                f"inputs expected {[s.name for s in self.inputs]}, got {list(x)}"
                + (f"; missing {missing}" if missing else "")
                + (f"; unknown {extra}" if extra else "")
            )
        return {spec.name: _check_array(spec, x[spec.name]) for spec in self.inputs}

    def run_feeds(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Run validated feeds; a fixed batch-1 model runs a larger batch row by row."""
        backend = self._backend
        batch = next(iter(feeds.values())).shape[0] if feeds else 1
        fixed = self.inputs[0].fixed_batch if self.inputs else None
        if fixed is None or batch == fixed:
            return backend.run(feeds)
        rows = [backend.run({k: v[i:i + 1] for k, v in feeds.items()}) for i in range(batch)]
        return [np.concatenate([r[j] for r in rows]) for j in range(len(self.outputs))]

    def predict(self, x: np.ndarray | dict[str, np.ndarray]) -> np.ndarray | dict[str, np.ndarray]:
        """Run the model. One output: an array; several: a dict by output name."""
        results = self.run_feeds(self.prepare_feeds(x))
        if len(results) == 1:
            return results[0]
        return {spec.name: value for spec, value in zip(self.outputs, results, strict=True)}

    def close(self) -> None:
        self._backend.close()

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        ins = ", ".join(s.describe() for s in self.inputs)
        outs = ", ".join(s.describe() for s in self.outputs)
        return (f"<edgekit.Model {os.path.basename(self.artifact.path)} "
                f"target={self.manifest['target']['name']} runtime={self.runtime} "
                f"in=({ins}) out=({outs})>")


def _check_array(spec: TensorSpec, value: Any) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype.kind not in _FLOAT_KINDS:
        raise InputError(
            f"input {spec.name!r}: expected dtype {spec.dtype} (any float accepted), "
            f"got {array.dtype}"
        )
    if array.ndim != len(spec.shape):
        raise InputError(
            f"input {spec.name!r}: expected shape {_dims(spec.shape)} "
            f"({len(spec.shape)} dims, layout {spec.layout or 'as exported'}), got "
            f"{_dims(array.shape)} ({array.ndim} dims)"
        )
    for axis, (want, got) in enumerate(zip(spec.shape, array.shape, strict=True)):
        if axis == 0 and isinstance(want, int) and want == 1:
            continue  # fixed batch 1 models accept larger batches, run row by row
        if isinstance(want, int) and want > 0 and want != got:
            raise InputError(
                f"input {spec.name!r}: expected shape {_dims(spec.shape)}"
                f"{' ' + spec.layout if spec.layout else ''}, got {_dims(array.shape)} "
                f"(axis {axis}: expected {want}, got {got})"
            )
    if array.dtype != np.float32:
        array = array.astype(np.float32)
    return np.ascontiguousarray(array)


def _dims(shape: tuple) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def load(path: str | os.PathLike[str], backend: str | None = None, threads: int | str = 0,
         **options: Any) -> Model:
    """Load and verify a ``.edgekit`` artifact.

    ``backend`` forces a runtime (``onnxruntime``, ``litert``, ``tflite-runtime``); by
    default the first installed one in the target profile's order. ``threads`` is a fixed
    count (0 = runtime default).
    """
    artifact = read_artifact(path)
    if isinstance(threads, str):
        threads = 0  # "auto" is handled by the thread tuner once it exists
    return Model(artifact, backend=backend, threads=int(threads), **options)

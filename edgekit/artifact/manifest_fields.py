"""Field-by-field parsing of ``manifest.json`` into the records of ``manifest_records``.

Each parser checks one section and raises ``ArtifactError`` naming the artifact, the field,
what was expected and what came (``Where`` words the message); ``Manifest.from_dict`` in
``edgekit/artifact/manifest.py`` calls them in order.
"""

from __future__ import annotations

import math
import re
from typing import Any

from edgekit.artifact.manifest_records import (
    PRECISIONS,
    CalibratedRange,
    LayerEntry,
    ModelEntry,
    OutputTolerance,
    PruningEntry,
    TensorEntry,
    TestVectorsEntry,
)
from edgekit.errors import ArtifactError

SHA256_HEX = re.compile(r"[0-9a-f]{64}")
DTYPES = frozenset({"float32", "float16", "float64", "int8", "uint8", "int16", "uint16",
                    "int32", "int64", "bool"})
MAX_RANK = 8
MAX_TENSORS = 256


class Where:
    """Error messages that name the artifact, the field, what was expected and what came."""

    def __init__(self, origin: str) -> None:
        self.origin = origin

    def expect(self, value: Any, kind: type | tuple[type, ...], name: str,
               expected: str) -> None:
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ArtifactError(f"{self.origin}: {name} must be {expected}, got "
                                f"{type(value).__name__} {short(value)}")

    def field(self, table: dict[str, Any], key: str, kind: type | tuple[type, ...], expected: str,
              prefix: str = "", default: Any = ...) -> Any:
        if key not in table or (table[key] is None and default is not ...):
            if default is not ...:  # an optional field given as null counts as absent
                return default
            raise ArtifactError(f"{self.origin}: missing field '{prefix}{key}' (expected "
                                f"{expected})")
        self.expect(table[key], kind, prefix + key, expected)
        return table[key]


def parse_pruning(where: Where, entry: Any) -> PruningEntry | None:
    if entry is None:
        return None
    where.expect(entry, dict, "pruning", "an object")
    method = where.field(entry, "method", str, "a string", "pruning.")
    ratio = where.field(entry, "ratio", (int, float), "a number", "pruning.")
    widths = where.field(entry, "widths", str, "a string", "pruning.",
                         default="uniform" if method.startswith("structured") else "sparsity")
    channels: dict[str, tuple[int, int]] = {}
    for name, pair in where.field(entry, "channels", dict, "an object", "pruning.",
                                  default={}).items():
        if not (isinstance(pair, list) and len(pair) == 2
                and all(type(v) is int and v >= 0 for v in pair)):
            raise ArtifactError(f"{where.origin}: pruning.channels[{name!r}] must be [before, "
                                f"after] channel counts, got {short(pair)}")
        channels[name] = (pair[0], pair[1])
    return PruningEntry(method, float(ratio), widths, channels)


def _finite(value: int | float) -> bool:
    """A number that is a finite float (a 400-digit int is not: float() overflows)."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_tensors(where: Where, data: dict[str, Any], key: str) -> tuple[TensorEntry, ...]:
    entries = where.field(data, key, list, "a list of tensor entries")
    if len(entries) > MAX_TENSORS:
        raise ArtifactError(f"{where.origin}: {key} must hold at most {MAX_TENSORS} entries, "
                            f"got {len(entries)}")
    tensors = tuple(_tensor(where, e, f"{key}[{i}]") for i, e in enumerate(entries))
    names = [t.name for t in tensors]
    if len(set(names)) != len(names):
        raise ArtifactError(f"{where.origin}: {key} names must be unique, got {names[:8]}")
    return tensors


def _tensor(where: Where, entry: Any, name: str) -> TensorEntry:
    where.expect(entry, dict, name, "an object")
    tensor_name = where.field(entry, "name", str, "a string", f"{name}.")
    shape = where.field(entry, "shape", list, "a list of dims", f"{name}.")
    if len(shape) > MAX_RANK:
        raise ArtifactError(f"{where.origin}: {name}.shape must have at most {MAX_RANK} dims, "
                            f"got {len(shape)}")
    for dim in shape:
        if isinstance(dim, bool) or not isinstance(dim, int | str) or (
                isinstance(dim, int) and not 0 <= dim < 1 << 31):
            raise ArtifactError(f"{where.origin}: {name}.shape must hold ints >= 0 or names, "
                                f"got {short(dim)}")
    dtype = where.field(entry, "dtype", str, "a string", f"{name}.", default="float32")
    if dtype not in DTYPES:
        raise ArtifactError(f"{where.origin}: {name}.dtype must be one of "
                            f"{', '.join(sorted(DTYPES))}, got {short(dtype)}")
    labels = where.field(entry, "labels", list, "a list of strings", f"{name}.", default=None)
    if labels is not None and not all(isinstance(label, str) for label in labels):
        raise ArtifactError(f"{where.origin}: {name}.labels must be a list of strings, got "
                            f"{short(labels)}")
    _quantization(where, entry, name)
    axis = where.field(entry, "batch_axis", int, "an int", f"{name}.", default=0)
    if not 0 <= axis < max(1, len(shape)):
        raise ArtifactError(f"{where.origin}: {name}.batch_axis must be an axis of its "
                            f"{len(shape)}-dim shape, got {axis}")
    where.field(entry, "kind", str, "a string", f"{name}.", default="")
    return TensorEntry(
        name=tensor_name,
        shape=tuple(shape),
        dtype=dtype,
        layout=where.field(entry, "layout", str, "a string", f"{name}.", default=""),
        preprocess=where.field(entry, "preprocess", dict, "an object", f"{name}.",
                               default=None) or None,
        labels=tuple(labels) if labels else None,
        data=entry,
        calibration=_calibration(where, entry, name, len(shape)),
    )


def _calibration(where: Where, entry: dict[str, Any], name: str, rank: int
                 ) -> CalibratedRange | None:
    """``calibration``: absent, or {range: [low, high], channel_axis, baseline, samples}."""
    record = where.field(entry, "calibration", dict, "an object", f"{name}.", default=None)
    if record is None:
        return None
    prefix = f"{name}.calibration."
    bounds = where.field(record, "range", list, "[low, high]", prefix)
    if not (len(bounds) == 2 and all(isinstance(v, int | float) and not isinstance(v, bool)
                                     and _finite(v) for v in bounds) and bounds[0] < bounds[1]):
        raise ArtifactError(f"{where.origin}: {prefix}range must be [low, high], two finite "
                            f"numbers with low < high, got {short(bounds)}")
    axis = where.field(record, "channel_axis", int, f"an int in [0, {rank})", prefix,
                       default=None)
    if axis is not None and not 0 <= axis < rank:
        raise ArtifactError(f"{where.origin}: {prefix}channel_axis must be an int in "
                            f"[0, {rank}) or null, got {axis}")
    baseline = where.field(record, "baseline", list, "a list of shares in [0, 1]", prefix,
                           default=[])
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= 1
               for v in baseline) or len(baseline) > 1 << 16:
        raise ArtifactError(f"{where.origin}: {prefix}baseline must be a list of shares in "
                            f"[0, 1], got {short(baseline)}")
    samples = where.field(record, "samples", int, "an int >= 0", prefix, default=0)
    if samples < 0:
        raise ArtifactError(f"{where.origin}: {prefix}samples must be an int >= 0, got "
                            f"{samples}")
    return CalibratedRange(float(bounds[0]), float(bounds[1]), axis,
                           tuple(float(v) for v in baseline), samples)


def _quantization(where: Where, entry: dict[str, Any], name: str) -> None:
    """``quantization``: absent/empty, or a finite scale > 0 and an integer zero point."""
    q = where.field(entry, "quantization", dict, "an object", f"{name}.", default=None)
    _qparams(where, q, f"{name}.quantization")


def _qparams(where: Where, q: dict[str, Any] | None, name: str) -> None:
    if not q:
        return
    scale, zero_point = q.get("scale"), q.get("zero_point", 0)
    if isinstance(scale, bool) or not isinstance(scale, int | float) or not (
            _finite(scale) and scale > 0):
        raise ArtifactError(f"{where.origin}: {name}.scale must be a finite "
                            f"number > 0, got {short(scale)}")
    if isinstance(zero_point, bool) or not isinstance(zero_point, int) or not (
            -(1 << 15) <= zero_point < 1 << 16):
        raise ArtifactError(f"{where.origin}: {name}.zero_point must be an "
                            f"integer in the int16/uint16 range, got {short(zero_point)}")


def parse_model(where: Where, entry: Any, i: int, files: dict[str, str]) -> ModelEntry:
    name = f"models[{i}]"
    where.expect(entry, dict, name, "an object")
    path = where.field(entry, "path", str, "a member name", f"{name}.")
    if path not in files:
        raise ArtifactError(f"{where.origin}: {name}.path must name a member listed in files "
                            f"({', '.join(sorted(files)) or 'none'}), got {short(path)}")
    size = where.field(entry, "bytes", int, "an int >= 0", f"{name}.", default=None)
    if size is not None and size < 0:
        raise ArtifactError(f"{where.origin}: {name}.bytes must be an int >= 0, got {size}")
    digest = where.field(entry, "sha256", str, "a sha256 hex string", f"{name}.", default=None)
    if digest is not None and digest != files[path]:
        raise ArtifactError(f"{where.origin}: {name}.sha256 must equal files[{path!r}] "
                            f"({files[path][:12]}...), got {short(digest)}")
    for key in ("inputs", "outputs"):
        _model_io(where, entry, f"{name}.{key}", key)
    quantized = where.field(entry, "outputs_quantization", dict, "an object mapping output -> "
                            "{scale, zero_point}", f"{name}.", default={})
    for output, q in quantized.items():
        where.expect(q, dict, f"{name}.outputs_quantization[{output!r}]", "an object")
        _qparams(where, q, f"{name}.outputs_quantization[{output!r}]")
    where.field(entry, "reduce_range", bool, "true or false", f"{name}.", default=False)
    return ModelEntry(
        format=where.field(entry, "format", str, "a string", f"{name}."),
        path=path,
        runtime=where.field(entry, "runtime", str, "a string", f"{name}.", default=""),
        bytes=size,
        data=entry,
    )


def _model_io(where: Where, entry: dict[str, Any], name: str, key: str) -> None:
    """A model's own view of its tensors (``models[].inputs``/``outputs``: the .tflite's
    names, shapes, layout permutation and quantization): every key a backend reads."""
    tensors = where.field(entry, key, list, "a list of tensor entries", "", default=[])
    if len(tensors) > MAX_TENSORS:
        raise ArtifactError(f"{where.origin}: {name} must hold at most {MAX_TENSORS} entries, "
                            f"got {len(tensors)}")
    for i, item in enumerate(tensors):
        at = f"{name}[{i}]"
        where.expect(item, dict, at, "an object")
        where.field(item, "name", str, "a string", f"{at}.")
        for text in ("tflite_name", "layout", "dtype"):
            where.field(item, text, str, "a string", f"{at}.", default="")
        shape = where.field(item, "shape", list, "a list of dims", f"{at}.", default=[])
        if len(shape) > MAX_RANK or not all(type(d) is int and 0 <= d < 1 << 31 for d in shape):
            raise ArtifactError(f"{where.origin}: {at}.shape must be at most {MAX_RANK} ints "
                                f">= 0, got {short(shape)}")
        perm = where.field(item, "perm", list, "a permutation of the axes", f"{at}.",
                           default=None)
        if perm is not None and (len(perm) > MAX_RANK or not all(type(p) is int for p in perm)
                                 or sorted(perm) != list(range(len(perm)))):
            raise ArtifactError(f"{where.origin}: {at}.perm must be a permutation of "
                                f"0..rank-1 (at most {MAX_RANK} axes), got {short(perm)}")
        _quantization(where, item, at)


def parse_layer(where: Where, entry: Any, name: str) -> LayerEntry:
    where.expect(entry, dict, name, "an object")
    prefix = f"{name}."
    precision = where.field(entry, "precision", str, "a string", prefix)
    if precision not in PRECISIONS:
        raise ArtifactError(f"{where.origin}: {prefix}precision must be one of "
                            f"{', '.join(PRECISIONS)}, got {short(precision)}")
    sqnr = entry.get("sqnr_db")
    return LayerEntry(
        name=where.field(entry, "name", str, "a string", prefix),
        op=where.field(entry, "op", str, "a string", prefix),
        precision=precision,
        sqnr_db=None if sqnr is None else _number(where, entry, "sqnr_db", prefix, -1e3, 1e3),
        reason=where.field(entry, "reason", str, "a string", prefix, default=""),
    )


def parse_vectors(where: Where, entry: Any, files: dict[str, str]) -> TestVectorsEntry:
    where.expect(entry, dict, "test_vectors", "an object")
    tolerance = entry.get("tolerance", 0)
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float | str) or (
            not isinstance(tolerance, str) and not _finite(tolerance)):
        raise ArtifactError(f"{where.origin}: test_vectors.tolerance must be a number or a "
                            f"description, got {short(tolerance)}")
    path = where.field(entry, "path", str, "a member name", "test_vectors.",
                       default="test_vectors.npz")
    if path not in files:
        raise ArtifactError(f"{where.origin}: test_vectors.path must name a member listed in "
                            f"files ({', '.join(sorted(files)) or 'none'}), got {short(path)}")
    count = where.field(entry, "count", int, "an int >= 0", "test_vectors.", default=0)
    if count < 0:
        raise ArtifactError(f"{where.origin}: test_vectors.count must be an int >= 0, got "
                            f"{count}")
    outputs = where.field(entry, "outputs", dict, "an object mapping output -> bounds",
                          "test_vectors.", default={})
    return TestVectorsEntry(
        path=path,
        count=count,
        tolerance=tolerance if isinstance(tolerance, str) else float(tolerance),
        outputs={name: _output_tolerance(where, bounds, f"test_vectors.outputs[{name!r}]")
                 for name, bounds in outputs.items()},
        basis=where.field(entry, "basis", str, "a string", "test_vectors.", default=""),
        golden=_golden(where, entry),
    )


def _golden(where: Where, entry: dict[str, Any]) -> dict[str, str]:
    golden = where.field(entry, "golden", dict, "an object of strings (target, cpu, part)",
                         "test_vectors.", default={})
    bad = [k for k, v in golden.items() if not isinstance(v, str)]
    if bad or set(golden) - {"target", "cpu", "part"}:
        raise ArtifactError(f"{where.origin}: test_vectors.golden must map target, cpu and "
                            f"part to strings, got {short(golden)}")
    return dict(golden)


def _number(where: Where, table: dict[str, Any], key: str, prefix: str,
            low: float, high: float) -> float:
    value = where.field(table, key, (int, float), f"a number in [{low}, {high}]", prefix)
    if isinstance(value, bool) or not low <= value <= high:
        raise ArtifactError(f"{where.origin}: {prefix}{key} must be a number in [{low}, {high}],"
                            f" got {short(value)}")
    return float(value)


def _output_tolerance(where: Where, entry: Any, name: str) -> OutputTolerance:
    where.expect(entry, dict, name, "an object")
    prefix = f"{name}."
    sqnr = entry.get("min_sqnr_db")
    step = entry.get("float_step")
    slices = where.field(entry, "slices", list, "a list of [start, stop]", prefix, default=[])
    for item in slices:
        if (not isinstance(item, list) or len(item) != 2
                or not all(type(v) is int and v >= 0 for v in item) or item[0] >= item[1]):
            raise ArtifactError(f"{where.origin}: {prefix}slices must hold [start, stop] "
                                f"pairs of ints with start < stop, got {short(item)}")
    return OutputTolerance(
        within_1_step=_number(where, entry, "within_1_step", prefix, 0.0, 1.0),
        max_steps=_number(where, entry, "max_steps", prefix, 0.0, 1e6),
        min_sqnr_db=None if sqnr is None else _number(where, entry, "min_sqnr_db", prefix,
                                                      -1e3, 1e3),
        axis=where.field(entry, "axis", int, "an int", prefix, default=1),
        slices=tuple((a, b) for a, b in slices),
        float_step=None if step is None else _number(where, entry, "float_step", prefix,
                                                     1e-30, 1e30),
    )

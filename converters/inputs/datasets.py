"""Calibration and validation data: an image folder, a .npy/.npz file, or explicit synthetic data.

Everything comes back as a ``Dataset`` with one array per model input (leading sample axis)
and integer labels when the source has them (``y`` in an npz, one subfolder per class, or
``<label>_<i>.png`` names in one folder).
"""

from __future__ import annotations

import os
import re
import tomllib
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np
from edgekit.converters.context import Dataset

from edgekit.errors import CalibrationError, UserError
from edgekit.runtime.preprocess import (
    SPEC_KEYS,
    check_channels,
    check_spec,
    check_values,
    default_spec,
    list_images,
    preprocess_image,
)

SYNTHETIC = "synthetic"
SYNTHETIC_SAMPLES = 64
LABEL_KEYS = ("y", "labels", "label")


def load_preprocess_toml(path: str) -> dict[str, Any]:
    """A small TOML file of preprocessing keys (see edgekit.runtime.preprocess)."""
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CalibrationError(f"{path}: cannot read the preprocessing TOML: {exc}") from exc
    spec = data.get("preprocess", data)
    if not isinstance(spec, dict):
        raise CalibrationError(f"{path}: [preprocess] must be a table of keys, got {spec!r}")
    unknown = sorted(set(spec) - set(SPEC_KEYS))
    if unknown:
        raise CalibrationError(f"{path}: unknown preprocessing key(s) {unknown}; allowed: "
                               f"{', '.join(SPEC_KEYS)}")
    try:
        check_values(spec)
    except UserError as exc:
        raise CalibrationError(f"{path}: {exc}") from exc
    return spec


def image_spec(inputs: list[dict[str, Any]], overrides: dict[str, Any]) -> dict[str, Any]:
    """The image preprocessing spec for a single-image-input model: defaults from its shape."""
    if len(inputs) != 1 or len(inputs[0]["shape"]) != 4:
        shapes = {i["name"]: i["shape"] for i in inputs}
        raise CalibrationError(
            f"an image folder needs a model with one 4-D image input; this one has {shapes}: "
            "pass a .npz with one array per input instead"
        )
    shape = list(inputs[0]["shape"])
    layout = overrides.get("layout", "NCHW")
    hw = (2, 3) if layout == "NCHW" else (1, 2)
    if not all(isinstance(shape[a], int) for a in hw):  # dynamic H/W: the images set them
        if not overrides.get("size"):
            raise CalibrationError(
                f"the model input {inputs[0]['name']} {shape} ({layout}) leaves its height and "
                "width symbolic: pass --size HxW for the images (or --input-shape)")
        shape[hw[0]], shape[hw[1]] = overrides["size"]
    channels = shape[1] if layout == "NCHW" else shape[3]
    if not isinstance(channels, int):
        raise CalibrationError(f"the model input {inputs[0]['name']} {shape} leaves its "
                               "channels symbolic: pass a .npz instead of an image folder")
    spec = default_spec(tuple(shape), layout)
    spec.update({k: v for k, v in overrides.items() if v is not None})
    spec = check_spec(spec)
    check_channels(spec, shape)
    want = [d for d in inputs[0]["shape"][2:4]] if spec["layout"] == "NCHW" else inputs[0]["shape"][1:3]
    if all(isinstance(d, int) for d in want) and list(spec["size"]) != list(want):
        raise CalibrationError(
            f"preprocess size {spec['size']} does not match the model input "
            f"{inputs[0]['name']} {inputs[0]['shape']} ({spec['layout']}: H, W = {want})"
        )
    return spec


def describe_source(source: Any) -> str:
    """How a data source reads in messages and the manifest: a path, or an array's shape."""
    if isinstance(source, np.ndarray):
        return f"array {list(source.shape)} {source.dtype}"
    if isinstance(source, dict):
        return "arrays {" + ", ".join(f"{k}: {list(np.shape(v))}" for k, v in source.items()) + "}"
    return str(source)


def data_label(source: Any) -> str:
    """A data source as the manifest names it: a file or folder by its name only (a host's
    paths would make the same build differ between checkouts), arrays by their shape."""
    if isinstance(source, str | Path) and str(source) != "synthetic":
        return Path(str(source)).name or str(source)
    return describe_source(source)


def has_data(source: Any) -> bool:
    """A source was given (an array's truth value is ambiguous, so ``not calib`` cannot say)."""
    return source is not None and not (isinstance(source, str) and not source)


def load_dataset(source: Any, inputs: list[dict[str, Any]], preprocess: dict[str, Any],
                 progress: bool = True, limit: int | None = None, seed: int = 0) -> tuple[Dataset, dict[str, Any] | None]:
    """Read a data source for the model's inputs. Returns the dataset and, for images, the spec.

    ``source`` is a path (folder, .npy, .npz), ``"synthetic"``, or in-memory data from the
    Python API: a numpy array (one-input models) or a dict of arrays by input name (labels
    as ``"y"``)."""
    if isinstance(source, np.ndarray) or (isinstance(source, dict)):
        return _in_memory(source, inputs, limit), None
    source = os.fspath(source)
    if source == SYNTHETIC:
        # a few dozen samples exercise the ranges; more would only cost memory (224x224x3 floats)
        return synthetic(inputs, min(limit or SYNTHETIC_SAMPLES, SYNTHETIC_SAMPLES), seed), None
    if not os.path.exists(source):
        raise CalibrationError(
            f"{source}: no such calibration data (expected a folder of images, a .npy/.npz "
            f"file, or 'synthetic')"
        )
    if os.path.isdir(source):
        spec = image_spec(inputs, preprocess)
        return _images(source, inputs[0]["name"], spec, progress, limit, seed), spec
    if source.endswith(".npy"):
        if len(inputs) != 1:
            raise CalibrationError(f"{source}: a .npy holds one array; the model has {len(inputs)} inputs: use .npz")
        try:
            array = np.load(source, allow_pickle=False)
        except NUMPY_READ_ERRORS as exc:
            raise CalibrationError(f"{source}: not a readable .npy file: {exc}") from exc
        return _checked(Dataset({inputs[0]["name"]: array}, None, source), inputs), None
    if source.endswith(".npz"):
        return _npz(source, inputs), None
    raise CalibrationError(
        f"{source}: unknown calibration data kind (expected a folder of images, .npy, .npz or 'synthetic')"
    )


def _in_memory(source: np.ndarray | dict[str, Any], inputs: list[dict[str, Any]],
               limit: int | None) -> Dataset:
    what = describe_source(source)
    if isinstance(source, np.ndarray):
        if len(inputs) != 1:
            raise CalibrationError(f"calib={what}: one array for a model with {len(inputs)} "
                                   f"inputs; pass a dict of arrays named {[i['name'] for i in inputs]}")
        return _checked(Dataset({inputs[0]["name"]: source}, None, f"calib={what}"), inputs)
    arrays = {k: np.asarray(v) for k, v in source.items()}
    labels = next((arrays.pop(k) for k in LABEL_KEYS if k in arrays), None)
    return _checked(_named(arrays, labels, f"calib={what}", inputs), inputs)


def _named(arrays: dict[str, Any], labels: Any, source: str,
           inputs: list[dict[str, Any]]) -> Dataset:
    names = [i["name"] for i in inputs]
    if all(n in arrays for n in names):
        chosen = {n: arrays[n] for n in names}
    elif len(names) == 1 and len(arrays) == 1:
        chosen = {names[0]: next(iter(arrays.values()))}
    elif len(names) == 1 and "x" in arrays:
        chosen = {names[0]: arrays["x"]}
    else:
        raise CalibrationError(
            f"{source}: expected arrays named {names} (or a single array / 'x' for a one-input "
            f"model, labels as 'y'); found {sorted(arrays)}"
            + ("; an input the data lacks can be frozen with --const NAME=VALUE"
               if len(names) > 1 else "")
        )
    return Dataset(chosen, labels, source)


# what np.load raises on an empty, truncated or corrupt .npy/.npz (an empty file: EOFError;
# a broken zip: BadZipFile, zlib.error; a lying header: ValueError, MemoryError)
NUMPY_READ_ERRORS = (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error, KeyError,
                     MemoryError, OverflowError, TypeError)


def _npz(source: str, inputs: list[dict[str, Any]]) -> Dataset:
    try:
        with np.load(source, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except NUMPY_READ_ERRORS as exc:
        raise CalibrationError(f"{source}: not a readable .npz file: {exc}") from exc
    labels = next((arrays.pop(k) for k in LABEL_KEYS if k in arrays), None)
    return _checked(_named(arrays, labels, source, inputs), inputs)


def sample_axis(spec: dict[str, Any]) -> int:
    """The axis of the model input that holds samples (``--batch-axis``; default 0)."""
    return int(spec.get("batch_axis", 0))


def _sample_first(array: np.ndarray, spec: dict[str, Any], source: str) -> np.ndarray:
    """An array laid out as the model input (samples on the batch axis K), or as a stack of
    batch-1 inputs ``[N, *input]``, -> ``[N, *input without axis K]``."""
    axis, rank = sample_axis(spec), len(spec["shape"])
    if axis >= rank:
        raise CalibrationError(f"--batch-axis {spec['name']}={axis}: input {spec['name']!r} "
                               f"{spec['shape']} has rank {rank}")
    if array.ndim == rank + 1 and array.shape[axis + 1] == 1:
        return np.squeeze(array, axis + 1)
    if array.ndim == rank:
        return np.moveaxis(array, axis, 0)
    raise CalibrationError(
        f"{source}: array for input {spec['name']!r} has shape {list(array.shape)}; input "
        f"{spec['shape']} keeps its samples on axis {axis}: expected rank {rank} (samples on "
        f"axis {axis}) or a stack of batch-1 inputs of rank {rank + 1}")


def _scalar_input_error(name: str, array: np.ndarray, source: str) -> CalibrationError:
    """A rank-0 model input (a sample rate, a mode flag) has no axis to stack samples on, so
    calibration data cannot vary it per sample: it must be frozen with --const."""
    values = np.unique(array) if array.size and array.dtype.kind in "fiub" else np.array([])
    hint = (f"--const {name}={values[0].item()}" if len(values) == 1
            else f"--const {name}=VALUE")
    return CalibrationError(
        f"{source}: input {name!r} is a scalar (shape []): it has no sample axis, so its "
        f"calibration array {list(array.shape)} cannot feed it sample by sample; freeze it "
        f"with {hint}")


def _checked(data: Dataset, inputs: list[dict[str, Any]]) -> Dataset:
    """Each array must be [N, *input shape without batch]; batch-less arrays gain N=1."""
    for spec in inputs:
        array = np.asarray(data.arrays[spec["name"]])
        given = list(array.shape)  # messages describe the user's array, not our reshaped one
        shape = list(spec["shape"])
        if not shape:
            raise _scalar_input_error(spec["name"], array, data.source)
        if sample_axis(spec):
            array = _sample_first(array, spec, data.source)
            data.axes[spec["name"]] = sample_axis(spec)
        elif array.ndim == len(shape) + 1 and array.shape[1] == 1:
            array = array[:, 0]  # a stack of batch-1 inputs [N, 1, ...]
            shape.insert(0, shape.pop(sample_axis(spec)))
        expected = f"[N, {', '.join(str(d) for d in shape[1:])}]"
        if array.ndim == len(shape) - 1:
            if _fits(array.shape, shape[1:]):
                array = array[None]  # one sample without its batch axis
            else:
                hint = (f"; if these are {given[0]} samples without the channel axis, add it "
                        f"(x[:, None] -> {[given[0], 1, *given[1:]]})"
                        if shape[1] == 1 and _fits(array.shape[1:], shape[2:]) else "")
                raise CalibrationError(
                    f"{data.source}: array for input {spec['name']!r} has shape {given} "
                    f"({array.ndim}-D); expected {expected} for the model input {shape}, or "
                    f"{list(shape[1:])} for a single sample{hint}"
                )
        if array.ndim != len(shape):
            raise CalibrationError(
                f"{data.source}: array for input {spec['name']!r} has shape {given}; "
                f"expected {expected} for the model input {shape}"
                + ("" if len(shape) < 2 else f" (if the samples are on another axis, pass "
                   f"--batch-axis {spec['name']}=K)")
            )
        for axis, (want, got) in enumerate(zip(shape[1:], array.shape[1:], strict=True), start=1):
            if isinstance(want, int) and want != got:
                raise CalibrationError(
                    f"{data.source}: array for input {spec['name']!r} has shape {given}; "
                    f"expected {expected} for the model input {shape} "
                    f"(axis {axis}: expected {want}, got {got})"
                )
        if array.dtype.kind not in "fiub":
            raise CalibrationError(
                f"{data.source}: array for {spec['name']!r} has dtype {array.dtype}; expected numbers"
            )
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            bad = int(np.count_nonzero(~np.isfinite(array)))
            raise CalibrationError(
                f"{data.source}: array for {spec['name']!r} holds {bad} non-finite value(s) "
                f"(NaN or inf) of {array.size}; expected finite numbers: calibration ranges "
                "come from these values (drop or repair those samples)")
        dtype = spec.get("dtype", "float32")  # integer inputs are fed as they are
        data.arrays[spec["name"]] = np.ascontiguousarray(array, dtype=np.dtype(
            "bool" if dtype == "bool" else dtype))
    if len(data) == 0:
        raise CalibrationError(f"{data.source}: holds no samples")
    if data.labels is not None:
        data.labels = _integer_labels(np.asarray(data.labels), data.source)
        if len(data.labels) != len(data):
            raise CalibrationError(
                f"{data.source}: {len(data.labels)} labels for {len(data)} samples"
            )
    return data


def _integer_labels(labels: np.ndarray, source: str) -> np.ndarray:
    """Labels as int64 class indices; strings, fractions or NaN are a ``CalibrationError``."""
    whole = labels.dtype.kind in "iub" or (
        labels.dtype.kind == "f" and bool(np.all(np.isfinite(labels)))
        and bool(np.all(labels == np.round(labels))))
    if not whole:
        sample = labels.reshape(-1)[:3].tolist()
        raise CalibrationError(
            f"{source}: labels ('y') have dtype {labels.dtype} (first values {sample}); "
            "expected integer class indices 0..K-1 (map class names to their index first)")
    return labels.astype(np.int64).reshape(-1)


def _fits(dims: tuple[int, ...], want: list[Any]) -> bool:
    return len(dims) == len(want) and all(not isinstance(w, int) or w == d
                                          for w, d in zip(want, dims, strict=True))


NAMED_LABEL = re.compile(r"(?P<label>.+)_\d+\.[A-Za-z0-9]+")  # 3_0021.png: class 3


def labels_from_names(files: list[tuple[str, str | None]]) -> list[tuple[str, str | None]]:
    """A flat folder of ``<label>_<i>.png`` files (as ``examples/raspberrypi/samples``) read as
    labelled: every file must be named so, with at least two labels; otherwise unchanged."""
    if not files or any(label is not None for _, label in files):
        return files
    found = [NAMED_LABEL.fullmatch(os.path.basename(path)) for path, _ in files]
    if not all(found) or len({m["label"] for m in found if m}) < 2:
        return files
    return [(path, m["label"]) for (path, _), m in zip(files, found, strict=True) if m]


def _class_order(classes: set[str]) -> list[str]:
    """File-name class names in index order: numeric names are their own index (3_0021.png is
    class 3 even when no 2 is in the folder), others sorted as text."""
    if classes and all(c.isdigit() for c in classes):
        return [str(i) for i in range(max(int(c) for c in classes) + 1)]
    return sorted(classes)


def _images(folder: str, name: str, spec: dict[str, Any], progress: bool, limit: int | None,
            seed: int) -> Dataset:
    listed = list_images(folder)
    files = labels_from_names(listed)
    numeric = files is not listed  # file-name labels: numeric ones by value
    if not files:
        raise CalibrationError(
            f"{folder}: no images found (looked for {', '.join(('png', 'jpg', 'bmp', '...'))} "
            "files, directly or one subfolder per class)"
        )
    if limit and len(files) > limit:
        order = np.random.default_rng(seed).permutation(len(files))[:limit]
        files = [files[i] for i in sorted(order)]
    found = {label for _, label in files if label is not None}
    classes = _class_order(found) if numeric else sorted(found)
    iterator = files
    if progress:
        from tqdm import tqdm

        # disable=None: a bar only on a terminal, never in piped logs
        iterator = tqdm(files, desc="reading images", unit="img", leave=False, disable=None)
    arrays = [preprocess_image(path, spec) for path, _ in iterator]
    labels = None
    if classes and all(label is not None for _, label in files):
        labels = np.array([classes.index(str(int(label)) if numeric and label.isdigit() else label)
                           for _, label in files], dtype=np.int64)
    data = Dataset({name: np.concatenate(arrays)}, labels, folder)
    data.class_names = classes  # type: ignore[attr-defined]
    return data


def synthetic(inputs: list[dict[str, Any]], count: int, seed: int) -> Dataset:
    """Uniform [0, 1) samples: only for trying a build; accuracy stays unverified."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for spec in inputs:
        shape = list(spec["shape"])
        shape.pop(sample_axis(spec))
        dims = [d if isinstance(d, int) else 1 for d in shape]
        if spec.get("dtype", "float32").startswith("float"):
            arrays[spec["name"]] = rng.random((count, *dims), dtype=np.float32)
        else:  # ids, masks, rates: no uniform stand-in means anything; zeros at least run
            arrays[spec["name"]] = np.zeros((count, *dims), dtype=spec["dtype"])
    return Dataset(arrays, None, SYNTHETIC, synthetic=True,
                   axes={s["name"]: sample_axis(s) for s in inputs if sample_axis(s)})

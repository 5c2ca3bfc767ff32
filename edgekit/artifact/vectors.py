"""The bundled test vectors, read through the same bounded, typed path as the artifact.

``test_vectors.npz`` is itself a zip (numpy's ``.npz``) inside the artifact's zip: a hostile
one can nest a zip bomb, a pickled object, a corrupt member or a ``q/`` array without its
``qparams``. So it is read like the artifact: its directory first (a bounded number of
members, each ``.npy`` within its size figure and the compression-ratio ceiling, all of them
within the target's memory allowance), each member inflated in chunks, parsed by numpy's
``.npy`` reader with pickles refused, and every failure an ``ArtifactError`` naming the
array. Then the arrays are checked against the manifest: an ``in/<input>`` per input, all
holding the same number of vectors on their batch axis, and ``out/<format>/<output>``
arrays holding at least as many.
"""

from __future__ import annotations

import io
import math
import zipfile
from collections.abc import Sequence

import numpy as np

from edgekit.artifact.manifest import TensorEntry
from edgekit.artifact.zipread import check_size, read_member, zip_errors
from edgekit.errors import ArtifactError, EdgekitError

HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0,
                  (2, 0): np.lib.format.read_array_header_2_0}
VECTOR_RATIO_FREE_BYTES = 16 << 20  # an array this small may compress as well as it likes
MAX_ARRAYS = 1024  # inputs + outputs x formats + quantized-input parameters
SUFFIX = ".npy"


def read_vectors(data: bytes, origin: str, allowance: int) -> dict[str, np.ndarray]:
    """``{name: array}`` of an ``.npz`` held in ``data``, bounded (see the module doc)."""
    arrays: dict[str, np.ndarray] = {}
    with zip_errors(origin, "test vectors"):
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
        if len(infos) > MAX_ARRAYS:
            raise ArtifactError(f"{origin}: expected at most {MAX_ARRAYS} arrays, got "
                                f"{len(infos)}")
        total = 0
        for info in infos:
            # a CTC model's softmax over 6625 classes is nearly all zeros: its 4 MB array
            # deflates 600x (PP-OCRv4 rec); the arrays' sum stays within the allowance
            check_size(origin, info.filename, info, allowance, VECTOR_RATIO_FREE_BYTES)
            total += info.file_size
        if total > allowance:
            raise ArtifactError(f"{origin}: arrays declare {total} bytes in all; expected at "
                                f"most {allowance} (half the target's RAM)")
        for info in infos:
            name = info.filename[:-len(SUFFIX)] if info.filename.endswith(SUFFIX) else ""
            if not name or name in arrays:
                raise ArtifactError(f"{origin}: member {info.filename[:80]!r}: expected unique "
                                    f"<name>{SUFFIX} arrays")
            raw, _ = read_member(archive, info, origin, allowance, VECTOR_RATIO_FREE_BYTES)
            try:
                arrays[name] = _read_npy(raw, name, origin)
            except ArtifactError:
                raise
            except (ValueError, OSError, EOFError, TypeError, OverflowError,
                    MemoryError, SyntaxError) as exc:
                raise ArtifactError(f"{origin}: array {name[:80]!r} is not a plain .npy array "
                                    f"({type(exc).__name__}: {str(exc)[:160]})") from exc
    return arrays


def _read_npy(raw: bytes, name: str, origin: str) -> np.ndarray:
    """One ``.npy`` whose header's shape must match the bytes it holds: numpy would first
    allocate what the header claims (a 60-byte member claiming 4 TiB)."""
    stream = io.BytesIO(raw)
    version = np.lib.format.read_magic(stream)
    if version not in HEADER_READERS:
        raise ArtifactError(f"{origin}: array {name[:80]!r}: .npy format version {version}; "
                            f"expected one of {sorted(HEADER_READERS)}")
    shape, _, dtype = HEADER_READERS[version](stream)
    if dtype.hasobject:
        raise ArtifactError(f"{origin}: array {name[:80]!r} holds Python objects; expected "
                            "plain numbers (pickles are refused)")
    claimed = math.prod(shape) * dtype.itemsize
    held = len(raw) - stream.tell()
    if claimed != held:
        raise ArtifactError(f"{origin}: array {name[:80]!r} declares {list(shape)} "
                            f"{dtype} = {claimed} bytes, holds {held}")
    stream.seek(0)
    return np.lib.format.read_array(stream, allow_pickle=False)


def decode_quantized(arrays: dict[str, np.ndarray], origin: str) -> dict[str, np.ndarray]:
    """``q/<name>`` integer codes + ``qparams/<name>`` = [scale, zero_point] -> ``in/<name>``
    floats (inputs on their quantization grid are stored 4x smaller)."""
    for key in [k for k in arrays if k.startswith("q/")]:
        name = key[2:]
        params = arrays.pop(f"qparams/{name}", None)
        codes = arrays.pop(key)
        if params is None or params.shape != (2,) or params.dtype.kind not in "fiu" \
                or codes.dtype.kind not in "iu" or not np.all(np.isfinite(params)):
            raise ArtifactError(f"{origin}: {key!r}: expected integer codes with "
                                f"'qparams/{name}' = [scale, zero_point], got codes "
                                f"{codes.dtype} and params "
                                f"{'none' if params is None else f'{params.dtype}{list(params.shape)}'}")
        scale, zero_point = (np.float32(v) for v in params)
        arrays[f"in/{name}"] = (codes.astype(np.float32) - zero_point) * scale
    return arrays


def check_vectors(arrays: dict[str, np.ndarray], inputs: Sequence[TensorEntry],
                  outputs: Sequence[TensorEntry], formats: Sequence[str], origin: str) -> int:
    """The vectors' count, after checking they fit the manifest's inputs and outputs."""
    count = None
    for spec in inputs:
        array = arrays.get(f"in/{spec.name}")
        axis = _axis(spec)
        if array is None or array.ndim != len(spec.shape) or array.ndim <= axis \
                or array.dtype.kind not in "fiub" or array.shape[axis] < 1:
            raise ArtifactError(
                f"{origin}: test vector 'in/{spec.name}': expected a numeric array of "
                f"{len(spec.shape)} dims with vectors on axis {axis}, got "
                f"{'none' if array is None else f'{array.dtype}{list(array.shape)}'}")
        if count is not None and array.shape[axis] != count:
            raise ArtifactError(f"{origin}: test vector 'in/{spec.name}' holds "
                                f"{array.shape[axis]} vectors, the other inputs {count}")
        count = array.shape[axis]
    for fmt in formats:
        for spec in outputs:
            array = arrays.get(f"out/{fmt}/{spec.name}")
            axis = _axis(spec)
            if array is None:
                continue  # verify names a missing one for the format it runs
            if array.ndim != len(spec.shape) or array.ndim <= axis \
                    or array.dtype.kind not in "fiub" or (
                    count is not None and array.shape[axis] < count):
                raise ArtifactError(
                    f"{origin}: test vector 'out/{fmt}/{spec.name}': expected a numeric array "
                    f"of {len(spec.shape)} dims with at least {count} vectors on axis {axis}, "
                    f"got {array.dtype}{list(array.shape)}")
    return count or 0


def _axis(spec: TensorEntry) -> int:
    axis = spec.data.get("batch_axis", 0)
    return axis if type(axis) is int else 0


__all__ = ["EdgekitError", "check_vectors", "decode_quantized", "read_vectors"]

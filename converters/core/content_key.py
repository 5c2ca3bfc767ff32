"""The content key of a build: sha256 over everything that decides an artifact's bytes.

Builds are deterministic (fixed seeds, sorted zip members at a fixed time and mode, no wall
clock or host path in the manifest), so two builds with the same key give the same file. The
key covers the source model's bytes (and its weights file), the calibration and validation
data's bytes, the resolved target profile, every build option that changes the output, the
edgekit version and the versions of the tools that write the model bytes (onnx, onnxruntime,
and torch for PyTorch sources). Not covered: Python code a ``module:callable`` source or a
``--metric module:function`` imports beyond the named file, and a host-target estimate
measured on this machine. ``edgekit matrix`` skips a cell whose artifact has its key.

Computed before anything is built (the matrix cache needs it first); the package stage
writes it into the manifest as ``content_key``.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import fields
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np
from edgekit.converters.context import BuildConfig
from edgekit.targets import Profile

import edgekit

# Inputs hashed as data (bytes), or that never change the artifact's bytes.
NOT_OPTIONS = frozenset({"source", "calib", "val", "weights", "example_inputs", "output",
                         "quiet", "sign_key",
                         # where the pieces run, not what they compute: a Ray build must
                         # equal the local one byte for byte (tests/converters/test_ray_executor.py)
                         "executor", "shards"})
TOOLS = ("onnx", "onnxruntime")
CHUNK = 1 << 20


def content_key(config: BuildConfig, profile: Profile) -> str:
    """The hex sha256 naming what ``config`` builds for ``profile`` (see the module doc)."""
    return hashlib.sha256(canonical(key_inputs(config, profile))).hexdigest()


def key_inputs(config: BuildConfig, profile: Profile) -> dict[str, Any]:
    """What the key hashes, each part already reduced to a digest or plain data."""
    torch_source = not _is_onnx(config.source)
    options = {f.name: getattr(config, f.name) for f in fields(config)
               if f.name not in NOT_OPTIONS}
    if config.sign_key:  # the signer changes the bytes; the key file's path does not
        options["signed_by"] = _signer(config.sign_key)
    return {
        "edgekit": edgekit.__version__,
        "tools": {name: _version(name) for name in TOOLS + (("torch",) if torch_source else ())},
        "source": source_digest(config.source),
        "weights": data_digest(config.weights),
        "example_inputs": data_digest(config.example_inputs),
        "calib": data_digest(config.calib),
        "val": data_digest(config.val),
        "profile": hashlib.sha256(canonical(profile.to_dict())).hexdigest(),
        "options": options,
    }


def canonical(value: Any) -> bytes:
    """One JSON text per value: sorted keys, tuples as lists, numpy values as numbers."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=_plain).encode()


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, set | frozenset):
        return sorted(value)
    # an API-only object (a callable): its repr may hold an address, so such a build's key
    # changes from run to run; a key must never stop a build
    return f"{type(value).__qualname__}:{value!r}"


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def folder_digest(folder: Path) -> str:
    """Every file under ``folder`` by relative path and content, in sorted order (an image
    folder's class names are in the paths, so a renamed class changes the key)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(file_digest(path).encode())
    return digest.hexdigest()


def data_digest(source: Any) -> str | None:
    """Calibration/validation data, weights or example inputs as a digest of their bytes."""
    if source is None or (isinstance(source, str) and source in ("", "synthetic")):
        return source
    if isinstance(source, str | Path):
        path = Path(source)
        if path.is_dir():
            return "folder:" + folder_digest(path)
        if path.is_file():
            return "file:" + file_digest(path)
        return f"missing:{source}"  # the data stage names what it expected
    if isinstance(source, dict):
        return "dict:" + hashlib.sha256(canonical(
            {str(k): data_digest(v) for k, v in source.items()})).hexdigest()
    if isinstance(source, list | tuple):
        return "seq:" + hashlib.sha256(canonical([data_digest(v) for v in source])).hexdigest()
    array = _as_array(source)
    digest = hashlib.sha256(f"{array.dtype.str}{array.shape}".encode())
    digest.update(np.ascontiguousarray(array).tobytes())
    return "array:" + digest.hexdigest()


def source_digest(source: Any) -> str:
    """A model file's bytes; ``file.py:Name`` the file's; ``package.module:callable`` the
    module file's (found without importing it); an ``nn.Module`` its structure and weights."""
    if isinstance(source, str | Path):
        text = str(source)
        if Path(text).is_file():
            return "file:" + file_digest(Path(text))
        if ":" in text:
            where, name = text.rsplit(":", 1)
            if Path(where).is_file():
                return f"file:{file_digest(Path(where))}:{name}"
            try:
                spec = find_spec(where) if where and not where.startswith(".") else None
            except (ImportError, ValueError):  # a parent package that does not import
                spec = None
            if spec is not None and spec.origin and Path(spec.origin).is_file():
                return f"module:{where}:{file_digest(Path(spec.origin))}:{name}"
        return f"unresolved:{text}"  # the load/export stage says what is wrong with it
    state = getattr(source, "state_dict", None)
    if callable(state):  # an nn.Module given to the Python API
        digest = hashlib.sha256(repr(source).encode())
        for name, tensor in sorted(state().items()):
            digest.update(name.encode() + b"\0")
            digest.update(tensor.detach().cpu().numpy().tobytes())
        return "module:" + digest.hexdigest()
    return f"object:{type(source).__qualname__}"  # the export stage refuses what it cannot take


def _as_array(value: Any) -> np.ndarray:
    detach = getattr(value, "detach", None)  # a torch tensor (torch already imported by it)
    return np.asarray(detach().cpu().numpy() if callable(detach) else value)


def _is_onnx(source: Any) -> bool:
    return isinstance(source, str | Path) and str(source).lower().endswith(".onnx")


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _signer(key_path: str | os.PathLike[str]) -> str:
    from edgekit.trust.signing import crypto, key_id, load_private_key

    c = crypto()
    raw = load_private_key(key_path).public_key().public_bytes(
        c.serialization.Encoding.Raw, c.serialization.PublicFormat.Raw)
    return key_id(raw)

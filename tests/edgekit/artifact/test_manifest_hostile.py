"""Every manifest field the runtime reads is validated at load, and the test vectors are read
through the bounded, typed path (issue 36, defect 6): 271 of 8,000 fuzzed artifacts raised
TypeError, IndexError, OverflowError, AttributeError, StopIteration, KeyError, BadZipFile or
zlib.error from ``models[].inputs/outputs/perm``, ``outputs_quantization`` and re-hashed
corrupt test-vector members."""

from __future__ import annotations

import copy
import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import edgekit
from edgekit.artifact.archive import read_artifact
from edgekit.errors import ArtifactError, EdgekitError
from edgekit.ops.verify import verify_artifact
from tools.fixtures import artifact_cases as cases

from ...conftest import EXAMPLE

DIGITS = EXAMPLE / "digits.rpi4.edgekit"


@pytest.fixture(scope="module")
def digits() -> tuple[dict, cases.Members]:
    return cases.example_members(str(DIGITS))


def write(tmp_path: Path, manifest: dict, members: cases.Members, name: str = "a") -> Path:
    path = tmp_path / f"{name}.edgekit"
    path.write_bytes(cases.artifact_bytes(cases.rehash(manifest, members), members))
    return path


TFLITE_FIELDS: list[tuple[tuple, Any, str]] = [
    (("inputs", 0, "perm"), [0, 2, 2, 1], "perm must be a permutation"),
    (("inputs", 0, "perm"), [0, 1 << 70, 2, 1], "perm must be a permutation"),
    (("inputs", 0, "perm"), "0231", "perm must be a permutation"),
    (("inputs", 0, "perm"), [0, 1], "does not fit the .tflite tensor"),
    (("inputs", 0, "name"), None, "name"),
    (("inputs", 0), "x", "must be an object"),
    (("inputs", 0, "quantization"), {"scale": -1}, "scale must be a finite number > 0"),
    (("outputs",), {"a": 1}, "must be a list"),
    (("outputs_quantization", "logits"), {"scale": "1"}, "scale"),
    (("outputs_quantization", "logits", "zero_point"), 1.5, "zero_point"),
    (("outputs_quantization",), [1], "outputs_quantization"),
]


@pytest.mark.parametrize(("path", "value", "message"), TFLITE_FIELDS)
def test_model_io_fields_are_validated(tmp_path: Path, digits: tuple[dict, cases.Members],
                                       path: tuple, value: Any, message: str) -> None:
    manifest, members = copy.deepcopy(digits[0]), digits[1]
    entry = next(m for m in manifest["models"] if m["format"] == "tflite")
    *parents, last = path
    for key in parents:
        entry = entry[key]
    if value is None:
        del entry[last]
    else:
        entry[last] = value
    artifact = write(tmp_path, manifest, members)
    with pytest.raises(ArtifactError, match=message.replace("(", r"\(")):
        edgekit.load(artifact, backend="litert", threads=1, trusted_keys=[])


def npz(arrays: dict[str, Any], pickled: bool = False) -> bytes:
    return cases.npz_bytes(arrays, pickled)


def digits_vectors() -> dict[str, np.ndarray]:
    with np.load(io.BytesIO(read_artifact(DIGITS).read("test_vectors.npz"))) as data:
        return {k: data[k] for k in data.files}


VECTOR_CASES: list[tuple[str, Any, str]] = [
    ("drop", "qparams/image", "qparams/image"),
    ("drop", "out/onnx/logits", "out/onnx/logits"),
    ("drop", "q/image", "in/image"),
    ("pickle", "out/onnx/logits", "pickles are refused"),
    ("raw", b"\x93NUMPY garbage", ".npy format version"),
    ("set", ("qparams/image", np.array([np.nan, 0.0])), "qparams/image"),
    ("set", ("q/image", np.zeros((0, 1, 8, 8), np.int8)), "in/image"),
    ("set", ("out/onnx/logits", np.zeros((1, 10), np.float32)), "out/onnx/logits"),
]


@pytest.mark.parametrize(("action", "arg", "message"), VECTOR_CASES)
def test_corrupt_test_vectors_are_typed_in_verify_and_test_vectors(
        tmp_path: Path, digits: tuple[dict, cases.Members], action: str, arg: Any,
        message: str) -> None:
    arrays: dict[str, Any] = digits_vectors()
    if action == "drop":
        del arrays[arg]
    elif action == "set":
        arrays[arg[0]] = arg[1]
    elif action == "raw":
        arrays["in/extra"] = arg
    data = npz(arrays, pickled=action == "pickle") if action != "pickle" else npz(
        {**arrays, arg: np.array([None, {}], dtype=object)}, pickled=True)
    members = [(n, data if n == "test_vectors.npz" else d) for n, d in digits[1]]
    artifact = read_artifact(write(tmp_path, digits[0], members))
    if not (action == "drop" and arg.startswith("out/")):  # a missing output: verify names it
        with pytest.raises(ArtifactError, match=message):
            artifact.test_vectors()
    with pytest.raises(ArtifactError, match=message):
        verify_artifact(artifact)


def test_a_header_declaring_a_terabyte_allocates_nothing(tmp_path: Path,
                                                          digits: tuple[dict, cases.Members]
                                                          ) -> None:
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False,
                                                  "shape": (1 << 40,)})
    data = npz({**digits_vectors(), "out/onnx/logits": header.getvalue() + bytes(64)})
    members = [(n, data if n == "test_vectors.npz" else d) for n, d in digits[1]]
    with pytest.raises(ArtifactError, match="out/onnx/logits"):
        read_artifact(write(tmp_path, digits[0], members)).test_vectors()


@settings(max_examples=120, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(index=st.integers(0, 10 ** 6), seed=st.integers(0, 3))
def test_crafted_artifacts_load_verify_or_fail_typed(
        tmp_path: Path, digits: tuple[dict, cases.Members], index: int, seed: int) -> None:
    """The bounded fuzz over both bases, as tools/studies/fuzz_artifact.py runs it (>= 10,000)."""
    _, data = cases.craft(index, seed, [cases.base_members(), digits])
    path = tmp_path / f"case-{index}.edgekit"
    path.write_bytes(data)
    try:
        with edgekit.load(path, threads=1, trusted_keys=[]) as model:
            if model.spec.test_vectors is not None:
                verify_artifact(model.artifact)
    except EdgekitError:
        pass  # typed: fine; anything else fails the test with its traceback


def test_null_fields_read_as_absent_everywhere(tmp_path: Path,
                                               digits: tuple[dict, cases.Members]) -> None:
    """The parser reads null as absent; so must every backend (fuzz case 9009: a null perm
    was a TypeError in the LiteRT backend)."""
    manifest = copy.deepcopy(digits[0])
    tflite = next(m for m in manifest["models"] if m["format"] == "tflite")
    tflite["inputs"][0]["perm"] = None
    tflite["outputs_quantization"] = None
    manifest["inputs"][0].update(dtype=None, layout=None, batch_axis=None)
    artifact = write(tmp_path, manifest, digits[1])
    for backend in ("litert", "onnxruntime"):
        with edgekit.load(artifact, backend=backend, threads=1, trusted_keys=[]) as model:
            assert verify_artifact(model.artifact, backend=backend).passed


def test_a_tflite_with_a_non_utf8_tensor_name_is_typed(tmp_path: Path,
                                                        digits: tuple[dict, cases.Members]
                                                        ) -> None:
    """Fuzz case 5578: a re-hashed flipped byte in a tensor name made LiteRT's
    get_output_details raise UnicodeDecodeError."""
    members = dict(digits[1])
    name = b"logits_QuantizeLinear_Input"
    assert name in members["model.tflite"]
    broken = members["model.tflite"].replace(name, b"\xec" + name[1:])
    changed = [(n, broken if n == "model.tflite" else d) for n, d in digits[1]]
    with pytest.raises(ArtifactError, match="could not load the .tflite"):
        edgekit.load(write(tmp_path, digits[0], changed), backend="litert", threads=1,
                     trusted_keys=[])

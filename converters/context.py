"""What a build is asked to do (``BuildConfig``) and what it has made so far (``BuildContext``).

Stages read the config and write their results into the context; nothing else is shared.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgekit.targets import Profile

CALIBRATION_METHODS = ("minmax", "percentile", "entropy")
FORMATS = ("onnx", "tflite")


@dataclass
class BuildConfig:
    """Everything the user asked for. CLI flags and ``build(**options)`` map onto these fields."""

    source: Any  # path to .onnx / .pt / .pt2 / "module:callable" / "file.py:Name", or an nn.Module
    target: str = "rpi4"
    output: str | None = None
    calib: str | None = None  # folder of images, .npy, .npz, or "synthetic"
    val: str | None = None  # held-out data in the same forms; default: a split of calib
    method: str = "minmax"  # one of CALIBRATION_METHODS, or "auto" to try each and keep the best
    calib_samples: int = 256  # at most this many calibration samples (the rest validate)
    val_samples: int = 1000
    preprocess: dict[str, Any] = field(default_factory=dict)  # image preprocessing overrides
    formats: list[str] | None = None  # None: the profile's preferred format
    activation_type: str | None = None  # None: the profile's
    per_channel: bool = True
    strict_int8: bool = False
    test_vectors: int = 4
    seed: int = 0
    # PyTorch sources (issue: PyTorch models in)
    weights: str | None = None
    input_shape: tuple[int, ...] | None = None
    example_inputs: Any = None
    dynamic_batch: bool = False
    input_names: list[str] | None = None
    output_names: list[str] | None = None
    # sizing (budgets and pruning); None: the profile's defaults
    budgets: dict[str, float] = field(default_factory=dict)
    prune: float | None = None
    search: bool = False
    quiet: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Dataset:
    """Model inputs by name, each with a leading sample axis, plus optional integer labels."""

    arrays: dict[str, Any]
    labels: Any = None
    source: str = ""
    synthetic: bool = False

    def __len__(self) -> int:
        return len(next(iter(self.arrays.values()))) if self.arrays else 0

    def take(self, index: Any) -> Dataset:
        labels = None if self.labels is None else self.labels[index]
        return Dataset({k: v[index] for k, v in self.arrays.items()}, labels, self.source,
                       self.synthetic)


@dataclass
class BuildContext:
    config: BuildConfig
    profile: Profile
    workdir: Path
    report: Callable[[str], None] = print
    source_info: dict[str, Any] = field(default_factory=dict)  # name, format, sha256, bytes
    float_model: Any = None  # onnx.ModelProto of the float model (after load/export/prepare)
    float_path: Path | None = None  # the same, on disk (onnxruntime tools want paths)
    inputs: list[dict[str, Any]] = field(default_factory=list)  # manifest input specs
    outputs: list[dict[str, Any]] = field(default_factory=list)
    calib: Dataset | None = None
    val: Dataset | None = None
    ranges: dict[str, Path] = field(default_factory=dict)  # method -> calibration cache file
    candidates: dict[str, Path] = field(default_factory=dict)  # method -> quantized model path
    quant_path: Path | None = None  # the chosen int8 ONNX model
    quantization: dict[str, Any] = field(default_factory=dict)  # manifest "quantization"
    validation: dict[str, Any] = field(default_factory=dict)  # manifest "validation"
    models: list[dict[str, Any]] = field(default_factory=list)  # manifest "models" (no bytes)
    model_bytes: dict[str, bytes] = field(default_factory=dict)  # member path -> bytes
    extra_manifest: dict[str, Any] = field(default_factory=dict)  # sections added by stages
    stages: list[dict[str, Any]] = field(default_factory=list)  # name, params, seconds
    warnings: list[str] = field(default_factory=list)
    output_path: Path | None = None
    artifact_bytes: int = 0
    torch_export: Any = None  # PyTorch sources: the model + exported file, for check_export

    resolved_formats: list[str] = field(default_factory=list)

    @property
    def formats(self) -> list[str]:
        """Model formats this artifact ships: as asked, else the profile's preferred one only
        (one model keeps the artifact small; ``--format both`` ships every format)."""
        if not self.resolved_formats:
            self.resolved_formats = list(self.config.formats or self.profile.runtime.formats[:1])
        return self.resolved_formats

    @property
    def activation_type(self) -> str:
        return self.config.activation_type or self.profile.runtime.activation_type

    def warn(self, message: str) -> None:
        self.warnings.append(message)
        self.report(f"warning: {message}")


def new_workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="edgekit-build-"))


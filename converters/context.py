"""What a build is asked to do (``BuildConfig``) and what it has made so far (``BuildContext``).

Stages read the config and write their results into the context; nothing else is shared.
Which stage wrote which field is recorded in ``BuildContext.produced`` (each stage declares
the fields it ``provides``, see ``pipeline.Stage``), and ``BuildContext.fork`` copies a
context without a list of fields kept by hand: containers are copied, everything else
(models, datasets, the config) is shared because stages replace those, never edit them.
"""

from __future__ import annotations

import copy
import numbers
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from edgekit.targets import Profile

from edgekit.errors import UserError
from edgekit.tempfiles import new_entry, private_root

# "pertensor": per tensor, whichever of the other three ranges quantizes its values best
CALIBRATION_METHODS = ("minmax", "percentile", "entropy", "pertensor")
FORMATS = ("onnx", "tflite")
# integer options and their least value (a count of -5 samples is a mistake, not "all")
COUNTS = {"calib_samples": 1, "val_samples": 1, "test_vectors": 0, "seed": 0,
          "sensitivity_samples": 1, "guard_steps": 0}


@dataclass(frozen=True)
class BuildConfig:
    """Everything the user asked for. CLI flags and ``build(**options)`` map onto these fields;
    any other name is a ``UserError`` listing these (``BuildConfig.from_options``)."""

    source: Any  # path to .onnx / .pt / .pt2 / "module:callable" / "file.py:Name", or an nn.Module
    target: str = "rpi4"
    output: str | None = None
    # folder of images, .npy, .npz, "synthetic", or (Python API) a numpy array / dict of arrays
    calib: Any = None
    val: Any = None  # held-out data in the same forms; default: a split of calib
    method: str = "minmax"  # one of CALIBRATION_METHODS, or "auto" to try each and keep the best
    calib_samples: int = 256  # at most this many calibration samples (the rest validate)
    val_samples: int = 1000
    preprocess: dict[str, Any] = field(default_factory=dict)  # image preprocessing overrides
    formats: list[str] | None = None  # None: the profile's preferred format
    activation_type: str | None = None  # None: the profile's
    per_channel: bool = True
    equalize: bool = True  # cross-layer equalization of conv -> relu -> depthwise pairs
    bias_correct: bool = True  # empirical bias correction of the int8 model, kept if it pays
    adaround: float = 0.0  # seconds AdaRound may learn weight rounding per candidate; 0: off
    strict_int8: bool = False
    test_vectors: int = 4
    seed: int = 0
    # PyTorch sources (issue: PyTorch models in)
    weights: str | None = None
    # shape(s) to trace a PyTorch source with; ONNX sources: {input name: dims} (or one
    # shape for a one-input model) pinning its symbolic dims (default: from the calib data)
    input_shape: tuple[int, ...] | dict[str, tuple[int, ...]] | None = None
    consts: dict[str, Any] = field(default_factory=dict)  # input name -> value frozen in
    batch_axes: dict[str, int] = field(default_factory=dict)  # input name -> sample axis
    example_inputs: Any = None
    dynamic_batch: bool = False
    input_names: list[str] | None = None
    output_names: list[str] | None = None
    # sizing (budgets and pruning); None: the profile's defaults
    budgets: dict[str, float] = field(default_factory=dict)
    prune: float | None = None
    search: bool = False
    quiet: bool = False
    sign_key: str | None = None  # Ed25519 private key file: sign the final manifest
    # accuracy you can trust (issue 14): task metric, the default-on guard, input checks
    metric: str | None = None  # top1 | detection | ctc | sqnr | module:function; None: chosen from outputs
    postprocess: str | None = None  # detection: module:function decoding outputs into boxes
    guard_time: float = 900.0  # outer safety limit (s) on the accuracy guard, whose work is fixed
    accept_accuracy_drop: bool = False  # ship a build that misses the accuracy budget (said so)
    objective: str = "accuracy"  # "latency": ship float where int8 is slower on the target (search/speed_choice.py, per layer search/layer_speed.py)
    random_weights: bool = False  # PyTorch module sources: building without --weights is intended
    # expert knobs (API only)
    keep_float: tuple[str, ...] = ()  # node names quantize leaves float (the guard sets its own)
    prune_ratios: tuple[float, ...] | None = None  # search: ratios tried; None: search.RATIOS
    search_margin: float | None = None  # search: stop early within this margin; None: default
    # where independent pieces run (converters/executor): "local", "ray" or "ray:ADDRESS";
    # calibration and validation split into this many shards off "local"
    executor: str = "local"
    shards: int = 4
    finetune_steps: int | None = None  # structured pruning's distillation steps; None: by size
    # issue 21: recovery data (same forms as calib) and its time budget in seconds
    distill_data: Any = None
    distill_time: float | None = None
    # per-group widths: "sensitivity" (measured error per saved latency) or "uniform" (every
    # group by the ratio); None: sensitivity in the budget search, uniform for a plain --prune
    prune_widths: str | None = None
    # issue 34: which channels a torch source keeps: "reconstruction" (the next 1x1 conv's
    # output rebuilt from calibration activations, then refit by least squares) or
    # "magnitude" (L2 norm of the weights); None: reconstruction
    prune_select: str | None = None
    sensitivity_samples: int = 32  # accuracy guard: calibration samples ranking the layers
    guard_steps: int = 8  # accuracy guard: rebuilds at most
    # tflite: float32 I/O in the caller's layout, quantized/transposed inside the graph on
    # XNNPACK's threads (faster on several cores; XNNPACK multiplies by 1/scale where the
    # ONNX reference divides, so an input on a rounding boundary may land one step apart)
    tflite_float_io: bool = False

    @classmethod
    def allowed(cls) -> list[str]:
        return sorted(f.name for f in fields(cls))

    @classmethod
    def from_options(cls, **options: Any) -> BuildConfig:
        """A config from keyword options; an unknown one is a ``UserError`` naming them all."""
        unknown = sorted(set(options) - set(cls.allowed()))
        if unknown:
            raise UserError(f"unknown build option(s) {unknown}; allowed: "
                            f"{', '.join(cls.allowed())}")
        for name in ("keep_float", "prune_ratios"):
            if options.get(name) is not None and not isinstance(options[name], tuple):
                if isinstance(options[name], str):
                    raise UserError(f"build option {name} expects a list, got the string "
                                    f"{options[name]!r}")
                options[name] = tuple(options[name])
        for name, least in COUNTS.items():  # the CLI's IntRange, for the Python API too
            value = options.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral)
                                      or value < least):
                raise UserError(f"build option {name} expects a whole number >= {least}, got "
                                f"{value!r}")
        return cls(**options)


@dataclass
class Dataset:
    """Model inputs by name, each with a leading sample axis, plus optional integer labels."""

    arrays: dict[str, Any]
    labels: Any = None
    source: str = ""
    synthetic: bool = False
    axes: dict[str, int] = field(default_factory=dict)  # input -> its model batch axis, if not 0
    # output -> its batch axis, if not 0 (converters/core/output_axes.py measures it): the runner
    # joins each output's runs on that axis and hands them back samples first
    out_axes: dict[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(next(iter(self.arrays.values()))) if self.arrays else 0

    def take(self, index: Any) -> Dataset:
        labels = None if self.labels is None else self.labels[index]
        return Dataset({k: v[index] for k, v in self.arrays.items()}, labels, self.source,
                       self.synthetic, dict(self.axes), dict(self.out_axes))

    def feeds(self, start: int, stop: int) -> dict[str, Any]:
        """Samples [start, stop) as model feeds: each array with its samples moved to the
        input's batch axis (a recurrent state ``[layers, N, hidden]`` keeps them on 1)."""
        import numpy as np

        return {k: v[start:stop] if not self.axes.get(k) else np.ascontiguousarray(
            np.moveaxis(v[start:stop], 0, self.axes[k])) for k, v in self.arrays.items()}


class Timings:
    """Wall-clock seconds of a build's parts (``"stages.calibrate"``, ``"accuracy_guard"``...),
    kept out of the artifact so that builds are byte-identical (``BuildResult.timings``).
    Not a dict on purpose: ``fork`` shares it, so the winner of a search records into the
    build's one record."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}


# Fields set before any stage runs (a stage may require them without a stage providing them).
GIVEN = frozenset({"config", "profile", "workdir", "report", "output_path"})


@dataclass
class BuildContext:
    config: BuildConfig
    profile: Profile
    workdir: Path
    report: Callable[[str], None] = print
    produced: dict[str, str] = field(default_factory=dict)  # field -> stage that last wrote it
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
    # per-sample parts of the validation figures (metrics.evidence.PerSample), not in the manifest:
    # "reference" (the reference PTQ's), for paired comparisons with the artifact
    evidence: dict[str, Any] = field(default_factory=dict)
    models: list[dict[str, Any]] = field(default_factory=list)  # manifest "models" (no bytes)
    model_bytes: dict[str, bytes] = field(default_factory=dict)  # member path -> bytes
    extra_manifest: dict[str, Any] = field(default_factory=dict)  # sections added by stages
    stages: list[dict[str, Any]] = field(default_factory=list)  # name, params, seconds
    warnings: list[str] = field(default_factory=list)
    output_path: Path | None = None
    artifact_bytes: int = 0
    content_key: str = ""  # sha256 of what decides the artifact's bytes (converters/core/content_key.py)
    timings: Timings = field(default_factory=Timings)  # shared by forks (see Timings)
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

    def mark(self, by: str, *names: str) -> None:
        """Record that ``by`` (a stage, or the search) produced these fields."""
        for name in names:
            self.produced[name] = by

    def available(self) -> frozenset[str]:
        return GIVEN | frozenset(self.produced)

    def fork(self, name: str) -> BuildContext:
        """An independent copy working in its own subfolder ``name``: lists and dicts are
        copied deeply (stages append to them and edit the I/O specs in place); models,
        datasets, paths and the frozen config are shared (stages replace them whole)."""
        workdir = self.workdir / name
        workdir.mkdir(parents=True, exist_ok=True)
        values = {f.name: copy.deepcopy(v) if isinstance(v := getattr(self, f.name), (list, dict))
                  else v for f in fields(self)}
        values["workdir"] = workdir
        return BuildContext(**values)


BUILD_TEMP = "edgekit-build"


@contextmanager
def temp_under(folder: Path) -> Iterator[None]:
    """Point ``tempfile`` at ``folder`` while a build runs, so that the temp folders the
    libraries make for themselves (onnxruntime's ``pre.quant.*``, ``ort.quant.*``) live in
    the build's folder and go with it, also when a killed build's folder is removed by the
    next one. ``tempfile.tempdir`` is process-wide: builds in one process run one at a time
    (the CLI and the search do)."""
    old = tempfile.tempdir
    tempfile.tempdir = str(folder)
    try:
        yield
    finally:
        tempfile.tempdir = old


def new_workdir() -> Path:
    """A fresh folder under the one build temp root (``<tmp>/edgekit-build-<uid>/<pid>-*``);
    folders of builds whose process died (SIGKILL, power cut) are removed first."""
    return new_entry(private_root(BUILD_TEMP))


"""``edgekit build``: source model -> int8 artifact sized to a target board (host only)."""

from __future__ import annotations

import json
from typing import Any

import click

from edgekit.commands.params import BATCH_AXIS, CONST_VALUE, FLOATS, IMAGE_SIZE, INPUT_SHAPES, NAMES
from edgekit.errors import UserError


@click.command(name="build")
@click.argument("source")
@click.option("--target", "-t", default=None, help="Target profile (see `edgekit targets`).")
@click.option("--calib", help="Calibration data: image folder, .npz, .npy, or 'synthetic'.")
@click.option("--val", help="Held-out validation data (default: a split of --calib).")
@click.option("--output", "-o", help="Artifact path (default: <model>.<target>.edgekit here).")
@click.option("--method", default="minmax", show_default=True,
              type=click.Choice(["minmax", "percentile", "entropy", "auto"]),
              help="Calibration method; auto tries each and keeps the closest to float.")
@click.option("--calib-samples", default=256, show_default=True, type=int)
@click.option("--format", "formats", default=None,
              type=click.Choice(["onnx", "tflite", "both"]), help="Default: the profile's.")
@click.option("--strict-int8", is_flag=True, help="Fail if any op would stay float.")
@click.option("--preprocess", "preprocess_toml", type=click.Path(exists=True, dir_okay=False),
              help="TOML with image preprocessing keys (size, resize, color, layout, scale, mean, std).")
@click.option("--size", type=IMAGE_SIZE, help="Image size HxW for an image-folder calibration, e.g. 224x224.")
@click.option("--resize", type=click.Choice(["none", "stretch", "center-crop"]))
@click.option("--color", type=click.Choice(["gray", "rgb", "bgr"]))
@click.option("--layout", type=click.Choice(["NCHW", "NHWC"]))
@click.option("--mean", type=FLOATS, help="Comma-separated means (after scaling to [0, 1]).")
@click.option("--std", type=FLOATS, help="Comma-separated standard deviations.")
@click.option("--activation-type", type=click.Choice(["uint8", "int8"]), help="Default: the profile's.")
@click.option("--weights", type=click.Path(exists=True, dir_okay=False),
              help="PyTorch state dict for a module:callable / file.py:Name source.")
@click.option("--input-shape", type=INPUT_SHAPES, help="Input shape(s), e.g. 1x3x224x224 or "
              "images=1x3x640x640,sr=1: traces a PyTorch source; pins an ONNX source's "
              "symbolic dims (default: from the calibration data).")
@click.option("--const", "consts", type=CONST_VALUE, multiple=True,
              help="Freeze an input into the graph, e.g. --const sr=16000 (repeatable).")
@click.option("--batch-axis", "batch_axes", type=BATCH_AXIS, multiple=True,
              help="An input whose samples are not on axis 0, e.g. --batch-axis state=1.")
@click.option("--dynamic-batch", is_flag=True, help="Any batch size (default: fixed batch 1).")
@click.option("--input-names", type=NAMES, help="PyTorch sources: comma-separated input names.")
@click.option("--output-names", type=NAMES, help="PyTorch sources: comma-separated output names.")
@click.option("--max-latency-ms", type=float, help="Latency budget (batch 1, profile threads).")
@click.option("--max-ram-mb", type=float, help="RAM budget: weights + activations + runtime.")
@click.option("--max-power-w", type=float, help="Sustained power budget at the profile's rate.")
@click.option("--max-storage-mb", type=float, help="Artifact size budget.")
@click.option("--max-accuracy-drop", type=float,
              help="Accuracy budget: top-1 points lost against float (or (1-cosine)x100).")
@click.option("--prune", "prune", type=float, metavar="RATIO",
              help="Prune this share of channels (torch) or weights (ONNX), e.g. 0.3.")
@click.option("--search", is_flag=True, help="Search pruning x calibration x float fallback for "
              "the profile's budgets (implied by any --max-* flag).")
@click.option("--sign", "sign_key", type=click.Path(dir_okay=False), metavar="KEY",
              help="Sign the artifact's manifest with this Ed25519 private key "
                   "(`edgekit keygen`); devices that trust its public key accept it.")
# -- accuracy you can trust (issue 14): task metric, guard, input checks
@click.option("--metric", help="Task metric: top1, detection, ctc, sqnr or module:function "
              "(default: chosen from the outputs, recorded in the manifest).")
@click.option("--postprocess", help="Detection decode as module:function (default: YOLO-style).")
@click.option("--guard-time", type=float, default=180.0, show_default=True,
              help="Seconds the accuracy guard may spend keeping sensitive layers float.")
@click.option("--accept-accuracy-drop", is_flag=True,
              help="Ship even when the accuracy budget is missed (manifest and summary say so).")
@click.option("--random-weights", is_flag=True,
              help="PyTorch module sources: build from the initial weights on purpose (no --weights).")
@click.option("--quiet", "-q", is_flag=True, help="No progress output.")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest as JSON when done.")
def command(source: str, target: str | None, calib: str | None, val: str | None,
          output: str | None, method: str, calib_samples: int, formats: str | None,
          strict_int8: bool, preprocess_toml: str | None, size: tuple[int, int] | None,
          resize: str | None,
          color: str | None, layout: str | None, mean: list[float] | None,
          std: list[float] | None,
          activation_type: str | None, weights: str | None,
          input_shape: list[tuple[int, ...]] | dict[str, tuple[int, ...]] | None,
          consts: tuple[tuple[str, list[float]], ...], batch_axes: tuple[tuple[str, int], ...],
          dynamic_batch: bool,
          input_names: list[str] | None, output_names: list[str] | None,
          max_latency_ms: float | None, max_ram_mb: float | None, max_power_w: float | None,
          max_storage_mb: float | None, max_accuracy_drop: float | None, prune: float | None,
          search: bool, sign_key: str | None, metric: str | None, postprocess: str | None,
          guard_time: float, accept_accuracy_drop: bool, random_weights: bool, quiet: bool,
          as_json: bool) -> None:
    """Build an int8 artifact of SOURCE for a target board.

    SOURCE: an .onnx file, a TorchScript .pt, an ExportedProgram .pt2, 'package.module:callable'
    or 'file.py:Name' (a class or no-argument factory returning an nn.Module).
    """
    from edgekit.converters import build as run_build
    from edgekit.converters.data import load_preprocess_toml
    from edgekit.targets import list_profiles

    if target is None:
        raise UserError(f"--target is required; allowed: {', '.join(list_profiles())}")
    preprocess: dict[str, Any] = load_preprocess_toml(preprocess_toml) if preprocess_toml else {}
    if size:
        preprocess["size"] = list(size)
    for key, value in (("resize", resize), ("color", color), ("layout", layout),
                       ("mean", mean), ("std", std)):
        if value is not None:
            preprocess[key] = value
    fmt = None if formats is None else (["tflite", "onnx"] if formats == "both" else [formats])
    torch_options: dict[str, Any] = {"weights": weights, "dynamic_batch": dynamic_batch,
                                     "input_names": input_names, "output_names": output_names}
    if isinstance(input_shape, dict):  # NAME=DIMS items
        torch_options["input_shape"] = input_shape
    elif input_shape:  # one shape, or a tuple of shapes for several inputs (BuildConfig's form)
        torch_options["input_shape"] = input_shape[0] if len(input_shape) == 1 else tuple(input_shape)
    torch_options["consts"] = {k: v[0] if len(v) == 1 else v for k, v in consts}
    torch_options["batch_axes"] = dict(batch_axes)
    budgets = {k: v for k, v in (("latency_ms", max_latency_ms), ("ram_mb", max_ram_mb),
                                 ("power_w", max_power_w), ("storage_mb", max_storage_mb),
                                 ("accuracy_drop", max_accuracy_drop)) if v is not None}
    torch_options.update(budgets=budgets, prune=prune, search=search, sign_key=sign_key)
    torch_options.update(metric=metric, postprocess=postprocess, guard_time=guard_time,
                         accept_accuracy_drop=accept_accuracy_drop, random_weights=random_weights)
    if (budgets or search) and click.get_current_context().get_parameter_source(
            "method") == click.core.ParameterSource.DEFAULT:
        method = "auto"  # the search tries every calibration method unless one is asked for
    say = (lambda m: None) if quiet else (lambda m: click.echo(m, err=True))
    result = run_build(source, target=target, calib=calib, output=output, report=say,
                       val=val, method=method, calib_samples=calib_samples, formats=fmt,
                       strict_int8=strict_int8, preprocess=preprocess,
                       activation_type=activation_type, quiet=quiet, **torch_options)
    click.echo(json.dumps(result.manifest, indent=2) if as_json else result.summary())

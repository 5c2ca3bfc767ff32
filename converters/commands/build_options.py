"""The options of ``edgekit build``, in the groups its help shows, and its config files.

Adding an option: append a ``click.Option`` to the right list in ``GROUPS`` (with a help
text) and read it in ``build.command`` from ``options``; ``--config``/``--save-config`` and
the grouped help pick it up on their own. An option left out of every group still works and
is shown under "Other options".

``--config build.toml`` takes the same names as the flags (``calib = "digits.npz"``,
``max-latency-ms = 40``), flat or in one table per group (``[calibration]``); flags given on
the command line win over the file. ``--save-config`` writes the options a build used in
that grouped form, so a build can be repeated or shared (as Olive's JSON configs are).
"""

from __future__ import annotations

import os
import tomllib
from typing import Any

import click

from edgekit.commands.params import (
    BATCH_AXIS,
    CONST_VALUE,
    FLOATS,
    IMAGE_SIZE,
    INPUT_SHAPES,
    NAMES,
)
from edgekit.commands.quiet import quiet_option
from edgekit.errors import UserError

INPUT = [
    click.Option(["--target", "-t"], help="Target board profile, e.g. rpi4 (case-insensitive; "
                 "see `edgekit targets`), or a profile .toml path. Required."),
    click.Option(["--weights"], type=click.Path(exists=True, dir_okay=False),
                 help="PyTorch state dict for a module:callable / file.py:Name source."),
    click.Option(["--input-shape"], type=INPUT_SHAPES, help="Input shape(s), e.g. 1x3x224x224 "
                 "or images=1x3x640x640,sr=1: traces a PyTorch source; pins an ONNX source's "
                 "symbolic dims (default: from the calibration data)."),
    click.Option(["--const", "consts"], type=CONST_VALUE, multiple=True,
                 help="Freeze an input into the graph, e.g. --const sr=16000 (repeatable)."),
    click.Option(["--batch-axis", "batch_axes"], type=BATCH_AXIS, multiple=True,
                 help="An input whose samples are not on axis 0, e.g. --batch-axis state=1."),
    click.Option(["--random-weights"], is_flag=True, help="PyTorch module sources: build from "
                 "the initial weights on purpose (no --weights)."),
    click.Option(["--dynamic-batch"], is_flag=True, help="Any batch size (default: fixed "
                 "batch 1)."),
    click.Option(["--input-names"], type=NAMES, help="PyTorch sources: comma-separated input names."),
    click.Option(["--output-names"], type=NAMES, help="PyTorch sources: comma-separated output "
                 "names."),
]
CALIBRATION = [
    click.Option(["--calib"], help="Calibration data: an image folder (one subfolder per class "
                 "gives labels), .npz, .npy, or 'synthetic'."),
    click.Option(["--val"], help="Held-out validation data (default: a split of --calib)."),
    click.Option(["--calib-samples"], default=256, show_default=True, type=click.IntRange(1),
                 help="Calibration samples to use at most; the rest of --calib validates."),
    click.Option(["--method"], default="minmax", show_default=True,
                 type=click.Choice(["minmax", "percentile", "entropy", "pertensor", "auto"]),
                 help="Calibration method; auto tries each and keeps the closest to float."),
    click.Option(["--preprocess", "preprocess_toml"], type=click.Path(exists=True, dir_okay=False),
                 help="TOML with image preprocessing keys (size, resize, color, layout, scale, "
                 "mean, std)."),
    click.Option(["--size"], type=IMAGE_SIZE, help="Image folders: the model's image size HxW, "
                 "e.g. 224x224 (default: from the model input)."),
    click.Option(["--resize"], type=click.Choice(["none", "stretch", "center-crop"]),
                 help="Image folders: how images of another size reach --size: none (refuse "
                 "them; the default), stretch, or center-crop (keep the aspect, crop the middle)."),
    click.Option(["--color"], type=click.Choice(["gray", "rgb", "bgr"]),
                 help="Image folders: the colour images are converted TO before the model sees "
                 "them (default: from the model's channels, 1 -> gray, 3 -> rgb); photos of "
                 "any colour mode are converted."),
    click.Option(["--layout"], type=click.Choice(["NCHW", "NHWC"]),
                 help="Image folders: the model input's axis order (default: NCHW)."),
    click.Option(["--mean"], type=FLOATS, help="Image folders: comma-separated means (after "
                 "scaling to [0, 1]), recorded for the device."),
    click.Option(["--std"], type=FLOATS, metavar="0.229,0.224,0.225", help="Image folders: comma-separated standard "
                 "deviations, recorded for the device."),
]
QUANTIZATION = [
    click.Option(["--activation-type"], type=click.Choice(["uint8", "int8"]),
                 help="Activation integer type (default: the profile's)."),
    click.Option(["--strict-int8"], is_flag=True, help="Fail if any op would stay float."),
    click.Option(["--equalize/--no-equalize"], default=True, show_default=True,
                 help="Cross-layer equalization of conv -> relu -> depthwise conv pairs."),
    click.Option(["--bias-correct/--no-bias-correct"], default=True, show_default=True,
                 help="Empirical bias correction of the int8 weights (kept only if it pays)."),
    click.Option(["--adaround"], type=click.FloatRange(0), default=0.0, show_default=True,
                 metavar="SECONDS", help="Learn each weight's rounding (AdaRound) for at most this "
                 "long per candidate; kept only if it pays (0: off)."),
    click.Option(["--prune", "prune"], type=float, metavar="RATIO",
                 help="Prune this share of channels (torch) or weights (ONNX), e.g. 0.3."),
    click.Option(["--distill-data"], help="Unlabelled data (same forms as --calib) the pruned "
                 "model is distilled on towards the dense one; without it pruning a pretrained "
                 "model costs accuracy."),
    click.Option(["--distill-time"], type=click.FloatRange(min=0, min_open=True),
                 metavar="SECONDS", help="Time budget of the pruned model's distillation."),
    click.Option(["--prune-widths"], type=click.Choice(["sensitivity", "uniform"]),
                 help="Per-layer widths: from measured sensitivity and latency share, or the "
                 "same ratio everywhere (default: sensitivity when searching a budget)."),
    click.Option(["--prune-select"], type=click.Choice(["reconstruction", "magnitude"]),
                 help="Which channels a PyTorch source keeps: those from which the next 1x1 "
                 "conv's output is rebuilt best on the calibration data, that conv then refit "
                 "by least squares (default), or those with the largest weights."),
]
ACCURACY = [
    click.Option(["--metric"], help="Task metric: top1, detection, ctc, map_iou, regions, embedding, tags, regression, "
                 "signal, sqnr or module:function (default: chosen from the outputs when they say so "
                 "clearly, else the per-slice signal; recorded in the manifest)."),
    click.Option(["--postprocess"], help="Detection decode as module:function (default: "
                 "YOLO-style)."),
    click.Option(["--guard-time"], type=float, default=900.0, show_default=True,
                 help="Outer safety limit on the accuracy guard, in seconds: its work is fixed (candidates x "
                 "samples, then at most 8 rebuilds), so the same inputs give the same artifact; when this "
                 "limit cuts the work short the summary says so."),
    click.Option(["--accept-accuracy-drop"], is_flag=True, help="Ship even when the accuracy "
                 "budget is missed (manifest and summary say so)."),
    click.Option(["--objective"], type=click.Choice(["accuracy", "latency"]), default="accuracy",
                 show_default=True, help="latency: where int8 is slower than float on the target "
                 "(measured on the host, else estimated), ship float: the whole model, or the "
                 "kinds of layers int8 slows down when that is 2% faster."),
]
BUDGETS = [
    click.Option(["--max-latency-ms"], type=float, help="Latency budget (batch 1, profile threads)."),
    click.Option(["--max-ram-mb"], type=float, help="RAM budget: weights + activations + runtime."),
    click.Option(["--max-power-w"], type=float, help="Sustained power budget at the profile's rate."),
    click.Option(["--max-storage-mb"], type=float, help="Artifact size budget."),
    click.Option(["--max-accuracy-drop"], type=float,
                 help="Accuracy budget: top-1 points lost against float (or (1-cosine)x100)."),
    click.Option(["--search"], is_flag=True, help="Search pruning x calibration x float fallback "
                 "for the profile's budgets (implied by any --max-* flag)."),
]
OUTPUT = [
    click.Option(["--output", "-o"], help="Artifact path (default: <model>.<target>.edgekit "
                 "here); a missing folder is created."),
    click.Option(["--format", "formats"], type=click.Choice(["onnx", "tflite", "both"]),
                 help="Model format(s) in the artifact (default: the profile's)."),
    click.Option(["--sign", "sign_key"], type=click.Path(dir_okay=False), metavar="KEY",
                 help="Sign the artifact's manifest with this Ed25519 private key "
                 "(`edgekit keygen`); devices that trust its public key accept it."),
    click.Option(["--golden-on", "golden_on"], metavar="TARGET",
                 help="Compute the test vectors' expected outputs under TARGET's emulated CPU "
                 "(QEMU): `edgekit verify` on that CPU then checks every element exactly."),
    click.Option(["--report", "report_html"], type=click.Path(dir_okay=False), metavar="HTML",
                 help="Also write the HTML report (per-layer SQNR, precision per layer, the "
                 "search's front; as `edgekit report`)."),
    quiet_option(),  # shared by every command (edgekit/commands/quiet.py)
    click.Option(["--json", "as_json"], is_flag=True, help="Print the manifest as JSON when done."),
    click.Option(["--timings"], is_flag=True, help="Print the wall-clock seconds of each part "
                 "of the build (stages, accuracy guard, speed checks) to stderr when done."),
    click.Option(["--save-config"], type=click.Path(dir_okay=False),
                 help="Write the options of this build to a TOML file for --config."),
]


def _executor_spec(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    kind, sep, address = value.partition(":")
    if kind == "local" and not sep or kind == "ray" and (address or not sep):
        return value
    raise click.BadParameter(f"expected local, ray or ray:HOST:PORT; got {value!r}")


SCALE = [
    click.Option(["--executor"], default="local", show_default=True, metavar="local|ray[:ADDRESS]",
                 callback=_executor_spec,
                 help="Where the search's candidates and the calibration/validation shards run: "
                 "here, a local Ray cluster, or the Ray cluster at ADDRESS (`ray start --head`; "
                 "the [ray] extra). The artifact is the same."),
    click.Option(["--shards"], type=click.IntRange(min=1), default=4, show_default=True,
                 help="Pieces the calibration and validation data are split into off local."),
]
GROUPS: dict[str, list[click.Option]] = {
    "input": INPUT, "calibration": CALIBRATION, "quantization": QUANTIZATION,
    "accuracy": ACCURACY, "budgets": BUDGETS, "output": OUTPUT, "scale": SCALE,
}
# Options that describe one run, not the build: never written by --save-config.
NOT_SAVED = frozenset({"config", "save_config", "quiet", "as_json", "timings"})


class GroupedCommand(click.Command):
    """A command whose help lists its options group by group."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        shown: set[str] = set()
        for title, options in [("config", [p for p in self.params if p.name == "config"]),
                               *GROUPS.items()]:
            rows = [r for p in options if (r := p.get_help_record(ctx))]
            shown.update(p.name or "" for p in options)
            if rows:
                with formatter.section(f"{title.capitalize()} options"):
                    formatter.write_dl(rows)
        rest = [r for p in self.get_params(ctx)
                if p.name not in shown and isinstance(p, click.Option) and (r := p.get_help_record(ctx))]
        if rest:
            with formatter.section("Other options"):
                formatter.write_dl(rest)


def _by_flag(command: click.Command) -> dict[str, click.Parameter]:
    """Every name a config key may use: the long flag without dashes, with - or _ (and the
    parameter's own name, e.g. source)."""
    names: dict[str, click.Parameter] = {}
    for param in command.params:
        if param.name in NOT_SAVED:
            continue
        names[param.name or ""] = param
        for opt in getattr(param, "opts", []):
            if opt.startswith("--"):
                names[opt[2:]] = param
                names[opt[2:].replace("-", "_")] = param
    return names


def _as_cli_value(param: click.Parameter, value: Any) -> Any:
    """A TOML value as its flag would give it: lists and shapes back to their text form."""
    if isinstance(value, list) and not getattr(param, "multiple", False):
        return ",".join("x".join(str(d) for d in v) if isinstance(v, (list, tuple)) else str(v)
                        for v in value)
    return value


def load_config(ctx: click.Context, _param: click.Parameter, path: str | None) -> str | None:
    """``--config``: the file's values become the defaults, so command-line flags win."""
    if not path:
        return None
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise UserError(f"--config {path}: cannot read it ({exc.strerror})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"--config {path}: not valid TOML: {exc}") from exc
    base = os.path.dirname(os.path.abspath(path))
    ctx.default_map = {**(ctx.default_map or {}),
                       **config_defaults(ctx.command, data, f"--config {path}", base)}
    return path


def config_defaults(command: click.Command, data: dict[str, Any], origin: str,
                    base: str) -> dict[str, Any]:
    """A config table (flag names as keys, flat or per group) as the command's default map:
    values in their flag's text form, relative paths resolved against ``base``. An unknown
    key is a ``UserError`` from ``origin`` naming the allowed ones (``edgekit matrix`` reads
    its option tables through this too)."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and key in GROUPS:
            flat.update(value)
        else:
            flat[key] = value
    known = _by_flag(command)
    unknown = sorted(k for k in flat if k not in known)
    if unknown:
        allowed = sorted({p.name for p in known.values() if p.name} - {"source"})
        raise UserError(f"{origin}: unknown key(s) {unknown}; allowed: source, "
                        + ", ".join(a.replace("_", "-") for a in allowed))
    defaults: dict[str, Any] = {}
    for key, value in flat.items():
        param = known[key]
        if param.name in PATH_KEYS and isinstance(value, str) and value != "synthetic" \
                and not os.path.isabs(value) and not os.path.exists(value):
            value = os.path.join(base, value)  # relative to the config file, as Olive's are
        defaults[param.name or key] = _as_cli_value(param, value)
    return defaults


PATH_KEYS = frozenset({"source", "calib", "val", "distill_data", "weights", "preprocess_toml",
                       "sign_key"})


def save_config(ctx: click.Context, path: str) -> None:
    """Write the options this build used (those not at their default) as grouped TOML."""
    try:
        import tomli_w
    except ImportError as exc:
        raise UserError("--save-config needs tomli-w: pip install 'edgekit-sdk[build]'") from exc
    values = ctx.params
    table: dict[str, Any] = {"source": values["source"]}
    for title, options in GROUPS.items():
        section = {}
        for param in options:
            name = param.name or ""
            if name in NOT_SAVED or values.get(name) in (None, False, (), []):
                continue
            if ctx.get_parameter_source(name) == click.core.ParameterSource.DEFAULT:
                continue
            section[max(param.opts, key=len).lstrip("-")] = _toml_value(values[name], param)
        if section:
            table[title] = section
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as handle:
        tomli_w.dump(table, handle)
    os.replace(tmp, path)  # atomic: a reader sees the old file or the whole new one


def _toml_value(value: Any, param: click.Parameter | None = None) -> Any:
    """A parsed option value back in its flag's text form (what --config reads)."""
    if param is not None and getattr(param, "multiple", False):  # --const sr=16000 items
        return [f"{k}={','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}"
                for k, v in value]
    if isinstance(value, dict):  # --input-shape images=1x3x64x64,sr=1
        return ",".join(f"{k}={_toml_value(v)}" for k, v in value.items())
    if isinstance(value, tuple):  # a size or shape
        return "x".join(str(d) for d in value)
    if isinstance(value, list):
        return [_toml_value(v) for v in value]
    return value


def attach(command: click.Command) -> click.Command:
    """Add every grouped option (and --config) to ``command``."""
    command.params.append(click.Option(
        ["--config"], type=click.Path(exists=True, dir_okay=False), is_eager=True,
        expose_value=False, callback=load_config,
        help="TOML file of build options (flag names as keys, flat or in [input], "
        "[calibration], [quantization], [budgets], [output] tables); flags given here win."))
    for options in GROUPS.values():
        command.params.extend(options)
    return command

"""``edgekit build``: source model -> int8 artifact sized to a target board (host only).

The options live in ``build_options`` (one list per help group, and the config file);
this module turns them into a ``BuildConfig`` and runs the build.
"""

from __future__ import annotations

import json
from typing import Any

import click

from edgekit.errors import Interrupted, UserError
from edgekit.tempfiles import check_writable

from .build_options import GroupedCommand, attach, save_config


def run(ctx: click.Context, source: str, **options: Any) -> None:
    """Build an int8 artifact of SOURCE for a target board.

    SOURCE: an .onnx file, a TorchScript .pt, an ExportedProgram .pt2, 'package.module:callable'
    or 'file.py:Name' (a class or no-argument factory returning an nn.Module).
    """
    from edgekit.converters import build as run_build

    o = options
    quiet = o["quiet"]
    say = (lambda m: None) if quiet else (lambda m: click.echo(m, err=True))
    for flag in ("report_html", "save_config"):  # written after the build: checked before it
        if o[flag]:
            check_writable(o[flag], f"--{flag.replace('_html', '').replace('_', '-')}")
    if o["golden_on"]:
        from edgekit.converters.emulation.golden import emulated_profile

        emulated_profile(o["golden_on"])  # before the build: a typo costs no build
    try:
        result = run_build(source, report=say, **build_kwargs(ctx, options))
    except KeyboardInterrupt:  # the build's temp files are gone; the artifact was never moved in
        raise Interrupted("no artifact written") from None
    if o["golden_on"]:
        from edgekit.converters.emulation import golden_on

        golden = golden_on(result.path, o["golden_on"], sign_key=o["sign_key"], progress=say)
        result.manifest["test_vectors"]["golden"] = golden
        say(f"test vectors' expected outputs computed under the emulated {golden['cpu']}: "
            f"`edgekit verify` on that CPU checks them exactly")
    if o["report_html"]:
        from edgekit.converters.report.html import write_report

        say(f"report written to {write_report(result.manifest, o['report_html'], result.path.name)}")
    if o["save_config"]:
        save_config(ctx, o["save_config"])
        say(f"options saved to {o['save_config']} (repeat with --config {o['save_config']})")
    if o["timings"]:
        click.echo(timings_table(result.timings, result.seconds), err=True)
    if o["as_json"]:
        click.echo(json.dumps(result.manifest, indent=2))
    elif quiet:
        click.echo(str(result.path))  # -q: the path alone, for scripts
    else:
        click.echo(result.summary())


def timings_table(timings: dict[str, float], total: float) -> str:
    """``--timings``: each timed part of the build, slowest first, with its share."""
    lines = [f"timings (wall clock, {total:.2f} s in all):"]
    for part, seconds in sorted(timings.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {part:<32} {seconds:8.2f} s  {100 * seconds / max(total, 1e-9):5.1f}%")
    return "\n".join(lines)


def build_kwargs(ctx: click.Context, options: dict[str, Any]) -> dict[str, Any]:
    """The parsed flags as ``edgekit.converters.build`` keyword options (``BuildConfig``
    fields); ``edgekit matrix`` builds its cells from these too."""
    from edgekit.converters.inputs.datasets import load_preprocess_toml
    from edgekit.targets import list_profiles

    o = options
    if o["target"] is None:
        raise UserError(f"--target is required; allowed: {', '.join(list_profiles())}")
    preprocess: dict[str, Any] = load_preprocess_toml(o["preprocess_toml"]) if o["preprocess_toml"] else {}
    if o["size"]:
        preprocess["size"] = list(o["size"])
    for key in ("resize", "color", "layout", "mean", "std"):
        if o[key] is not None:
            preprocess[key] = o[key]
    fmt = None if o["formats"] is None else (["tflite", "onnx"] if o["formats"] == "both"
                                             else [o["formats"]])
    torch_options: dict[str, Any] = {key: o[key] for key in
                                     ("weights", "dynamic_batch", "input_names", "output_names")}
    shapes = o["input_shape"]
    if isinstance(shapes, dict):  # NAME=DIMS items
        torch_options["input_shape"] = shapes
    elif shapes:  # one shape, or a tuple of shapes for several inputs (BuildConfig's form)
        torch_options["input_shape"] = shapes[0] if len(shapes) == 1 else tuple(shapes)
    torch_options["consts"] = {k: v[0] if len(v) == 1 else v for k, v in o["consts"]}
    torch_options["batch_axes"] = dict(o["batch_axes"])
    budgets = {key: o[f"max_{key}"] for key in ("latency_ms", "ram_mb", "power_w", "storage_mb",
                                               "accuracy_drop") if o[f"max_{key}"] is not None}
    torch_options.update(budgets=budgets, prune=o["prune"], search=o["search"],
                         sign_key=o["sign_key"])
    torch_options.update({key: o[key] for key in ("distill_data", "distill_time", "prune_widths",
                                                         "prune_select")})
    torch_options.update({key: o[key] for key in ("metric", "postprocess", "guard_time",
                                                  "accept_accuracy_drop", "random_weights",
                                                  "executor", "shards", "objective")})
    method = o["method"]
    if (budgets or o["search"]) and ctx.get_parameter_source(
            "method") == click.core.ParameterSource.DEFAULT:
        method = "auto"  # the search tries every calibration method unless one is asked for
    return dict(target=o["target"], calib=o["calib"], output=o["output"], val=o["val"],
                method=method, calib_samples=o["calib_samples"], formats=fmt,
                strict_int8=o["strict_int8"], preprocess=preprocess,
                equalize=o["equalize"], bias_correct=o["bias_correct"], adaround=o["adaround"],
                activation_type=o["activation_type"], quiet=o["quiet"], **torch_options)


command = attach(GroupedCommand(
    name="build", callback=click.pass_context(run), help=run.__doc__,
    params=[click.Argument(["source"])],
))

"""``edgekit estimate``: params, MACs, memory, latency and energy of a model, without building.

    edgekit estimate --target rpi4 model.onnx
    edgekit estimate --target host model.edgekit --threads 1,2 --json

Host only (reads the ONNX graph with onnx, a .tflite with the LiteRT wheel's schema); the converters are imported inside the command.
"""

from __future__ import annotations

import json

import click

from edgekit.commands.params import INPUT_SHAPES, THREAD_COUNTS


@click.command(name="estimate")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--target", "-t", default="rpi4", show_default=True,
              help="Target profile name or .toml path (see `edgekit targets`).")
@click.option("--threads", type=THREAD_COUNTS,
              help="Comma-separated thread counts (default: 1 and the profile's).")
@click.option("--no-calibrate", is_flag=True,
              help="host target: fail instead of running the micro-benchmark when uncalibrated.")
@click.option("--input-shape", "input_shape", type=INPUT_SHAPES,
              help="Pin symbolic input dims, e.g. images=1x3x640x640 (as `edgekit build`).")
@click.option("--json", "as_json", is_flag=True, help="Print the estimate as JSON.")
def command(model: str, target: str, threads: list[int] | None, no_calibrate: bool,
            input_shape: list[tuple[int, ...]] | dict[str, tuple[int, ...]] | None,
            as_json: bool) -> None:
    """Estimate MODEL (.onnx, .tflite, or a built .edgekit) on a target: float32 and int8."""
    from edgekit.converters.estimate import estimate
    from edgekit.converters.estimate.host_rates import is_cached

    if target == "host" and not no_calibrate and not is_cached():
        click.echo("host is not calibrated yet: measuring it first (about half a minute; "
                   "`edgekit calibrate-host` does this on its own)", err=True)
    est = estimate(model, target, threads=sorted(set(threads)) if threads else None,
                   calibrate=not no_calibrate, input_shapes=_named(model, input_shape))
    if as_json:
        click.echo(json.dumps(est.to_dict(), indent=2))
    else:
        click.echo(est.table())


def _named(model: str, shapes: list[tuple[int, ...]] | dict[str, tuple[int, ...]] | None
           ) -> dict[str, tuple[int, ...]] | None:
    """``--input-shape`` as {name: dims}: plain shapes name the model's inputs in order."""
    if not shapes or isinstance(shapes, dict):
        return shapes or None
    from edgekit.converters.estimate.graph import load_model
    from edgekit.converters.estimate.tflite_graph import TFLiteModel, tflite_bytes
    from edgekit.converters.graph.io_spec import describe_io, named_shapes

    tflite = tflite_bytes(model)
    if tflite is not None:  # fixed shapes: name them in order, the estimator compares
        return dict(zip(TFLiteModel(tflite, model).input_names(), shapes, strict=False))
    return named_shapes(shapes, describe_io(load_model(model))[0])

"""The ``edgekit`` command. Exit codes: 0 ok, 1 internal error, 2 user error, 3 budget not met."""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import click

from edgekit import __version__
from edgekit.errors import BudgetError, EdgekitError, UserError


class LazyGroup(click.Group):
    """Core commands are defined here; the others load from edgekit.commands on demand."""

    def _extra(self) -> dict[str, str]:
        from edgekit.commands import COMMANDS

        return {path.rsplit(".", 1)[-1].replace("_", "-"): path for path in COMMANDS}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self._extra()))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        command = super().get_command(ctx, name)
        if command is None and name in self._extra():
            command = importlib.import_module(self._extra()[name]).command
        return command


@click.group(cls=LazyGroup)
@click.version_option(__version__, prog_name="edgekit")
def cli() -> None:
    """Int8 models sized to small boards, and a runtime that adapts to heat and power."""


def _csv(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


def _floats(value: str | None) -> list[float] | None:
    return [float(v) for v in value.split(",")] if value else None


@cli.command()
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
@click.option("--size", help="Image size HxW for an image-folder calibration, e.g. 224x224.")
@click.option("--resize", type=click.Choice(["none", "stretch", "center-crop"]))
@click.option("--color", type=click.Choice(["gray", "rgb", "bgr"]))
@click.option("--layout", type=click.Choice(["NCHW", "NHWC"]))
@click.option("--mean", help="Comma-separated means (after scaling to [0, 1]).")
@click.option("--std", help="Comma-separated standard deviations.")
@click.option("--activation-type", type=click.Choice(["uint8", "int8"]), help="Default: the profile's.")
@click.option("--weights", type=click.Path(exists=True, dir_okay=False),
              help="PyTorch state dict for a module:callable / file.py:Name source.")
@click.option("--input-shape", help="PyTorch sources: input shape, e.g. 1x3x224x224 "
              "(several inputs: comma-separated).")
@click.option("--dynamic-batch", is_flag=True, help="PyTorch sources: any batch size "
              "(default: fixed batch 1).")
@click.option("--input-names", help="PyTorch sources: comma-separated input names.")
@click.option("--output-names", help="PyTorch sources: comma-separated output names.")
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
@click.option("--quiet", "-q", is_flag=True, help="No progress output.")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest as JSON when done.")
def build(source: str, target: str | None, calib: str | None, val: str | None,
          output: str | None, method: str, calib_samples: int, formats: str | None,
          strict_int8: bool, preprocess_toml: str | None, size: str | None, resize: str | None,
          color: str | None, layout: str | None, mean: str | None, std: str | None,
          activation_type: str | None, weights: str | None, input_shape: str | None,
          dynamic_batch: bool, input_names: str | None, output_names: str | None,
          max_latency_ms: float | None, max_ram_mb: float | None, max_power_w: float | None,
          max_storage_mb: float | None, max_accuracy_drop: float | None, prune: float | None,
          search: bool, quiet: bool, as_json: bool) -> None:
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
        try:
            preprocess["size"] = [int(v) for v in size.lower().split("x")]
        except ValueError:
            raise UserError(f"--size expects HxW such as 224x224, got {size!r}") from None
    for key, value in (("resize", resize), ("color", color), ("layout", layout),
                       ("mean", _floats(mean)), ("std", _floats(std))):
        if value is not None:
            preprocess[key] = value
    fmt = None if formats is None else (["tflite", "onnx"] if formats == "both" else [formats])
    torch_options: dict[str, Any] = {"weights": weights, "dynamic_batch": dynamic_batch,
                                     "input_names": _csv(input_names),
                                     "output_names": _csv(output_names)}
    if input_shape:
        from edgekit.converters.pytorch.inputs import parse_input_shape

        torch_options["input_shape"] = parse_input_shape(input_shape)
    budgets = {k: v for k, v in (("latency_ms", max_latency_ms), ("ram_mb", max_ram_mb),
                                 ("power_w", max_power_w), ("storage_mb", max_storage_mb),
                                 ("accuracy_drop", max_accuracy_drop)) if v is not None}
    torch_options.update(budgets=budgets, prune=prune, search=search)
    if (budgets or search) and click.get_current_context().get_parameter_source(
            "method") == click.core.ParameterSource.DEFAULT:
        method = "auto"  # the search tries every calibration method unless one is asked for
    say = (lambda m: None) if quiet else (lambda m: click.echo(m, err=True))
    result = run_build(source, target=target, calib=calib, output=output, report=say,
                       val=val, method=method, calib_samples=calib_samples, formats=fmt,
                       strict_int8=strict_int8, preprocess=preprocess,
                       activation_type=activation_type, quiet=quiet, **torch_options)
    click.echo(json.dumps(result.manifest, indent=2) if as_json else result.summary())


@cli.command()
@click.argument("artifact", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="The whole manifest as JSON.")
def inspect(artifact: str, as_json: bool) -> None:
    """Show an artifact's manifest as a readable table."""
    from edgekit.artifact import read_artifact
    from edgekit.inspect import manifest_table

    manifest = read_artifact(artifact).manifest
    click.echo(json.dumps(manifest, indent=2) if as_json else manifest_table(manifest))


@cli.command()
@click.argument("artifact", type=click.Path())
@click.option("--backend", help="Only this runtime (onnxruntime, litert, tflite-runtime).")
def verify(artifact: str, backend: str | None) -> None:
    """Run the bundled test vectors here and report the max error."""
    from edgekit.errors import VerificationError
    from edgekit.verify import verify_artifact

    report = verify_artifact(artifact, backend=backend)
    click.echo("\n".join(report.lines()))
    if not report.passed:
        raise VerificationError("test vectors did not reproduce within one quantization step")


@cli.command()
def targets() -> None:
    """List the target profiles."""
    from edgekit.targets import list_profiles, load_profile

    click.echo(f"{'name':<17} {'cpu':<22} {'ram':<14} {'formats':<14} description")
    for name in list_profiles():
        p = load_profile(name)
        cpu = f"{p.cpu.cores}x {p.cpu.core}" + (f" {p.cpu.freq_mhz}MHz" if p.cpu.freq_mhz else "")
        ram = "/".join(f"{r // 1024}G" if r >= 1024 else f"{r}M" for r in p.memory.ram_mb if r) or "-"
        click.echo(f"{name:<17} {cpu:<22} {ram:<14} {','.join(p.runtime.formats):<14} {p.description}")


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI and turn errors into messages and exit codes."""
    try:
        cli.main(args=argv, prog_name="edgekit", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return 2
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except BudgetError as exc:
        click.echo(f"error: {exc}", err=True)
        if exc.table:
            click.echo(exc.table, err=True)
        return exc.exit_code
    except EdgekitError as exc:
        kind = "error" if isinstance(exc, UserError) else "internal error"
        click.echo(f"{kind}: {exc}", err=True)
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return 130
    except Exception as exc:  # a bug: say so, keep the traceback for the report
        import traceback

        traceback.print_exc()
        click.echo(f"internal error (a bug in edgekit, please report): {type(exc).__name__}: {exc}",
                   err=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

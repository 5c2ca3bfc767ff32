"""``edgekit matrix builds.toml``: models x targets x option sets, one build per cell, on an
executor (this process by default, Ray with ``--executor ray[:ADDRESS]``).

A cell whose artifact is already in the output folder with the cell's content key is not
built again (deterministic builds: the same key gives the same bytes), so a second run of an
unchanged matrix is all cache hits. Cells fail alone: the others are still built, and the run
exits 1 naming every failed cell.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from edgekit.converters.matrix.cells import Cell, CellResult, Defaults, Request

from edgekit.commands.quiet import quiet_flag
from edgekit.errors import UserError, VerificationError
from edgekit.tempfiles import check_writable


class CellsFailedError(VerificationError):
    """Some cells of a matrix did not build (exit 1); the message names each with its error."""


def build_defaults(origin: str, base: Path) -> Defaults:
    """An option table read as ``edgekit build --config`` reads one (same keys, same checks)."""
    from .build import command as build_command
    from .build_options import config_defaults

    def defaults(table: dict[str, Any], where: str) -> dict[str, Any]:
        return config_defaults(build_command, table, f"{origin}: {where}", str(base))

    return defaults


def build_request(origin: str) -> Request:
    """A cell's build options exactly as ``edgekit build`` parses its flags."""
    from .build import build_kwargs
    from .build import command as build_command

    def request(source: str, target: str, output: str,
                defaults: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        try:
            ctx = build_command.make_context(
                "build", [source, "--target", target, "--output", output, "--quiet"],
                default_map=defaults)
        except click.ClickException as exc:
            raise UserError(f"{origin}: {source} on {target}: {exc.format_message()}") from exc
        params = dict(ctx.params)
        return params["source"], build_kwargs(ctx, params)

    return request


@click.command(name="matrix")
@click.argument("spec", metavar="BUILDS.TOML", type=click.Path(dir_okay=False, exists=True))
@click.option("--executor", default="local", show_default=True, metavar="local|ray[:ADDRESS]",
              help="Where the cells run: this process, or Ray tasks (a local Ray cluster, or "
              "the one at ADDRESS; needs the [ray] extra).")
@click.option("--output", "-o", type=click.Path(file_okay=False),
              help="Artifacts folder (default: the file's output key, else matrix-out beside it).")
@click.option("--rebuild", is_flag=True, help="Build every cell, even those already cached.")
@quiet_flag
def command(spec: str, executor: str, output: str | None, rebuild: bool, quiet: bool) -> None:
    """Build every cell of BUILDS.TOML (models x targets x variants) into its output folder,
    skipping cells whose artifact already has their content key, and print a summary."""
    from dataclasses import replace

    from edgekit.converters.executor import parse_executor
    from edgekit.converters.matrix import (
        cached,
        failures,
        load_spec,
        plan_cells,
        run_cell,
        summary_table,
    )

    say = (lambda m: None) if quiet else (lambda m: click.echo(m, err=True))
    matrix = load_spec(spec)
    if output:
        matrix = replace(matrix, output=Path(output).resolve())
    origin = str(matrix.path)
    planned = plan_cells(matrix, build_defaults(origin, matrix.base), build_request(origin))
    cells = [c for c in planned if isinstance(c, Cell)]
    results: list[CellResult] = [c for c in planned if isinstance(c, CellResult)]
    hits = {} if rebuild else {c.name: hit for c in cells if (hit := cached(c)) is not None}
    todo = [c for c in cells if c.name not in hits]
    try:
        matrix.output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create the output folder {str(matrix.output)!r}: {exc}") from exc
    check_writable(matrix.output, "output folder (-o)", folder=True)
    say(f"matrix: {len(planned)} cell(s), {len(hits)} cached, building "
        f"{len(todo)} on {executor} into {matrix.output}")
    if todo:
        runner = parse_executor(executor)
        try:
            results += runner.map(run_cell, todo, label="matrix", quiet=quiet)
        finally:
            runner.close()
    results += hits.values()
    order = {c.name: i for i, c in enumerate(planned)}
    results.sort(key=lambda r: order[r.name])
    click.echo(summary_table(results))
    failed = [r for r in results if r.status == "failed"]
    if failed:
        raise CellsFailedError(f"{len(failed)} of {len(results)} matrix cell(s) failed (the "
                               f"others were built):\n{failures(results)}")

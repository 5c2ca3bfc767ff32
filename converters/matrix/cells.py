"""Matrix cells: one build each, keyed by its content key, cached by the artifact it left.

``run_cell`` is a module-level function of a frozen dataclass of plain data, so that any
executor (this process, or a Ray worker on another host) can run it; it never raises, a
failed build comes back as a ``failed`` result naming its error, so one bad cell cannot stop
the others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgekit.errors import ArtifactError, EdgekitError, TargetError

from .spec import MatrixSpec, MatrixSpecError

STATUSES = ("built", "cached", "failed")
SUFFIX = ".edgekit"


@dataclass(frozen=True)
class Cell:
    """One build of the matrix: ``options`` are ``edgekit.converters.build`` keyword options
    (``BuildConfig`` fields, the artifact path as ``output``)."""

    name: str
    source: str
    options: dict[str, Any] = field(hash=False)
    key: str

    @property
    def output(self) -> Path:
        return Path(self.options["output"])


@dataclass(frozen=True)
class CellResult:
    name: str
    key: str  # "" when the cell failed before its key was known
    status: str  # one of STATUSES
    bytes: int = 0
    accuracy: str = ""
    error: str = ""


# (source, target, output, option defaults) -> (source, build keyword options): how
# `edgekit build` reads its flags, given by the command so that both parse options alike
Request = Callable[[str, str, str, dict[str, Any]], tuple[str, dict[str, Any]]]
# an option table -> the build command's default map (paths resolved); raises on unknown keys
Defaults = Callable[[dict[str, Any], str], dict[str, Any]]


def plan_cells(spec: MatrixSpec, defaults: Defaults, request: Request
               ) -> list[Cell | CellResult]:
    """Every cell of ``spec`` in order, with its key, or as a failed result when its key
    cannot be made (a signing key that does not load): reported, the others still built.
    Option tables with unknown keys or bad values fail the whole matrix (``UserError``):
    they hold for many cells."""
    from edgekit.converters import BuildConfig
    from edgekit.converters.core.content_key import content_key
    from edgekit.targets import load_profile

    common = defaults(spec.options, "options")
    cells: list[Cell | CellResult] = []
    try:
        profiles = {t: load_profile(t) for t in spec.targets}  # an unknown target: exit 2 now
    except TargetError as exc:
        raise MatrixSpecError(f"{spec.path}: targets: {exc}") from exc
    for i, model in enumerate(spec.models):
        per_model = {**common, **defaults(model.options, f"models[{i}] ({model.name})")}
        for j, variant in enumerate(spec.variants or (None,)):
            table = dict(per_model)
            if variant is not None:
                table.update(defaults(variant.options, f"variants[{j}] ({variant.name})"))
            for target in spec.targets:
                name = ".".join([model.name, target] + ([variant.name] if variant else []))
                out = spec.output / f"{name}{SUFFIX}"
                source, options = request(resolve_source(model.source, spec.base), target,
                                          str(out), table)
                try:
                    config = BuildConfig.from_options(source=source, **options)
                    key = content_key(config, profiles[target])
                except EdgekitError as exc:
                    cells.append(CellResult(name, "", "failed", error=str(exc)))
                    continue
                cells.append(Cell(name=name, source=source, options=options, key=key))
    return cells


def resolve_source(source: str, base: Path) -> str:
    """A source relative to the matrix file when it names no file from here."""
    head = source.rsplit(":", 1)[0] if ":" in source and not Path(source).exists() else source
    if Path(head).is_absolute() or Path(head).exists() or not (base / head).exists():
        return source
    return str(base / source)


def cached(cell: Cell) -> CellResult | None:
    """The cell's artifact when it exists, passes its hash checks and carries the cell's
    content key (the same key builds the same bytes); None: build it."""
    from edgekit.artifact.archive import read_artifact

    if not cell.output.is_file():
        return None
    try:
        artifact = read_artifact(cell.output)
    except ArtifactError:
        return None  # corrupt or of another schema: rebuilt, the write replaces it atomically
    if artifact.spec.content_key != cell.key:
        return None
    return CellResult(cell.name, cell.key, "cached", cell.output.stat().st_size,
                      accuracy_text(artifact.manifest))


def run_cell(cell: Cell) -> CellResult:
    """Build one cell (atomically into its output path); a failure is returned, not raised."""
    from edgekit.converters import build

    try:
        result = build(cell.source, **cell.options)
    except EdgekitError as exc:
        return CellResult(cell.name, cell.key, "failed", error=str(exc))
    except Exception as exc:  # a bug in one cell's build must not lose the others
        return CellResult(cell.name, cell.key, "failed",
                          error=f"internal error: {type(exc).__name__}: {exc}")
    return CellResult(cell.name, cell.key, "built", result.artifact_bytes,
                      accuracy_text(result.manifest))


def accuracy_text(manifest: dict[str, Any]) -> str:
    """The task metric of the int8 model beside float's, as the build's summary reads it."""
    val = manifest.get("validation") or {}
    if not val.get("verified", True):
        return "unverified (synthetic data)"
    metric = val.get("metric") or {}
    score, ref = metric.get("score"), metric.get("float_score")
    if not isinstance(score, int | float):
        return "-"

    def shown(value: float) -> str:
        return f"{value:.2%}" if metric.get("unit") == "accuracy" else f"{value:.4g}"

    text = f"{metric.get('name', 'score')} {shown(score)}"
    return text + (f" (float {shown(ref)})" if isinstance(ref, int | float) else "")

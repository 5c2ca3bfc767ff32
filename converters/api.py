"""The converters' public API: ``build`` a source into an artifact, and the plan it runs.

``build`` checks what can be checked before any work (paths, formats, the signing key), then
runs the stages of ``pipeline.STAGES`` that ``plan_for`` selects, or the budget-fitting search
(``search/``) when budgets are given. Heavy dependencies are imported by the stages.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgekit.converters.core.interrupt import preload
from edgekit.targets import load_profile

from edgekit.errors import ModelFormatError, UserError
from edgekit.tempfiles import check_writable, remove_stale_beside

from .context import BuildConfig, BuildContext, new_workdir, temp_under
from .pipeline import Pipeline, Plan, plan

__all__ = ["BuildConfig", "BuildResult", "build", "plan_for", "stages_for"]

ONNX_SUFFIXES = (".onnx",)


@dataclass
class BuildResult:
    path: Path
    manifest: dict[str, Any]
    seconds: float
    artifact_bytes: int
    warnings: list[str] = field(default_factory=list)
    # wall-clock seconds by part ("stages.calibrate", "accuracy_guard"): not in the artifact,
    # which is byte-identical from build to build
    timings: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        from .summary import summary_lines

        return "\n".join(summary_lines(self))


def source_kind(source: Any) -> str:
    """'onnx' for an ONNX file, 'torch' for everything a PyTorch export can take."""
    if isinstance(source, (str, Path)) and str(source).lower().endswith(ONNX_SUFFIXES):
        return "onnx"
    if isinstance(source, (str, Path)) and Path(str(source)).is_file():
        head = Path(str(source)).read_bytes()[:4]
        if not head.startswith(b"PK") and not str(source).endswith((".pt", ".pt2", ".pth", ".py")):
            return "onnx"  # let the ONNX loader say what is wrong with it
    return "torch"


def searching(config: BuildConfig) -> bool:
    """A budget-fitting search (converters/search/) instead of one plain pipeline run."""
    return bool(config.search or config.budgets)


def plan_for(config: BuildConfig) -> Plan:
    """The stages a build runs, in order (``pipeline.STAGES`` is the one written order)."""
    return plan(source_kind(config.source), bool(config.prune) or searching(config),
                search=searching(config))


def stages_for(config: BuildConfig) -> list[str]:
    """The stage names a build runs, in order."""
    return list(plan_for(config).names)


NAME_MAX = 255  # bytes in one file name on Linux file systems (ext4, btrfs, tmpfs)
TEMP_EXTRA = 24  # edgekit/tempfiles.py writes ".<name>.<pid>.<random>.tmp" beside the artifact


def _check_paths(source: Any, out: Path, default_name: str) -> None:
    """Path mistakes found before any work: a source or output name longer than the file
    system takes (the OS says only "File name too long"), ``-o`` naming an existing folder."""
    if isinstance(source, (str, Path)):
        for part in Path(str(source)).parts:
            if len(os.fsencode(part)) > NAME_MAX:
                raise ModelFormatError(
                    f"source {part[:40]}... : a file name of {len(os.fsencode(part))} bytes; "
                    f"expected at most {NAME_MAX} (the file system's limit): no such file can exist")
    for part in out.parts[:-1]:
        if len(os.fsencode(part)) > NAME_MAX:
            raise UserError(f"output folder name {part[:40]}... is {len(os.fsencode(part))} "
                            f"bytes; expected at most {NAME_MAX}")
    if len(os.fsencode(out.name)) > NAME_MAX - TEMP_EXTRA:
        raise UserError(
            f"output file name {out.name[:40]}... is {len(os.fsencode(out.name))} bytes; expected "
            f"at most {NAME_MAX - TEMP_EXTRA} ({NAME_MAX}, the file system's limit, less the "
            "temp file's suffix): pass -o with a shorter name")
    if out.is_dir():
        raise UserError(f"-o {out}: an existing folder; expected the artifact's file path, "
                        f"e.g. -o {out / default_name}")


def _make_output_folder(folder: Path, say: Callable[[str], None]) -> Path | None:
    """``-o new/dir/m.edgekit`` creates ``new/dir`` (as ``mkdir -p``), and says so; the folder
    is returned so that a failed build can remove it again."""
    if folder.is_dir():
        return None
    if folder.exists():
        raise UserError(f"output folder {str(folder)!r} is a file, not a folder")
    top = folder
    while not top.parent.exists():
        top = top.parent
    try:
        folder.mkdir(parents=True)
    except OSError as exc:
        raise UserError(f"cannot create the output folder {str(folder)!r}: {exc}") from exc
    say(f"created the output folder {folder}")
    return top


def build(source: Any, example_inputs: Any = None, *, target: str | None = None,
          calib: Any = None, output: str | Path | None = None,
          report: Callable[[str], None] | None = None, **options: Any) -> BuildResult:
    """Build an int8 artifact of ``source`` for ``target``. Options are ``BuildConfig`` fields.

    ``example_inputs`` (a tensor or tuple of tensors) traces a PyTorch module:
    ``build(module, torch.randn(1, 3, 224, 224), target="rpi4", calib="images/")``.
    ``calib`` (and ``val``) take a path, ``"synthetic"``, a numpy array ``[N, *input]`` for a
    one-input model, or a dict of arrays by input name (labels as ``"y"``).
    """
    if isinstance(example_inputs, str):  # build("m.onnx", "rpi4"): the old positional target
        if target is not None:
            raise UserError(f"build(): example_inputs must be tensors, got the string "
                            f"{example_inputs!r} (and target={target!r})")
        target, example_inputs = example_inputs, None
    target = target or "rpi4"
    if example_inputs is not None:
        options["example_inputs"] = example_inputs
    config = BuildConfig.from_options(source=source, target=target, calib=calib,
                                      output=str(output) if output else None, **options)
    profile = load_profile(target)
    from .stages.package import default_output

    out = Path(config.output) if config.output else default_output(source, profile.name)
    _check_paths(source, out, default_output(source, profile.name).name)
    check_writable(out, "output (-o)")  # before any work: a read-only folder costs nothing
    say = report or (lambda _m: None)
    created = _make_output_folder(out.parent, say)
    if config.formats:
        from .context import FORMATS

        bad = [f for f in config.formats if f not in FORMATS]
        if bad:
            raise UserError(f"unknown format(s) {bad}; allowed: {', '.join(FORMATS)}")
    if config.sign_key:
        from edgekit.trust.signing import load_private_key

        load_private_key(config.sign_key)  # a bad key fails now, not after the whole build
    remove_stale_beside(out)  # temp files of an interrupted build into the same path
    workdir = new_workdir()
    from edgekit.converters.core.content_key import content_key

    ctx = BuildContext(config=config, profile=profile, workdir=workdir,
                       report=say, output_path=out, content_key=content_key(config, profile))
    start = time.perf_counter()
    try:
        # the extensions' native init (onnx: ~1.8 s here) with Ctrl-C acted on meanwhile
        preload("onnx", *(("torch",) if source_kind(config.source) == "torch" else ()))
        stages = plan_for(config)
        with temp_under(workdir):  # libraries' temp folders (pre.quant.*) die with the build
            if searching(config):
                from .search import run_search

                run_search(ctx, stages)
            else:
                Pipeline(stages.names).run(ctx)
    except BaseException:
        if created is not None and not any(p.is_file() for p in created.rglob("*")):
            shutil.rmtree(created, ignore_errors=True)  # a failed build leaves no new folder
        raise
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    from edgekit.artifact.archive import read_artifact

    manifest = read_artifact(out).manifest
    return BuildResult(out, manifest, time.perf_counter() - start, ctx.artifact_bytes,
                       ctx.warnings, dict(ctx.timings.seconds))

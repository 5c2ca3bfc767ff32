"""Lay each model out in the work folder: the source file, calib.npz, val.npz, truth.npz and a
row of INDEX.md (other tools, and other people, read these files directly)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .datasets import Sets
from .exports import export_in_subprocess
from .registry import MODELS, NOT_AVAILABLE, Model
from .wheels import cache_dir, member

WORK_ENV = "EDGEKIT_REALZOO_WORK"


def work_dir() -> Path:
    env = os.environ.get(WORK_ENV)
    return Path(env) if env else cache_dir() / "work"


def model_dir(model: Model) -> Path:
    return work_dir() / model.name


def source_path(model: Model) -> Path:
    return model_dir(model) / model.filename


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    tmp = path.with_name(path.stem + ".tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


def materialize(model: Model) -> Sets:
    """The model's files in its folder (made once; later calls read them back)."""
    folder = model_dir(model)
    folder.mkdir(parents=True, exist_ok=True)
    source = source_path(model)
    if not source.is_file():
        if model.member:
            _atomic_write(source, member(model.wheels[0], model.member))
        else:
            export_in_subprocess(model.export or model.name, source)
    paths = {k: folder / f"{k}.npz" for k in ("calib", "val", "truth")}
    if all(p.is_file() for p in paths.values()):
        loaded = {k: dict(np.load(p, allow_pickle=False)) for k, p in paths.items()}
        note = (folder / "data.txt").read_text() if (folder / "data.txt").is_file() else ""
        return Sets(loaded["calib"], loaded["val"], loaded["truth"], note)
    sets = model.sets(source)
    _save_npz(paths["calib"], sets.calib)
    _save_npz(paths["val"], sets.val)
    _save_npz(paths["truth"], sets.truth)
    (folder / "data.txt").write_text(sets.note)
    return sets


def _shapes(arrays: dict[str, np.ndarray]) -> str:
    return ", ".join(f"{k} {list(v.shape)} {v.dtype}" for k, v in arrays.items())


def write_index(models: list[Model], sets: dict[str, Sets | str]) -> Path:
    """INDEX.md: per model its source, input arrays, data files, task and build flags."""
    lines = ["# Real-model suite: sources and data", "",
             "Made by `python -m tools.realzoo --materialize-only` (tools/realzoo). Each folder: "
             "the source model, `calib.npz` (64 samples, what `edgekit build --calib` reads), "
             "`val.npz` (held out, disjoint), `truth.npz` (ground truth per val sample).", "",
             "| model | task | source | calib | val | metric | extra build flags | data |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for model in models:
        got = sets.get(model.name)
        folder = model_dir(model)
        wheel = " + ".join(w.spec for w in model.wheels)
        if isinstance(got, str) or got is None:
            lines.append(f"| {model.name} | {model.task} | {wheel} | FAILED: {got} | | | | |")
            continue
        flags = " ".join(model.flags) or "-"
        lines.append(
            f"| {model.name} | {model.task} | `{source_path(model)}` ({wheel}) | "
            f"`{folder / 'calib.npz'}`: {_shapes(got.calib)} | `{folder / 'val.npz'}`: "
            f"{_shapes(got.val)} | {model.metric.name} | {flags} | {got.note} |")
    lines += ["", "Default build of each (what the suite runs; `-o` any path):", "", "```"]
    for model in models:
        flags = "".join(f" {f}" for f in model.flags)
        lines.append(f"edgekit build --target rpi4 {source_path(model)} --calib "
                     f"{model_dir(model) / 'calib.npz'}{flags} -o /tmp/{model.name}.edgekit")
    lines += ["```", "", "Not in the suite:", ""]
    lines += [f"- {name}: {why}" for name, why in NOT_AVAILABLE.items()]
    path = work_dir() / "INDEX.md"
    _atomic_write(path, ("\n".join(lines) + "\n").encode())
    return path


def materialize_all(names: list[str] | None = None) -> dict[str, Sets | str]:
    chosen = [MODELS[n] for n in names] if names else list(MODELS.values())
    out: dict[str, Sets | str] = {}
    for model in chosen:
        try:
            out[model.name] = materialize(model)
            print(f"materialized {model.name}: {_shapes(out[model.name].calib)}", flush=True)
        except Exception as exc:  # one model's failure must not stop the others
            out[model.name] = f"{type(exc).__name__}: {exc}"
            print(f"FAILED {model.name}: {out[model.name]}", flush=True)
    write_index(chosen, out)
    return out


if __name__ == "__main__":
    import sys

    materialize_all(sys.argv[1].split(",") if len(sys.argv) > 1 else None)

"""``builds.toml``, the file ``edgekit matrix`` reads, as typed records.

    output = "matrix-out"                     # artifacts folder (relative to this file)
    targets = ["rpi4", "rpi5", "rpi-zero2w"]
    [options]                                 # build options for every cell
    calib-samples = 128
    [[models]]                                # one table per model
    name = "digits"                           # optional: the source file's stem
    source = "raspberrypi/digits_cnn.onnx"
    calib = "raspberrypi/digits.npz"          # any `edgekit build` option, as in --config
    [[variants]]                              # optional: option sets, one cell each
    name = "entropy"
    method = "entropy"

Cells are models x targets x variants, named ``model.target`` (``.variant`` when variants are
given). Option keys are ``edgekit build``'s flag names (``build --config``'s reader checks
them); options of a variant win over a model's, which win over ``[options]``.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgekit.errors import UserError

TOP_KEYS = {"output": "a folder path string", "targets": "a list of target names",
            "options": "a table of build options", "models": "an array of [[models]] tables",
            "variants": "an array of [[variants]] tables"}
# Set per cell by the matrix itself, never by the file.
CELL_OWNED = frozenset({"target", "t", "output", "o"})
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


class MatrixSpecError(UserError):
    """A builds.toml that does not follow the schema above."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    source: str  # as written; resolved against the file's folder when it names no file here
    options: dict[str, Any]


@dataclass(frozen=True)
class Variant:
    name: str
    options: dict[str, Any]


@dataclass(frozen=True)
class MatrixSpec:
    path: Path
    output: Path
    targets: tuple[str, ...]
    options: dict[str, Any]
    models: tuple[ModelSpec, ...]
    variants: tuple[Variant, ...]  # () : one cell per model x target

    @property
    def base(self) -> Path:
        """The folder relative paths in the file are read from."""
        return self.path.parent


def load_spec(path: str | Path) -> MatrixSpec:
    """Read and check ``path``; ``MatrixSpecError`` names the key, what was expected and what came."""
    path = Path(path).resolve()
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise MatrixSpecError(f"{path}: cannot read it ({exc.strerror})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise MatrixSpecError(f"{path}: not valid TOML: {exc}") from exc
    return parse_spec(data, path)


def parse_spec(data: dict[str, Any], path: Path) -> MatrixSpec:
    where = str(path)
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise MatrixSpecError(f"{where}: unknown key(s) {unknown}; expected: "
                              + "; ".join(f"{k} ({v})" for k, v in TOP_KEYS.items()))
    for key in ("targets", "models"):
        if key not in data:
            raise MatrixSpecError(f"{where}: missing {key!r} (expected {TOP_KEYS[key]})")
    output = _typed(data.get("output", "matrix-out"), str, "output", TOP_KEYS["output"], where)
    targets = _typed(data["targets"], list, "targets", TOP_KEYS["targets"], where)
    if not targets or not all(isinstance(t, str) and t for t in targets):
        raise MatrixSpecError(f"{where}: targets must be {TOP_KEYS['targets']} (non-empty "
                              f"strings, e.g. [\"rpi4\", \"rpi5\"]), got {targets!r}")
    if len(set(targets)) != len(targets):
        raise MatrixSpecError(f"{where}: targets must not repeat a name, got {targets!r}")
    options = _options(data.get("options", {}), "options", where)
    models = tuple(_model(entry, i, where) for i, entry in enumerate(
        _tables(data["models"], "models", where)))
    variants = tuple(_variant(entry, i, where) for i, entry in enumerate(
        _tables(data.get("variants", []), "variants", where, allow_empty=True)))
    for kind, names in (("models", [m.name for m in models]),
                        ("variants", [v.name for v in variants])):
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise MatrixSpecError(f"{where}: {kind} names must be unique (they name the "
                                  f"cells and artifacts), got {repeated} more than once")
    out = Path(output)
    return MatrixSpec(path=path, output=out if out.is_absolute() else path.parent / out,
                      targets=tuple(targets), options=options, models=models,
                      variants=variants)


def _typed(value: Any, kind: type, key: str, expected: str, where: str) -> Any:
    if not isinstance(value, kind) or isinstance(value, bool):
        raise MatrixSpecError(f"{where}: {key} must be {expected}, got "
                              f"{type(value).__name__} {value!r}")
    return value


def _tables(value: Any, key: str, where: str, allow_empty: bool = False) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value) or (
            not value and not allow_empty):
        raise MatrixSpecError(f"{where}: {key} must be {TOP_KEYS[key]} (e.g. [[{key}]] "
                              f"with name = ...), got {type(value).__name__} {value!r}"[:300])
    return value


def _options(value: Any, key: str, where: str) -> dict[str, Any]:
    table = _typed(value, dict, key, "a table of build options", where)
    owned = sorted(set(table) & CELL_OWNED)
    if owned:
        raise MatrixSpecError(f"{where}: {key} sets {owned}; the matrix sets each cell's target "
                              "(from targets) and output (in the output folder)")
    return dict(table)


def _name(value: Any, key: str, where: str) -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise MatrixSpecError(f"{where}: {key} must be a name of letters, digits, - and _ "
                              f"(it names artifact files), got {value!r}")
    return value


def _model(entry: dict[str, Any], i: int, where: str) -> ModelSpec:
    key = f"models[{i}]"
    if "source" not in entry:
        raise MatrixSpecError(f"{where}: {key} has no source (expected source = a model file, "
                              "file.py:Name or package.module:callable)")
    source = _typed(entry["source"], str, f"{key}.source", "a string", where)
    stem = Path(source.rsplit(":", 1)[-1] if ":" in source else source).stem
    name = _name(entry.get("name", stem), f"{key}.name", where)
    options = _options({k: v for k, v in entry.items() if k not in ("name", "source")},
                       key, where)
    return ModelSpec(name=name, source=source, options=options)


def _variant(entry: dict[str, Any], i: int, where: str) -> Variant:
    key = f"variants[{i}]"
    if "name" not in entry:
        raise MatrixSpecError(f"{where}: {key} has no name (expected name = a string naming "
                              "the option set, e.g. \"entropy\")")
    name = _name(entry["name"], f"{key}.name", where)
    return Variant(name=name, options=_options({k: v for k, v in entry.items() if k != "name"},
                                               key, where))

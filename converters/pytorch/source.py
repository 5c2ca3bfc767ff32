"""Resolve a PyTorch source into an eval-mode model.

Forms (``BuildConfig.source``):

* an ``nn.Module`` (or ``ScriptModule`` / ``ExportedProgram``) object given to ``build()``;
* ``"pkg.mod:make_net"``: a factory or class (called with no arguments) or a module instance,
  imported from the current project (cwd on ``sys.path``) or an installed package;
* ``"path/net.py:Net"``: the same, from a Python file;
* ``"scripted.pt"``: a TorchScript archive (``torch.jit.save``);
* ``"exported.pt2"``: a ``torch.export`` ExportedProgram (``torch.export.save``).

``--weights`` is a state dict loaded with ``weights_only=True`` (no pickled code runs).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgekit.artifact.archive import sha256_file
from edgekit.errors import ExportError

TORCHSCRIPT_SUFFIXES = (".pt", ".pth", ".jit", ".torchscript")
EXPORTED_SUFFIXES = (".pt2",)
# Keys a training script commonly wraps a state dict in (torch.save({"state_dict": ...})).
WRAPPER_KEYS = ("state_dict", "model_state_dict", "model")
SHOW_KEYS = 5  # how many mismatching keys a message names


@dataclass
class TorchSource:
    """A resolved PyTorch model and what the manifest should say about where it came from."""

    model: Any  # nn.Module in eval mode, torch.jit.ScriptModule, or ExportedProgram
    kind: str  # "module" | "torchscript" | "exported_program"
    name: str  # for messages and the manifest: "net.py:Net", "scripted.pt", "CNN"
    form: str  # "object" | "module:callable" | "file.py:Name" | "torchscript" | "exported_program"
    file: Path | None = None  # the file holding the model (.py / .pt / .pt2), when there is one
    weights: dict[str, Any] | None = None  # {"path", "sha256", "bytes", "tensors"} when applied
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The model's class name for messages ('CNN', 'ExportedProgram')."""
        if self.kind == "exported_program":
            return "ExportedProgram"
        return getattr(self.model, "original_name", None) or type(self.model).__name__


def resolve(source: Any, weights: str | os.PathLike[str] | None = None) -> TorchSource:
    """Turn ``source`` into a ``TorchSource`` (eval mode, weights applied)."""
    import torch

    if isinstance(source, torch.export.ExportedProgram):
        src = TorchSource(source, "exported_program", "ExportedProgram", "object")
    elif isinstance(source, torch.jit.ScriptModule):
        src = TorchSource(source, "torchscript", src_name(source), "object")
    elif isinstance(source, torch.nn.Module):
        src = TorchSource(source, "module", type(source).__name__, "object")
    elif isinstance(source, (str, os.PathLike)):
        src = _from_string(str(source))
    else:
        raise ExportError(
            f"expected a model file (.onnx/.pt/.pt2), 'module:callable', 'file.py:Name' or an "
            f"nn.Module; got a {type(source).__name__}"
        )
    if weights is not None:
        if src.kind == "exported_program":
            raise ExportError(
                f"--weights {weights}: an ExportedProgram carries its own weights; load the state "
                "dict into the module before torch.export, or pass 'module:callable' instead"
            )
        src.weights = load_weights(src.model, Path(weights), src.name)
    if src.kind != "exported_program":
        src.model.eval()  # dropout off, BatchNorm on running stats: what the device computes
    return src


def src_name(model: Any) -> str:
    return getattr(model, "original_name", None) or type(model).__name__


def _from_string(text: str) -> TorchSource:
    path = Path(text)
    if path.suffix.lower() in EXPORTED_SUFFIXES or path.suffix.lower() in TORCHSCRIPT_SUFFIXES:
        if not path.is_file():
            raise ExportError(f"{text}: no such model file")
        return _load_archive(path)
    target, sep, attr = text.rpartition(":")
    if not sep or not target or not attr or not attr.isidentifier():
        raise ExportError(
            f"{text!r}: expected a model file (.onnx, TorchScript .pt, ExportedProgram .pt2), "
            "'package.module:callable' or 'file.py:Name'"
        )
    if target.endswith(".py"):
        module = _import_file(Path(target), text)
        form = "file.py:Name"
        file: Path | None = Path(target).resolve()
    else:
        module = _import_module(target, text)
        form = "module:callable"
        file = Path(module.__file__).resolve() if getattr(module, "__file__", None) else None
    obj = _attribute(module, attr, text)
    model = _instantiate(obj, text)
    return TorchSource(model, "torchscript" if _is_script(model) else "module", text, form, file)


@contextmanager
def _on_path(folder: str) -> Iterator[None]:
    """``folder`` first on sys.path while importing, so the user's project imports as itself."""
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        try:
            sys.path.remove(folder)
        except ValueError:
            pass


def _import_module(name: str, text: str) -> Any:
    with _on_path(os.getcwd()):
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as exc:
            raise ExportError(
                f"{text!r}: cannot import module {name!r} ({exc}); looked in the current folder "
                f"{os.getcwd()} and the installed packages"
            ) from exc
        except Exception as exc:  # the user's module raised while importing
            raise ExportError(
                f"{text!r}: importing module {name!r} raised {type(exc).__name__}: {exc}"
            ) from exc


def _import_file(path: Path, text: str) -> Any:
    if not path.is_file():
        raise ExportError(f"{text!r}: no such Python file {str(path)!r}")
    # a unique module name per file, so two models called net.py do not collide in sys.modules
    name = f"edgekit_user_{abs(hash(str(path.resolve())))}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ExportError(f"{text!r}: {path} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up while it runs
    with _on_path(str(path.resolve().parent)):  # sibling imports (from layers import Block)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(name, None)
            raise ExportError(
                f"{text!r}: running {path} raised {type(exc).__name__}: {exc}"
            ) from exc
    return module


def _attribute(module: Any, attr: str, text: str) -> Any:
    if hasattr(module, attr):
        return getattr(module, attr)
    import torch

    found = sorted(n for n, v in vars(module).items() if not n.startswith("_") and (
        (inspect.isclass(v) and issubclass(v, torch.nn.Module) and v.__module__ == module.__name__)
        or (inspect.isfunction(v) and v.__module__ == module.__name__)))
    # a file's module has an internal unique name (see _import_file): show the file instead
    where = (os.path.basename(module.__file__) if module.__name__.startswith("edgekit_user_")
             and getattr(module, "__file__", None) else module.__name__)
    close = difflib.get_close_matches(attr, found, n=1)
    raise ExportError(
        f"{text!r}: {where} has no class or function {attr!r}"
        + (f" (did you mean {close[0]!r}?)" if close else "")
        + f"; available: {', '.join(found) if found else 'no nn.Module classes or functions'}"
    )


def _is_script(model: Any) -> bool:
    import torch

    return isinstance(model, torch.jit.ScriptModule)


def _instantiate(obj: Any, text: str) -> Any:
    """A class or factory is called with no arguments; a module instance is used as it is."""
    import torch

    if isinstance(obj, torch.nn.Module):
        return obj
    if not callable(obj):
        raise ExportError(
            f"{text!r} names a {type(obj).__name__}, not an nn.Module, a class or a factory "
            "returning one"
        )
    try:
        model = obj()
    except TypeError as exc:
        raise ExportError(
            f"calling {text!r} with no arguments failed ({exc}); point at a factory that needs "
            "none, e.g. a function 'def make_net(): return Net(num_classes=10)'"
        ) from exc
    except Exception as exc:
        raise ExportError(f"calling {text!r} raised {type(exc).__name__}: {exc}") from exc
    if isinstance(model, torch.export.ExportedProgram):
        raise ExportError(f"{text!r} returned an ExportedProgram; save it as .pt2 and pass that")
    if not isinstance(model, torch.nn.Module):
        raise ExportError(f"calling {text!r} returned a {type(model).__name__}; expected an nn.Module")
    return model


def _load_archive(path: Path) -> TorchSource:
    """A .pt2 is an ExportedProgram; a .pt is TorchScript (a pickled module or state dict is not)."""
    import torch

    if path.suffix.lower() in EXPORTED_SUFFIXES:
        try:
            program = torch.export.load(str(path))
        except Exception as exc:
            raise ExportError(
                f"{path}: not a readable ExportedProgram (expected a file written by "
                f"torch.export.save): {type(exc).__name__}: {_first_line(exc)}"
            ) from exc
        return TorchSource(program, "exported_program", path.name, "exported_program", path.resolve())
    try:
        with warnings.catch_warnings():  # torch 2.9+ deprecates TorchScript; users still have .pt
            warnings.simplefilter("ignore", DeprecationWarning)
            model = torch.jit.load(str(path), map_location="cpu")
    except Exception as exc:
        raise ExportError(
            f"{path}: not a TorchScript archive (expected a file written by torch.jit.save; a "
            f"state dict goes in --weights with 'module:callable' or 'file.py:Name'): "
            f"{type(exc).__name__}: {_first_line(exc)}"
        ) from exc
    return TorchSource(model, "torchscript", path.name, "torchscript", path.resolve())


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:300]


# --------------------------------------------------------------------------- weights
def load_weights(model: Any, path: Path, name: str) -> dict[str, Any]:
    """Load a state dict (weights_only=True) into ``model``; every key and shape must match."""
    import torch

    if not path.is_file():
        raise ExportError(f"--weights {path}: no such file")
    try:
        state = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ExportError(
            f"--weights {path}: not a loadable state dict with weights_only=True (expected tensors "
            f"saved by torch.save(model.state_dict()); pickled code is refused): {_first_line(exc)}"
        ) from exc
    state = _unwrap(state, path)
    expected = model.state_dict()
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    shapes = [f"{k} (weights {list(state[k].shape)} vs model {list(expected[k].shape)})"
              for k in expected if k in state and hasattr(state[k], "shape")
              and tuple(state[k].shape) != tuple(expected[k].shape)]
    if missing or unexpected or shapes:
        parts = []
        for title, keys in (("missing from the weights", missing),
                            ("not in the model", unexpected), ("shape mismatch", shapes)):
            if keys:
                more = f" (+{len(keys) - SHOW_KEYS} more)" if len(keys) > SHOW_KEYS else ""
                parts.append(f"{title}: {', '.join(keys[:SHOW_KEYS])}{more}")
        raise ExportError(
            f"--weights {path.name} do not match {name} ({len(expected)} tensors expected, "
            f"{len(state)} given): " + "; ".join(parts)
        )
    model.load_state_dict(state, strict=True)
    return {"path": path.name, "sha256": sha256_file(path), "bytes": path.stat().st_size,
            "tensors": len(state)}


def _unwrap(state: Any, path: Path) -> dict[str, Any]:
    """The state dict itself, out of a checkpoint wrapper or a DataParallel 'module.' prefix."""
    import torch

    if not isinstance(state, dict):
        raise ExportError(
            f"--weights {path}: holds a {type(state).__name__}; expected a state dict "
            "(name -> tensor), as saved by torch.save(model.state_dict())"
        )
    if not any(isinstance(v, torch.Tensor) for v in state.values()):
        for key in WRAPPER_KEYS:
            if isinstance(state.get(key), dict):
                state = state[key]
                break
    if state and all(k.startswith("module.") for k in state):
        state = {k[len("module."):]: v for k, v in state.items()}
    return dict(state)

"""Shared pieces of the zoo: seeded construction, BatchNorm randomisation, channel rounding,
the common conv blocks, and the ONNX export every zoo entry goes through.

torch is imported inside functions so that ``import zoo`` (and the digits data) works without it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only; torch stays an optional, lazy import
    import torch
    from torch import nn

DEFAULT_OPSET = 18  # native opset of torch's dynamo exporter: no version-conversion pass
TORCHSCRIPT_OPSET = 17  # the legacy exporter's newest well-trodden opset


def randomize_bn(module: nn.Module, gen: torch.Generator) -> None:
    """Give every BatchNorm (1-D and 2-D) non-trivial affine params and running stats.

    Fresh BN layers are identity-like (mean 0, var 1, gamma 1, beta 0), which would let a broken
    BN fold pass unnoticed; random stats make folding mistakes show up as output mismatches.
    """
    import torch
    from torch import nn

    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.affine:
                n = m.num_features
                m.weight.copy_(0.5 + torch.rand(n, generator=gen))
                m.bias.copy_(0.1 * torch.randn(n, generator=gen))
                m.running_mean.copy_(0.1 * torch.randn(n, generator=gen))
                m.running_var.copy_(0.5 + torch.rand(n, generator=gen))


def seeded(build: Callable[[], nn.Module], seed: int) -> nn.Module:
    """Build under a forked RNG so the caller's global torch RNG state is left untouched."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = build()
        randomize_bn(module, torch.Generator().manual_seed(seed + 1))
    return module.eval()


def trained_like_init(module: nn.Module) -> None:
    """torchvision-style init (kaiming-normal convs, small-normal linears): bell-shaped weights
    like trained ones; PyTorch's default uniform init makes int8 weights look incompressible."""
    from torch import nn

    for m in module.modules():
        if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.kaiming_normal_(m.weight, mode="fan_out")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0, 0.01)
            nn.init.zeros_(m.bias)


def make_divisible(v: float, divisor: int = 8) -> int:
    """MobileNet channel rounding: nearest multiple of 8, never dropping more than 10%."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def conv_bn_act(cin: int, cout: int, k: int = 3, stride: int = 1, groups: int = 1,
                act: Callable[[], nn.Module] | None = None) -> nn.Sequential:
    """Conv (no bias, 'same' padding) + BatchNorm + optional activation: the block every
    mobile classifier and detector here is made of."""
    from torch import nn

    layers: list[nn.Module] = [
        nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


def param_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _as_tuple(example: Any) -> tuple:
    return tuple(example) if isinstance(example, (tuple, list)) else (example,)


def _dynamo_export(module: nn.Module, xs: tuple, path: Path, in_names: list[str],
                   axes: dict[str, dict[int, str]], opset: int, kwargs: dict[str, Any]) -> None:
    """torch.onnx.export(dynamo=True). Symbolic dims go in first as named ``Dim``s (exact names
    in the file; a batch traced at 1 would be specialised, so callers trace at 2); if
    torch.export rejects them (e.g. H/W that must be multiples of 32), as ``dynamic_axes``,
    which lets torch.export infer the constraints and still names the input dims."""
    import torch

    common = {"dynamo": True, "external_data": False, "opset_version": opset,
              "verbose": False, **kwargs}
    if not axes:
        torch.onnx.export(module, xs, str(path), **common)
        return
    dims: dict[str, Any] = {}
    shapes = tuple({ax: dims.setdefault(nm, torch.export.Dim(nm)) for ax, nm in
                    axes.get(n, {}).items()} or None for n in in_names)
    try:
        torch.onnx.export(module, xs, str(path), dynamic_shapes=shapes, **common)
    except Exception:  # constraint violations on named dims: let torch.export infer them
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "dynamic_axes is not recommended with dynamo"
            torch.onnx.export(module, xs, str(path), dynamic_axes=axes, **common)


def export_onnx(module: nn.Module, example_input: Any, path: str | Path,
                dynamic_batch: bool = False, input_name: str = "input",
                output_name: str = "output", opset: int = DEFAULT_OPSET, *,
                input_names: Sequence[str] | None = None,
                output_names: Sequence[str] | None = None,
                dynamic_axes: dict[str, dict[int, str]] | None = None,
                exporter: str = "dynamo") -> Path:
    """Export ``module`` (eval mode) to a single self-contained ONNX file at ``path``.

    ``example_input`` is a tensor or a tuple of tensors. ``exporter="dynamo"`` tries torch's
    dynamo exporter first and, if it fails, warns and falls back to the TorchScript exporter;
    ``exporter="torchscript"`` uses the TorchScript exporter directly (the way ultralytics and
    most published ONNX files were made: shape subgraphs, opset 17). ``dynamic_axes`` names
    symbolic input dims ({input: {axis: name}}); ``dynamic_batch`` is the old shorthand for
    dim 0 of the single input and output.
    """
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    module = module.eval()
    xs = _as_tuple(example_input)
    in_names = list(input_names or [input_name])
    out_names = list(output_names or [output_name])
    axes = dict(dynamic_axes or {})
    if dynamic_batch:
        axes.setdefault(in_names[0], {})[0] = "batch"
        if len(xs) == 1 and xs[0].shape[0] == 1:
            # torch.export specialises size-1 dims to constants, so trace a batch of 2 instead
            xs = (torch.cat([xs[0], xs[0]]),)
    if exporter not in ("dynamo", "torchscript"):
        raise ValueError(f"expected exporter 'dynamo' or 'torchscript', got {exporter!r}")
    kwargs: dict[str, Any] = {"input_names": in_names, "output_names": out_names}
    done = False
    if exporter == "dynamo":
        try:
            _dynamo_export(module, xs, path, in_names, axes, opset, kwargs)
            done = True
        except Exception as exc:  # any dynamo failure -> legacy exporter, loudly
            first = (str(exc).strip().splitlines() or [""])[0][:200]  # full text: pages long
            warnings.warn(f"dynamo ONNX export of {type(module).__name__} failed "
                          f"({type(exc).__name__}: {first}); falling back to the TorchScript "
                          f"exporter", stacklevel=2)
    if not done:
        ts_axes: dict[str, dict[int, str]] = {n: dict(a) for n, a in axes.items()}
        if dynamic_batch:
            for n in out_names:
                ts_axes.setdefault(n, {})[0] = "batch"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's "converting a tensor to a bool" notes
            torch.onnx.export(module, xs, str(path), dynamo=False,
                              opset_version=min(opset, TORCHSCRIPT_OPSET),
                              dynamic_axes=ts_axes or None, **kwargs)
    side = path.with_name(path.name + ".data")
    if side.exists():
        raise RuntimeError(f"expected weights inside {path}, got a side file {side}")
    return path

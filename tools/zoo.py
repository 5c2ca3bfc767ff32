"""Reference models for tests and benchmarks.

Random-weight models (seeded, eval mode) exist for shape and speed only; the one model with real
trained weights is the committed digits CNN (``digits_paths()`` / ``digits_data()``), made by
``examples/raspberrypi/train_digits.py``.

torch is imported inside functions so that ``digits_paths()``/``digits_data()`` work without it.
Use from tests or scripts with ``sys.path.insert(0, "<repo>/tools"); import zoo``.

CLI: ``python tools/zoo.py OUT_DIR`` exports every zoo model to OUT_DIR/<name>.onnx.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # annotations only; torch stays an optional, lazy import
    import torch
    from torch import nn

REPO = Path(__file__).resolve().parent.parent
DIGITS_DIR = REPO / "examples" / "raspberrypi"
DEFAULT_OPSET = 18  # native opset of torch's dynamo exporter: no version-conversion pass


# --------------------------------------------------------------------------- real trained model
def digits_paths() -> tuple[Path, Path]:
    """(digits_cnn.onnx, digits.npz) committed under examples/raspberrypi."""
    return DIGITS_DIR / "digits_cnn.onnx", DIGITS_DIR / "digits.npz"


def digits_data() -> tuple[np.ndarray, np.ndarray]:
    """Held-out real digits: x float32 [N,1,8,8] in [0,1], y int64 [N]."""
    _, npz = digits_paths()
    with np.load(npz) as data:
        return data["x"], data["y"]


# --------------------------------------------------------------------------- random-weight models
def _randomize_bn(module: nn.Module, gen: torch.Generator) -> None:
    """Give every BatchNorm non-trivial affine params and running stats.

    Fresh BN layers are identity-like (mean 0, var 1, gamma 1, beta 0), which would let a broken
    BN fold pass unnoticed; random stats make folding mistakes show up as output mismatches.
    """
    import torch
    from torch import nn

    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.BatchNorm2d):
                n = m.num_features
                m.weight.copy_(0.5 + torch.rand(n, generator=gen))
                m.bias.copy_(0.1 * torch.randn(n, generator=gen))
                m.running_mean.copy_(0.1 * torch.randn(n, generator=gen))
                m.running_var.copy_(0.5 + torch.rand(n, generator=gen))


def _seeded(build: Callable[[], nn.Module], seed: int) -> nn.Module:
    """Build under a forked RNG so the caller's global torch RNG state is left untouched."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = build()
        _randomize_bn(module, torch.Generator().manual_seed(seed + 1))
    return module.eval()


def _make_divisible(v: float, divisor: int = 8) -> int:
    """MobileNet channel rounding: nearest multiple of 8, never dropping more than 10%."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def mobilenetv2_like(num_classes: int = 1000, width: float = 1.0, seed: int = 0) -> nn.Module:
    """MobileNetV2 topology (Sandler et al. 2018): inverted residuals, depthwise 3x3, ReLU6, BN.

    width=1.0, 1000 classes: ~3.5M params; input [1,3,224,224] -> [1,num_classes].
    """
    from torch import nn

    def conv_bn(cin: int, cout: int, k: int, stride: int, groups: int = 1, act: bool = True):
        layers: list[nn.Module] = [
            nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout),
        ]
        if act:
            layers.append(nn.ReLU6(inplace=True))
        return nn.Sequential(*layers)

    class InvertedResidual(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
            super().__init__()
            hidden = cin * expand
            self.use_res = stride == 1 and cin == cout
            layers: list[nn.Module] = []
            if expand != 1:
                layers.append(conv_bn(cin, hidden, 1, 1))  # pointwise expand
            layers.append(conv_bn(hidden, hidden, 3, stride, groups=hidden))  # depthwise
            layers.append(conv_bn(hidden, cout, 1, 1, act=False))  # linear bottleneck
            self.conv = nn.Sequential(*layers)

        def forward(self, x):
            return x + self.conv(x) if self.use_res else self.conv(x)

    class MobileNetV2(nn.Module):
        # (expansion t, channels c, repeats n, first stride s) from the paper's Table 2
        SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                    (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]

        def __init__(self) -> None:
            super().__init__()
            cin = _make_divisible(32 * width)
            last = _make_divisible(1280 * max(1.0, width))
            layers: list[nn.Module] = [conv_bn(3, cin, 3, 2)]
            for t, c, n, s in self.SETTINGS:
                cout = _make_divisible(c * width)
                for i in range(n):
                    layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                    cin = cout
            layers.append(conv_bn(cin, last, 1, 1))
            self.features = nn.Sequential(*layers)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last, num_classes))

            # torchvision's MobileNetV2 initialisation: bell-shaped weights like trained ones
            # (PyTorch's default uniform init would make int8 weights look incompressible).
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out")
                elif isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, 0, 0.01)
                    nn.init.zeros_(m.bias)

        def forward(self, x):
            return self.classifier(self.pool(self.features(x)).flatten(1))

    return _seeded(MobileNetV2, seed)


def plain_cnn(num_classes: int = 10, seed: int = 0) -> nn.Module:
    """VGG-ish: 5 stages of conv3x3+ReLU+maxpool (16..128 ch), then a linear head.

    Input [1,3,64,64] -> [1,num_classes]; ~0.26M params.
    """
    from torch import nn

    def build() -> nn.Module:
        layers: list[nn.Module] = []
        cin = 3
        for cout in (16, 32, 64, 128, 128):
            layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2)]
            cin = cout
        # 64 / 2**5 = 2 -> 128*2*2 features
        layers += [nn.Flatten(), nn.Linear(128 * 2 * 2, num_classes)]
        return nn.Sequential(*layers)

    return _seeded(build, seed)


def transformer_block(dim: int = 64, heads: int = 4, depth: int = 2, seq: int = 16,
                      seed: int = 0) -> nn.Module:
    """Small pre-norm encoder on token embeddings: input [1,seq,dim] float -> [1,seq,dim].

    Token projection + learned positions, then ``depth`` x (LayerNorm, MultiheadAttention,
    residual, LayerNorm, GELU MLP 4x, residual), final LayerNorm. Defaults: ~105k params.
    """
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(dim)
            self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
            self.ln2 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

        def forward(self, x):
            h = self.ln1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.mlp(self.ln2(x))

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Linear(dim, dim)
            self.pos = nn.Parameter(0.02 * torch.randn(1, seq, dim))
            self.blocks = nn.Sequential(*[Block() for _ in range(depth)])
            self.norm = nn.LayerNorm(dim)

        def forward(self, tokens):
            return self.norm(self.blocks(self.embed(tokens) + self.pos))

    return _seeded(Encoder, seed)


# name -> (factory, example input shape); tests and benchmarks iterate over this
MODELS: dict[str, tuple[Callable[..., nn.Module], tuple[int, ...]]] = {
    "mobilenetv2_like": (mobilenetv2_like, (1, 3, 224, 224)),
    "plain_cnn": (plain_cnn, (1, 3, 64, 64)),
    "transformer_block": (transformer_block, (1, 16, 64)),
}


def example_input(name: str, seed: int = 0) -> torch.Tensor:
    """Seeded standard-normal input of the zoo model's shape."""
    import torch

    if name not in MODELS:
        raise KeyError(f"expected a zoo model name in {sorted(MODELS)}, got {name!r}")
    return torch.randn(MODELS[name][1], generator=torch.Generator().manual_seed(seed))


def param_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


# --------------------------------------------------------------------------- export
def export_onnx(module: nn.Module, example_input: torch.Tensor, path: str | Path,
                dynamic_batch: bool = False, input_name: str = "input",
                output_name: str = "output", opset: int = DEFAULT_OPSET) -> Path:
    """Export ``module`` (eval mode) to a single self-contained ONNX file at ``path``.

    Uses the dynamo exporter with weights embedded; if it fails, warns and falls back to the
    TorchScript exporter. With ``dynamic_batch`` dim 0 of input and output is named ``batch``.
    """
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    module = module.eval()
    x = example_input
    if dynamic_batch and x.shape[0] == 1:
        # torch.export specialises size-1 dims to constants, so trace a batch of 2 instead
        x = torch.cat([x, x])
    kwargs: dict[str, Any] = {"input_names": [input_name], "output_names": [output_name]}
    try:
        torch.onnx.export(
            module, (x,), str(path), dynamo=True, external_data=False, opset_version=opset,
            dynamic_shapes=({0: torch.export.Dim("batch")},) if dynamic_batch else None,
            verbose=False, **kwargs,
        )
    except Exception as exc:  # any dynamo failure -> legacy exporter, loudly
        first = (str(exc).strip().splitlines() or [""])[0][:200]  # the full text is pages long
        warnings.warn(f"dynamo ONNX export of {type(module).__name__} failed "
                      f"({type(exc).__name__}: {first}); falling back to the TorchScript exporter",
                      stacklevel=2)
        axes = {input_name: {0: "batch"}, output_name: {0: "batch"}} if dynamic_batch else None
        torch.onnx.export(module, (x,), str(path), dynamo=False, opset_version=min(opset, 17),
                          dynamic_axes=axes, **kwargs)
    side = path.with_name(path.name + ".data")
    if side.exists():
        raise RuntimeError(f"expected weights inside {path}, got a side file {side}")
    return path


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tools/zoo.py OUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[0])
    for name, (factory, _) in MODELS.items():
        module = factory()
        path = export_onnx(module, example_input(name), out / f"{name}.onnx")
        print(f"{name:20s} params={param_count(module):>9,d}  "
              f"onnx_bytes={path.stat().st_size:>10,d}  {path}")
    digits_onnx, digits_npz = digits_paths()
    print(f"{'digits_cnn':20s} (trained) {digits_onnx}  data {digits_npz}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

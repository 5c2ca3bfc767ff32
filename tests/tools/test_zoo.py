"""tools/zoo: every zoo model exports and its ONNX matches torch in onnxruntime (also at a second
shape where dims are dynamic) and carries the ops its design is in the zoo for; the committed
digits CNN and MTCNN's PNet are real (trained weights)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

torch = pytest.importorskip("torch")

import zoo  # noqa: E402  (tools/zoo, on sys.path via tests/conftest.py: a broken zoo fails)

REPO = Path(__file__).resolve().parents[2]

SAMPLES = REPO / "examples" / "raspberrypi" / "samples"


def run_onnx(path: Path, x: np.ndarray, input_name: str = "input") -> np.ndarray:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {input_name: x})[0]


def torch_out(module, x):
    with torch.no_grad():
        return module(x).numpy()


# --------------------------------------------------------------------------- every zoo entry
# ops each model is in the zoo for (issue 13): the export must really contain them
REQUIRED_OPS = {
    "mobilenetv2_like": {"Conv", "Clip"},
    "plain_cnn": {"MaxPool", "Gemm"},
    "transformer_block": {"LayerNormalization", "Softmax"},
    "mobilenetv3_small": {"HardSwish", "HardSigmoid", "Mul"},
    "mobilenetv3_large": {"HardSwish", "HardSigmoid", "Relu"},
    "resnet18": {"MaxPool", "Add", "Relu"},
    "shufflenetv2": {"Transpose", "Reshape", "Split", "Concat"},
    "squeezenet": {"Concat", "MaxPool"},
    "efficientnet_b0": {"Sigmoid", "Mul"},
    "yolov8n": {"Concat", "Split", "MaxPool", "Resize", "Softmax", "Shape", "Range"},
    "dbnet": {"ConvTranspose", "BatchNormalization", "Resize", "Sigmoid"},
    "crnn": {"LSTM", "ReduceMean", "Pow", "Sqrt", "Div", "Softmax"},
    "silero_like_vad": {"If", "Equal"},
    "mtcnn_pnet": {"PRelu", "MaxPool", "Softmax"},
    "crepe_tiny": {"BatchNormalization", "MaxPool", "Sigmoid"},
}
# a second shape for entries with dynamic dims: input name -> {axis: size}
SECOND_SHAPE = {
    "yolov8n": {"images": {2: 256, 3: 384}},
    "dbnet": {"x": {2: 256, 3: 224}},
    "crnn": {"x": {3: 200}},
    "silero_like_vad": {"input": {0: 3}, "state": {1: 3}},
    "mtcnn_pnet": {"input": {2: 48, 3: 64}},
}


def run_all(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def torch_all(module, xs) -> list[np.ndarray]:
    with torch.no_grad():
        out = module(*xs)
    return [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]


def resized(entry, sizes: dict[str, dict[int, int]]) -> tuple:
    """The entry's example inputs regenerated at other sizes along its dynamic axes."""
    gen = torch.Generator().manual_seed(7)
    made = []
    for x, name in zip(entry.example_inputs(), entry.input_names, strict=True):
        shape = list(x.shape)
        for axis, size in sizes.get(name, {}).items():
            shape[axis] = size
        made.append(x if not shape else 0.5 * torch.randn(shape, generator=gen).to(x.dtype))
    return tuple(made)


def assert_close(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert [g.shape for g in got] == [w.shape for w in want]
    for g, w in zip(got, want, strict=True):
        scale = max(1.0, float(np.abs(w).max()))
        assert float(np.abs(g - w).max()) <= 2e-4 * scale


def test_every_entry_is_tested() -> None:
    assert set(REQUIRED_OPS) == set(zoo.ENTRIES)
    assert set(SECOND_SHAPE) == {n for n, e in zoo.ENTRIES.items() if e.dynamic_axes}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow)
                                  if n in ("mobilenetv2_like", "resnet18", "efficientnet_b0",
                                           "mobilenetv3_large", "yolov8n") else n
                                  for n in zoo.ENTRIES])
def test_zoo_model_exports_and_matches_torch(name: str, tmp_path: Path) -> None:
    entry = zoo.entry(name)
    module = entry.factory()
    assert not module.training
    xs = entry.example_inputs()
    path = entry.write_onnx(tmp_path / f"{name}.onnx", module)

    assert path == tmp_path / f"{name}.onnx" and path.is_file()
    assert not path.with_name(path.name + ".data").exists(), "weights must live inside the file"
    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    assert model.opset_import[0].version == entry.opset
    ops = {n.op_type for n in model.graph.node}
    ops |= {n.op_type for node in model.graph.node for a in node.attribute if a.g.node
            for n in a.g.node}  # inside If branches
    assert REQUIRED_OPS[name] <= ops, f"missing {REQUIRED_OPS[name] - ops}"
    assert [i.name for i in model.graph.input] == list(entry.input_names)
    assert [o.name for o in model.graph.output] == list(entry.outputs)
    for i, dims in ((i, entry.dynamic_axes.get(i.name, {})) for i in model.graph.input):
        shape = i.type.tensor_type.shape.dim
        assert {a for a, d in enumerate(shape) if d.dim_param} == set(dims), i.name

    want = torch_all(module, xs)
    # random weights can still collapse to a constant output; a zoo model must do real work
    assert float(np.concatenate([w.ravel() for w in want]).std()) > 1e-4
    assert_close(run_all(path, {n: x.numpy() for n, x in zip(entry.input_names, xs,
                                                              strict=True)}), want)
    if name in SECOND_SHAPE:
        xs2 = resized(entry, SECOND_SHAPE[name])
        assert_close(run_all(path, {n: x.numpy() for n, x in zip(entry.input_names, xs2,
                                                                  strict=True)}),
                     torch_all(module, xs2))


def test_calibration_layout_follows_batch_axes() -> None:
    vad = zoo.entry("silero_like_vad")
    assert vad.calib_shape(5) == {"input": (5, 512), "sr": (5,), "state": (2, 5, 128)}
    data = vad.calib_data(5)
    assert {k: v.shape for k, v in data.items()} == vad.calib_shape(5)
    assert data["sr"].dtype == np.int64 and set(data["sr"].tolist()) == {16000}
    # sample 3 of the state array is the fourth seeded example's state
    np.testing.assert_array_equal(data["state"][:, 3:4], vad.example_inputs(3)[2].numpy())
    assert zoo.entry("resnet18").calib_shape(4) == {"input": (4, 3, 224, 224)}


def test_yolov8n_packs_pixel_boxes_with_probabilities() -> None:
    entry = zoo.entry("yolov8n")
    module = entry.factory()
    assert 3_000_000 <= zoo.param_count(module) <= 3_400_000  # the n scale: ~3.2M
    (out,) = torch_all(module, entry.example_inputs())
    assert out.shape == (1, 84, 40 * 40 + 20 * 20 + 10 * 10)
    boxes, scores = out[0, :4], out[0, 4:]
    assert 0.0 <= scores.min() and scores.max() <= 1.0 and scores.mean() < 0.05
    assert boxes[:2].max() > 100  # centres in input pixels, not 0..1


def test_mtcnn_pnet_has_the_trained_weights() -> None:
    from zoo import mtcnn

    state = torch.load(mtcnn.facenet_weights("pnet"), weights_only=True)
    module = zoo.entry("mtcnn_pnet").factory()
    for key, value in module.state_dict().items():
        assert torch.equal(value, state[key]), key
    assert zoo.entry("mtcnn_pnet").trained


def test_param_counts_match_the_published_designs() -> None:
    expected = {"mobilenetv3_small": (2.4e6, 2.6e6), "mobilenetv3_large": (5.3e6, 5.6e6),
                "resnet18": (11.6e6, 11.8e6), "shufflenetv2": (2.2e6, 2.4e6),
                "squeezenet": (1.2e6, 1.3e6), "efficientnet_b0": (5.2e6, 5.4e6)}
    for name, (lo, hi) in expected.items():
        n = zoo.param_count(zoo.entry(name).factory())
        assert lo <= n <= hi, f"{name}: expected {lo:,.0f}-{hi:,.0f} params, got {n:,}"


def test_mobilenetv2_like_is_a_real_mobilenetv2(tmp_path: Path) -> None:
    from torch import nn

    module = zoo.mobilenetv2_like()
    n = zoo.param_count(module)
    assert 3_000_000 <= n <= 4_000_000, f"expected 3.0-4.0M params, got {n:,}"
    convs = [m for m in module.modules() if isinstance(m, nn.Conv2d)]
    depthwise = [c for c in convs if c.groups == c.in_channels == c.out_channels > 1]
    assert len(depthwise) == 17  # one per inverted-residual block
    assert sum(isinstance(m, nn.ReLU6) for m in module.modules()) == 35
    assert sum(isinstance(m, nn.BatchNorm2d) for m in module.modules()) == len(convs)
    assert not module.training
    # width multiplier really thins the network
    assert zoo.param_count(zoo.mobilenetv2_like(num_classes=10, width=0.5)) < n / 2


def test_zoo_is_seeded_and_leaves_global_rng_alone() -> None:
    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    a, b = zoo.plain_cnn(), zoo.plain_cnn()
    after = torch.rand(3)
    assert torch.equal(before, after), "building a zoo model must not consume the global RNG"
    for pa, pb in zip(a.state_dict().values(), b.state_dict().values(), strict=True):
        assert torch.equal(pa, pb)
    c = zoo.plain_cnn(seed=1)
    assert not torch.equal(a[0].weight, c[0].weight)


def test_batchnorm_stats_are_randomized() -> None:
    from torch import nn

    bns = [m for m in zoo.mobilenetv2_like().modules() if isinstance(m, nn.BatchNorm2d)]
    # identity-like BN would hide a broken fold in the prepare stage
    assert all(float(bn.running_var.std()) > 0 for bn in bns)
    assert all(float(bn.running_mean.abs().max()) > 0 for bn in bns)


def test_transformer_block_shape_and_size() -> None:
    from torch import nn

    module = zoo.transformer_block()
    assert 80_000 <= zoo.param_count(module) <= 130_000
    kinds = {type(m) for m in module.modules()}
    assert {nn.LayerNorm, nn.MultiheadAttention, nn.GELU} <= kinds
    x = zoo.example_input("transformer_block")
    assert torch_out(module, x).shape == (1, 16, 64)


def test_export_dynamic_batch_and_io_names(tmp_path: Path) -> None:
    module = zoo.plain_cnn()
    path = zoo.export_onnx(module, zoo.example_input("plain_cnn"), tmp_path / "dyn.onnx",
                           dynamic_batch=True, input_name="pixels", output_name="scores")
    graph = onnx.load(str(path)).graph
    assert [i.name for i in graph.input] == ["pixels"]
    assert [o.name for o in graph.output] == ["scores"]
    assert graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    x = torch.randn(3, 3, 64, 64, generator=torch.Generator().manual_seed(5))
    got = run_onnx(path, x.numpy(), "pixels")
    assert got.shape == (3, 10)
    np.testing.assert_allclose(got, torch_out(module, x), atol=1e-5, rtol=1e-4)


def test_export_falls_back_to_torchscript_with_a_warning(tmp_path: Path) -> None:
    class DataDependent(torch.nn.Module):
        # .item() + python branch: torch.export refuses it, the tracer bakes in one branch
        def forward(self, x):
            return x * 2.0 if x.sum().item() > 0 else x - 1.0

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = zoo.export_onnx(DataDependent(), torch.ones(1, 4), tmp_path / "fb.onnx")
    assert any("falling back to the TorchScript exporter" in str(w.message) for w in caught)
    np.testing.assert_allclose(run_onnx(path, np.full((1, 4), 3.0, np.float32)), 6.0)


# --------------------------------------------------------------------------- trained digits CNN
def test_digits_files_exist_and_are_self_contained() -> None:
    onnx_path, npz_path = zoo.digits_paths()
    assert onnx_path.is_file() and npz_path.is_file()
    assert not onnx_path.with_name(onnx_path.name + ".data").exists()
    model = onnx.load(str(onnx_path))
    onnx.checker.check_model(model)
    assert model.opset_import[0].version >= 17
    (inp,), (out,) = model.graph.input, model.graph.output
    assert (inp.name, out.name) == ("image", "logits")
    in_dims = [d.dim_param or d.dim_value for d in inp.type.tensor_type.shape.dim]
    out_dims = [d.dim_param or d.dim_value for d in out.type.tensor_type.shape.dim]
    assert in_dims == ["batch", 1, 8, 8] and out_dims == ["batch", 10]
    assert onnx_path.stat().st_size < 1_000_000


def test_digits_data_is_the_real_held_out_split() -> None:
    from sklearn.datasets import load_digits

    x, y = zoo.digits_data()
    assert x.dtype == np.float32 and y.dtype == np.int64
    assert x.shape == (540, 1, 8, 8) and y.shape == (540,)  # 30% of 1,797
    assert float(x.min()) == 0.0 and float(x.max()) == 1.0
    assert set(np.unique(y)) == set(range(10))
    # every held-out image is a real scikit-learn digit (values are v/16 for integer v)
    real = {(img / 16.0).astype(np.float32).tobytes() for img in load_digits().images}
    assert all(img[0].tobytes() in real for img in x)


def test_digits_onnx_accuracy_on_held_out_data() -> None:
    onnx_path, _ = zoo.digits_paths()
    x, y = zoo.digits_data()
    logits = run_onnx(onnx_path, x, "image")
    assert logits.shape == (len(y), 10)
    acc = float((logits.argmax(1) == y).mean())
    assert acc >= 0.95, f"expected held-out accuracy >= 0.95, got {acc:.4f}"


def test_digit_samples_are_labelled_pngs_the_model_reads() -> None:
    from PIL import Image

    x, y = zoo.digits_data()
    pngs = sorted(SAMPLES.glob("*.png"))
    assert len(pngs) == 20
    assert (SAMPLES / "README.md").is_file()
    batch, labels = [], []
    for png in pngs:
        m = re.fullmatch(r"(\d)_(\d{4})\.png", png.name)
        assert m, f"expected <label>_<index>.png, got {png.name}"
        label, index = int(m.group(1)), int(m.group(2))
        img = Image.open(png)
        assert (img.mode, img.size) == ("L", (8, 8))
        pixels = np.asarray(img)
        assert y[index] == label
        np.testing.assert_array_equal(pixels, np.round(x[index, 0] * 255).astype(np.uint8))
        batch.append(pixels.astype(np.float32)[None] / 255.0)
        labels.append(label)
    assert set(labels) == set(range(10))
    preds = run_onnx(zoo.digits_paths()[0], np.stack(batch), "image").argmax(1)
    assert preds.tolist() == labels

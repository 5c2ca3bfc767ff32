"""One distribution, one namespace: edgekit, edgekit.converters, edgekit.targets."""

from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).parent
VERSION = "0.1.0"


def packages_under(top: str, prefix: str) -> list[str]:
    """Python packages below the folder ``top``, named under ``prefix``."""
    found = [prefix]
    for init in sorted((ROOT / top).rglob("__init__.py")):
        rel = init.parent.relative_to(ROOT / top)
        if rel.parts:
            found.append(".".join((prefix, *rel.parts)))
    return found


packages = (
    packages_under("edgekit", "edgekit")
    + packages_under("converters", "edgekit.converters")
    + packages_under("targets", "edgekit.targets")
)

ONNXRUNTIME = "onnxruntime>=1.17"
setup(
    name="edgekit",
    version=VERSION,
    description="Int8, pruned, budget-sized models for Raspberry Pi-class boards, and a runtime that adapts to heat and power",
    long_description=(ROOT / "README.md").read_text() if (ROOT / "README.md").exists() else "",
    long_description_content_type="text/markdown",
    python_requires=">=3.11",  # tomllib (target profiles)
    packages=packages,
    package_dir={
        "edgekit": "edgekit",
        "edgekit.converters": "converters",
        "edgekit.targets": "targets",
    },
    package_data={
        "edgekit.targets": ["*.toml"],
        "edgekit.converters.emulation": ["sysroot-wheels.txt"],  # the sysroot's hash-pinned wheels
    },
    # The device needs numpy and click plus one runtime; the host commands (build, estimate,
    # calibrate-host, emulate) need the [build] extra (edgekit.commands.BUILD_EXTRA).
    install_requires=["numpy>=1.23", "click>=8.0"],
    extras_require={
        # on the device: numpy plus one runtime
        "onnx": [ONNXRUNTIME],
        "litert": ["ai-edge-litert>=1.2"],
        "tflite": ["tflite-runtime>=2.13", "numpy<2"],
        "image": ["pillow>=9"],
        # signed artifacts (edgekit.signing): Ed25519 from a well-kept library, aarch64 wheels
        "sign": ["cryptography>=42"],
        # on the host
        "build": [
            "onnx>=1.16",
            "onnxruntime>=1.32",  # quantize_static(calibration_cache_path=...): one calibration, many candidates
            "pillow>=9",
            "tqdm>=4.60",
            "flatbuffers>=23.5",
            "ai-edge-litert>=1.2",
            "platformdirs>=3",  # cache folders (sysroot, host rates)
            "filelock>=3.12",  # one sysroot builder at a time
            "rapidfuzz>=3.0",  # edit distance for the ctc metric's character error rate
            "cryptography>=42",  # edgekit build --sign, edgekit keygen
            "tomli-w>=1.0",  # edgekit build --save-config writes the TOML --config reads
        ],
        # pin torch where this project installs it (README, .ci/run): torch==2.13.0
        "torch": ["torch>=2.4", "onnxscript>=0.1", "torch-pruning>=1.4"],
        # and digit-recognizer-py (a trained MNIST CNN) and facenet-pytorch (MTCNN's trained
        # PNet weights for tools/zoo) installed with --no-deps by tools/test.sh: their declared
        # torchvision would replace the pinned torch
        # ruff pinned: CI runs `ruff check .`, and new releases add rules
        # hypothesis: the bounded artifact fuzz (tests/edgekit/test_loader_bounds.py)
        "test": ["pytest>=7", "scikit-learn>=1.3", "ruff==0.17.6", "hypothesis>=6.100",
                 "cryptography>=42"],
    },
    entry_points={"console_scripts": ["edgekit=edgekit.cli:main"]},
)

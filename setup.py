"""One distribution, one namespace: edgekit, edgekit.converters, edgekit.targets.

The distribution is named ``edgekit-sdk``; the import name stays ``edgekit``. On the package
index the name ``edgekit`` belongs to an unrelated project (a Cloudflare Workers SDK), so
``pip install edgekit`` would install a stranger's code. Name check, 2026-12-03, with this
machine's configured index: ``pip index versions edgekit-sdk`` and
``pip download --no-deps edgekit-sdk`` both answered "No matching distribution found"
(as did ``edgekit-runtime``). That index did not list ``edgekit`` either, so it is not the
whole of PyPI: check again before the first upload.

``EDGEKIT_DEVICE_ONLY=1`` builds the device wheel: ``edgekit`` and ``edgekit.targets`` only,
no converters (what ``edgekit bundle`` ships to a board).
"""

import os
import re
from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).parent
# one version, in edgekit/__init__.py (read, not imported: setup.py runs before the install)
VERSION = re.search(r'^__version__ = "([^"]+)"', (ROOT / "edgekit" / "__init__.py").read_text(),
                    re.M).group(1)


def packages_under(top: str, prefix: str) -> list[str]:
    """Python packages below the folder ``top``, named under ``prefix``."""
    found = [prefix]
    for init in sorted((ROOT / top).rglob("__init__.py")):
        rel = init.parent.relative_to(ROOT / top)
        if rel.parts:
            found.append(".".join((prefix, *rel.parts)))
    return found


DEVICE_ONLY = os.environ.get("EDGEKIT_DEVICE_ONLY") == "1"
packages = packages_under("edgekit", "edgekit") + packages_under("targets", "edgekit.targets")
package_dir = {"edgekit": "edgekit", "edgekit.targets": "targets"}
package_data = {"edgekit.targets": ["*.toml"]}
if not DEVICE_ONLY:
    packages += packages_under("converters", "edgekit.converters")
    package_dir["edgekit.converters"] = "converters"
    # the sysroot's hash-pinned wheels; the bundle's templates
    package_data["edgekit.converters.emulation"] = ["sysroot-wheels.txt"]
    package_data["edgekit.converters.bundle"] = ["templates/*"]

ONNXRUNTIME = "onnxruntime>=1.17"
setup(
    name="edgekit-sdk",  # not "edgekit": see the module docstring
    version=VERSION,
    description="Int8, pruned, budget-sized models for Raspberry Pi-class boards, and a runtime that adapts to heat and power",
    long_description=(ROOT / "README.md").read_text() if (ROOT / "README.md").exists() else "",
    long_description_content_type="text/markdown",
    license="Apache-2.0",  # the LICENSE file
    license_files=["LICENSE"],
    classifiers=["License :: OSI Approved :: Apache Software License"],
    python_requires=">=3.11",  # tomllib (target profiles)
    packages=packages,
    package_dir=package_dir,
    package_data=package_data,
    # The device needs numpy and click plus one runtime; the host commands (build, estimate,
    # calibrate-host, emulate) need the [build] extra (edgekit.commands.BUILD_EXTRA).
    install_requires=["numpy>=1.23", "click>=8.0"],
    extras_require={
        # on the device: numpy plus one runtime
        "onnx": [ONNXRUNTIME],
        "litert": ["ai-edge-litert>=1.2"],
        "tflite": ["tflite-runtime>=2.13", "numpy<2"],
        "image": ["pillow>=9"],
        # signed artifacts (edgekit.trust.signing): Ed25519 from a well-kept library, aarch64 wheels
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
            "onnxscript>=0.5",  # its constant folder inlines the If branches a --const decides
            "tflite2onnx>=0.4.1",  # a float .tflite source as ONNX (pure Python: no TensorFlow)
            "scipy>=1.10",  # exact binomial / bootstrap intervals of accuracy figures (metrics/evidence.py)
        ],
        # --executor ray: the build's shards and candidates as Ray tasks (converters/executor)
        "ray": ["ray==2.60.0"],
        # pin torch where this project installs it (README, .ci/run): torch==2.13.0
        "torch": ["torch>=2.4", "onnxscript>=0.1", "torch-pruning>=1.4"],
        # and digit-recognizer-py (a trained MNIST CNN) and facenet-pytorch (MTCNN's trained
        # PNet weights for tools/zoo) installed with --no-deps by tools/test.sh: their declared
        # torchvision would replace the pinned torch
        # ruff pinned: CI runs `ruff check .`, and new releases add rules
        # hypothesis: the bounded artifact fuzz (tests/edgekit/artifact/test_loader_bounds.py)
        # pytest-xdist: tools/test.sh runs the suite on every core (CI's 15-minute budget)
        # psutil: the Ray test finds the worker to SIGKILL by its process title
        "test": ["pytest>=7", "pytest-xdist>=3.5", "scikit-learn>=1.3", "ruff==0.17.6",
                 "hypothesis>=6.100", "cryptography>=42", "psutil>=5.9"],
        # tools/benchmarks/bench_prune_budget.py's face crops: LFW faces and photos shipped in the wheel
        "bench": ["scikit-image>=0.22"],
    },
    entry_points={"console_scripts": ["edgekit=edgekit.cli:main"]},
)

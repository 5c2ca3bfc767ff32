#!/usr/bin/env bash
# Set up the host tools and run the main job on the embedded default: build the committed
# digits CNN (trained on scikit-learn's real handwritten digits) for a Raspberry Pi 4,
# show its manifest, and check its bundled test vectors on this machine.
# Everything is installed into .venv in the repository (see tools/venv.sh); afterwards
# `source .venv/bin/activate` puts `edgekit` on the PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/venv.sh
edgekit_venv
python -m pip install -q --disable-pip-version-check -e ".[build]"
edgekit build --target rpi4 examples/raspberrypi/digits_cnn.onnx \
  --calib examples/raspberrypi/digits.npz -o digits.rpi4.edgekit
edgekit inspect digits.rpi4.edgekit
edgekit verify digits.rpi4.edgekit

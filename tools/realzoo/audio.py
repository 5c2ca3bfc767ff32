"""Real speech that ships in a wheel: useful-moonshine-onnx's ``assets/beckett.wav`` (a person
reading Samuel Beckett, 16-bit mono). No music recording was found in a wheel; none is used."""

from __future__ import annotations

import io
import wave
from functools import cache

import numpy as np

from . import pins
from .wheels import member


@cache
def beckett() -> tuple[np.ndarray, int]:
    """The recording as float32 in [-1, 1] and its sample rate."""
    with wave.open(io.BytesIO(member(pins.MOONSHINE_ONNX, "moonshine_onnx/assets/beckett.wav"))) as w:
        rate, channels, width = w.getframerate(), w.getnchannels(), w.getsampwidth()
        raw = w.readframes(w.getnframes())
    if width != 2:
        raise ValueError(f"beckett.wav: expected 16-bit samples, got {8 * width}-bit")
    samples = np.frombuffer(raw, "<i2").astype(np.float32) / 32768.0
    return samples.reshape(-1, channels).mean(axis=1), rate


def resampled(samples: np.ndarray, rate: int, target: int) -> np.ndarray:
    """Band-limited resampling (scipy's polyphase filter) to ``target`` Hz."""
    from math import gcd

    from scipy.signal import resample_poly

    if rate == target:
        return samples
    g = gcd(rate, target)
    return resample_poly(samples, target // g, rate // g).astype(np.float32)

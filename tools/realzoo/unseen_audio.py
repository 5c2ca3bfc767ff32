"""The "unseen" audio models: openWakeWord 0.4.0's shared front end, the last release whose
wheel ships its models (``openwakeword/resources/models/``; 0.5+ download them at run time).

- ``melspectrogram.onnx``: 16 kHz audio (int16 values as float32) -> log-mel frames [T, 32]
  (an STFT written as Conv + MatMul, then a log and a clip at the frame's max - 80 dB).
- ``embedding_model.onnx``: Google's speech_embedding CNN, 76 mel frames -> a 96-d embedding
  that every wake-word head reads.

Speech: the moonshine recordings (moonshine-voice 0.1.5 and useful-moonshine-onnx, see
``moonshine.recordings``). Calibration from two_cities.wav, validation from the others.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np

from . import pins
from .datasets import CALIB_COUNT, Sets
from .metrics import Outputs, Scorer
from .moonshine import CHUNK, recordings
from .wheels import extracted

OWW_MODELS = "openwakeword/resources/models/"
WINDOW, VAL_STEP = 76, 38  # openWakeWord's embedding window (frames); validation hop
DB_TOLERANCE = 1.0  # a mel value within 1 dB of float's is kept


def _int16_scale(samples: np.ndarray) -> np.ndarray:
    """openWakeWord feeds int16 sample values (as float32) to its melspectrogram model."""
    return np.clip(np.round(samples * 32767.0), -32768, 32767).astype(np.float32)


def _chunks(samples: np.ndarray, starts: np.ndarray) -> np.ndarray:
    return np.stack([_int16_scale(samples[s:s + CHUNK]) for s in starts])


def speech_seconds() -> Sets:
    """1 s chunks [N, 16000]: 64 spread over two_cities.wav (calibration); the other
    recordings cut into non-overlapping seconds (validation)."""
    found = recordings()
    calib_from = found["two_cities.wav"]
    starts = np.linspace(0, len(calib_from) - CHUNK, CALIB_COUNT).astype(int)
    val = np.concatenate([_chunks(rec, np.arange(0, len(rec) - CHUNK + 1, CHUNK))
                          for name, rec in found.items() if name != "two_cities.wav"])
    return Sets({"input": _chunks(calib_from, starts)}, {"input": val}, {},
                "real speech, 1 s chunks at 16 kHz as int16 values: calibration spread over "
                "two_cities.wav, validation the other three recordings")


def mel_within_db(output: str) -> Scorer:
    """Per chunk: the share of log-mel values within 1 dB of float's."""
    def score(outputs: Outputs, reference: Outputs, _: dict[str, np.ndarray]) -> np.ndarray:
        n = len(reference[output])
        got, ref = outputs[output].reshape(n, -1), reference[output].reshape(n, -1)
        return (np.abs(got - ref) <= DB_TOLERANCE).mean(1)
    return score


@cache
def _float_mel(seconds: bytes) -> np.ndarray:
    """openWakeWord's _get_melspectrogram on the float model: [T, 32], then x / 10 + 2."""
    import onnxruntime as ort

    path = extracted(pins.OPENWAKEWORD) / OWW_MODELS / "melspectrogram.onnx"
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    audio = np.frombuffer(seconds, np.float32)[None]
    return np.squeeze(session.run(None, {"input": audio})[0]) / 10.0 + 2.0


def _windows(samples: np.ndarray, starts: np.ndarray | None, step: int) -> np.ndarray:
    mel = _float_mel(_int16_scale(samples).tobytes())
    if starts is None:
        starts = np.arange(0, len(mel) - WINDOW + 1, step)
    return np.stack([mel[s:s + WINDOW] for s in starts])[..., None].astype(np.float32)


def mel_windows(_source: Path) -> Sets:
    """The embedding model's input [N, 76, 32, 1]: the float melspectrogram of each
    recording in 76-frame windows. Calibration: 64 windows spread over two_cities.wav;
    validation: the other recordings every 38 frames (half a window)."""
    found = recordings()
    calib_from = found["two_cities.wav"]
    frames = len(_float_mel(_int16_scale(calib_from).tobytes()))
    starts = np.linspace(0, frames - WINDOW, CALIB_COUNT).astype(int)
    calib = _windows(calib_from, starts, 0)
    val = np.concatenate([_windows(rec, None, VAL_STEP) for name, rec in found.items()
                          if name != "two_cities.wav"])
    return Sets({"input_1": calib}, {"input_1": val}, {},
                "openWakeWord's float log-mel frames (x/10 + 2) of real speech in 76-frame "
                "windows: calibration from two_cities.wav, validation from the other three "
                "recordings")


def embedding_cosine(output: str) -> Scorer:
    """Per window: cosine similarity of the run's 96-d embedding with float's."""
    def score(outputs: Outputs, reference: Outputs, _: dict[str, np.ndarray]) -> np.ndarray:
        n = len(reference[output])
        got, ref = outputs[output].reshape(n, -1), reference[output].reshape(n, -1)
        dot = (got * ref).sum(1)
        norms = np.linalg.norm(got, axis=1) * np.linalg.norm(ref, axis=1)
        return dot / np.maximum(norms, 1e-12)
    return score


def nearest_neighbour(output: str) -> Scorer:
    """Per window: 1 where the run's embedding has the same nearest float embedding (cosine,
    over the other windows of the set) as float's own."""
    def unit(x: np.ndarray) -> np.ndarray:
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)

    def score(outputs: Outputs, reference: Outputs, _: dict[str, np.ndarray]) -> np.ndarray:
        n = len(reference[output])
        got, ref = unit(outputs[output].reshape(n, -1)), unit(reference[output].reshape(n, -1))
        mine, theirs = got @ ref.T, ref @ ref.T
        np.fill_diagonal(mine, -2.0)
        np.fill_diagonal(theirs, -2.0)
        return (mine.argmax(1) == theirs.argmax(1)).astype(np.float64)
    return score


@cache
def _embedding_session():  # noqa: ANN202 (an onnxruntime session)
    import onnxruntime as ort

    path = extracted(pins.OPENWAKEWORD) / OWW_MODELS / "embedding_model.onnx"
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def downstream_embedding_cosine(output: str) -> Scorer:
    """The task the front end serves: per 1 s chunk, the float embedding model run on the
    first 76 frames of the run's log-mel (x / 10 + 2, as openWakeWord feeds it) against the
    same on float's log-mel; cosine similarity."""
    def embed(mel: np.ndarray) -> np.ndarray:
        frames = np.asarray(mel, np.float32).reshape(len(mel), -1, 32)[:, :WINDOW] / 10.0 + 2.0
        session = _embedding_session()
        return np.concatenate([session.run(None, {"input_1": f[None, ..., None]})[0].reshape(1, -1)
                               for f in frames])

    def score(outputs: Outputs, reference: Outputs, _: dict[str, np.ndarray]) -> np.ndarray:
        got, ref = embed(outputs[output]), embed(reference[output])
        dot = (got * ref).sum(1)
        return dot / np.maximum(np.linalg.norm(got, axis=1) * np.linalg.norm(ref, axis=1), 1e-12)
    return score


HEAD_WINDOW = 16  # embeddings a wake-word head reads (openWakeWord 0.4.0, 16 x 96)


def _embeddings(samples: np.ndarray) -> np.ndarray:
    """openWakeWord's _get_embeddings: float mel, 76-frame windows every 8 frames, float
    embedding model: [T, 96]."""
    windows = _windows(samples, None, 8)
    session = _embedding_session()
    return np.concatenate([session.run(None, {"input_1": w[None]})[0].reshape(1, -1)
                           for w in windows]).astype(np.float32)


def embedding_sequences(_source: Path) -> Sets:
    """A wake-word head's input [N, 16, 96]: 16 consecutive float embeddings of real speech.
    Calibration: 64 sequences spread over two_cities.wav; validation: the other recordings
    every 4 embeddings. No recording says the wake word: the heads should stay near 0."""
    found = recordings()
    calib_from = _embeddings(found["two_cities.wav"])
    starts = np.linspace(0, len(calib_from) - HEAD_WINDOW, CALIB_COUNT).astype(int)
    calib = np.stack([calib_from[s:s + HEAD_WINDOW] for s in starts])
    val = []
    for name, rec in found.items():
        if name != "two_cities.wav":
            emb = _embeddings(rec)
            val += [emb[s:s + HEAD_WINDOW] for s in range(0, len(emb) - HEAD_WINDOW + 1, 4)]
    return Sets({"x.1": calib}, {"x.1": np.stack(val)}, {},
                "16 consecutive float speech embeddings (openWakeWord's front end on real "
                "speech): calibration from two_cities.wav, validation from the other three "
                "recordings; none says the wake word")


def score_within(output: str, tolerance: float = 0.05) -> Scorer:
    """1 where the wake-word probability is within ``tolerance`` of float's."""
    def score(outputs: Outputs, reference: Outputs, _: dict[str, np.ndarray]) -> np.ndarray:
        n = len(reference[output])
        got, ref = outputs[output].reshape(n), reference[output].reshape(n)
        return (np.abs(got - ref) <= tolerance).astype(np.float64)
    return score

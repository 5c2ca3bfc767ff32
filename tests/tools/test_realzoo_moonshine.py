"""Moonshine in the real-model suite (tools/realzoo/moonshine.py): the encoder saved as ONNX
from moonshine-cpp's ORT-format file computes what onnxruntime computes on the .ort, and the
float decoder transcribes real speech from it. Skipped unless the pinned wheels are already
in the realzoo cache (``python -m tools.realzoo --models moonshine_encoder --materialize-only``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tools.realzoo import moonshine, pins
from tools.realzoo.wheels import _find, cache_dir


def _cached(*wheels: pins.Wheel) -> None:
    for wheel in wheels:
        if _find(cache_dir() / "wheels", wheel) is None:
            pytest.skip(f"{wheel.spec} is not in the realzoo cache")


def test_the_encoder_saved_as_onnx_matches_the_ort_file_and_transcribes_speech(tmp_path: Path):
    import onnxruntime as ort

    from tools.realzoo.wheels import extracted

    _cached(pins.MOONSHINE_CPP, pins.MOONSHINE_VOICE, pins.MOONSHINE_ONNX)
    out = tmp_path / "encoder.onnx"
    moonshine.export_encoder(out)
    sets = moonshine.speech_chunks()
    assert len(sets.calib["input_values"]) == 64 and len(sets.val["input_values"]) >= 40
    chunk = sets.val["input_values"][:1]
    onnx_states = ort.InferenceSession(str(out)).run(None, {"input_values": chunk})[0]
    ort_file = extracted(pins.MOONSHINE_CPP) / moonshine.ENCODER
    want = ort.InferenceSession(str(ort_file)).run(None, {"input_values": chunk})[0]
    np.testing.assert_allclose(onnx_states, want, rtol=1e-4, atol=1e-4)
    tokens = moonshine.greedy_tokens(onnx_states[0], 1.0)
    assert 0 < len(tokens) <= moonshine.TOKENS_PER_SECOND
    scorer = moonshine.transcript_agreement("last_hidden_state")
    same = scorer({"last_hidden_state": onnx_states}, {"last_hidden_state": want}, {})
    assert same.tolist() == [1.0]


def test_calibration_hears_every_recording_and_shares_no_sample_with_the_held_out_chunks():
    ramp = np.arange(5 * moonshine.CHUNK, dtype=np.float32)  # each sample its own value
    cut, held = moonshine.split(ramp)
    windows = moonshine.calibration_windows({"a": ramp[:cut], "b": ramp[:cut] + 1e6}, 8)
    assert len(windows) == 8 and {w[0] >= 1e6 for w in windows} == {False, True}
    assert set(windows.ravel()).isdisjoint(np.concatenate(held).ravel())
    assert all(len(h) == moonshine.CHUNK for h in held) and held[0][0] == cut


def test_the_calibration_audio_is_as_loud_as_the_held_out_speech():
    """Until 2026-12-06 calibration was one quiet recording (peak 0.156) while the held-out
    ones peak at ~1.0: min-max ranges clipped every held-out chunk."""
    _cached(pins.MOONSHINE_VOICE, pins.MOONSHINE_ONNX)
    sets = moonshine.speech_chunks()
    calib, val = sets.calib["input_values"], sets.val["input_values"]
    assert len(calib) == 64 and len(val) >= 50
    assert np.abs(calib).max() >= 0.8 * np.abs(val).max()
    rms = [np.median(np.sqrt((x ** 2).mean(axis=1))) for x in (calib, val)]
    assert 0.5 < rms[0] / rms[1] < 2, rms

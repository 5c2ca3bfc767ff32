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

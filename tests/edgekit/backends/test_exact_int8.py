"""x86 without VNNI: an rpi4 int8 ONNX artifact runs unfused (exact) by default, says so once
at the first predict, and ``exact_int8=False`` (``--fast-int8``) runs it fused. Real
onnxruntime on the digits CNN built for rpi4 (8-bit weights). The CPU fact is set for the
test (``edgekit.device.cpu.u8s8_saturates``: this VM's EPYC now reports avx512_vnni), the sessions
are onnxruntime's own, fused or unfused."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from click.testing import CliRunner

import edgekit
from edgekit.backends import BackendOptions
from edgekit.cli import cli

from ...conftest import SAMPLES


@pytest.fixture(autouse=True)
def saturating_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("edgekit.device.cpu.u8s8_saturates", lambda: True)


def test_unfused_run_is_said_once_at_the_first_predict(digits_artifact, digits_data, caplog):
    x = digits_data[0][:1]
    with edgekit.load(digits_artifact, backend="onnxruntime") as model:
        assert model.backend.unfused
        with caplog.at_level(logging.WARNING, logger="edgekit"):
            exact = model.predict(x)
            model.predict(x)
            model.predict(x[:1].copy())
    notes = [r for r in caplog.records if "runs unfused" in r.getMessage()]
    assert len(notes) == 1 and "exact_int8=False" in notes[0].getMessage()
    caplog.clear()
    with edgekit.load(digits_artifact, backend="onnxruntime", exact_int8=False) as model:
        assert not model.backend.unfused
        # a backend the tuner or batcher makes later keeps the choice
        assert not model.make_backend(BackendOptions(threads=1)).unfused
        with caplog.at_level(logging.WARNING, logger="edgekit"):
            fast = model.predict(x)
    assert not [r for r in caplog.records if "runs unfused" in r.getMessage()]
    assert fast.shape == exact.shape and int(np.argmax(fast)) == int(np.argmax(exact))


def test_run_and_bench_take_fast_int8(digits_artifact):
    runner = CliRunner()
    image = str(next(p for p in sorted(SAMPLES.iterdir()) if p.suffix == ".png"))
    result = runner.invoke(cli, ["run", str(digits_artifact), image, "--backend", "onnxruntime",
                                 "--fast-int8", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)[0]["top"]
    result = runner.invoke(cli, ["bench", str(digits_artifact), "--backend", "onnxruntime",
                                 "--threads", "1", "--duration", "0.2", "--warmup", "1",
                                 "--fast-int8", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)[0]["runtime"] == "onnxruntime"

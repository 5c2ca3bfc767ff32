"""Ctrl-C during calibration acts within a second and says no artifact was written (issue
35: 6.5 s, and only "aborted"). The model makes each calibration chunk one long native call
(8 samples through a chain of 512x512 MatMuls in one onnxruntime run, seconds here), the
case where Python used to hold the signal until the call returned."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

LAYERS = 24
SIDE = 512


def slow_model(path) -> None:
    rng = np.random.default_rng(0)
    weights, nodes, current = [], [], "x"
    for i in range(LAYERS):
        weights.append(numpy_helper.from_array(
            (rng.normal(0, 1 / np.sqrt(SIDE), (SIDE, SIDE))).astype(np.float32), f"w{i}"))
        nodes.append(helper.make_node("MatMul", [current, f"w{i}"], [f"h{i}"]))
        current = f"h{i}"
    graph = helper.make_graph(
        nodes, "slow", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, SIDE, SIDE])],
        [helper.make_tensor_value_info(current, TensorProto.FLOAT, ["n", 1, SIDE, SIDE])], weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def interrupt_during(stage: str, args: list[str], after_s: float = 0.5) -> tuple[float, int, str]:
    """Run ``edgekit ARGS``, send SIGINT ``after_s`` into ``stage``; (seconds from the signal
    to the exit, exit code, stderr)."""
    # Ctrl-C as a terminal delivers it: a job started with `&` by a script inherits SIGINT
    # ignored, and Python then installs no handler for it
    proc = subprocess.Popen([sys.executable, "-m", "edgekit.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines: list[str] = []
    started = threading.Event()

    def read() -> None:
        for line in proc.stderr:
            lines.append(line)
            if f"[{stage}]" in line:
                started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert started.wait(300), "".join(lines)
    time.sleep(after_s)
    sent = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    code = proc.wait(60)
    latency = time.perf_counter() - sent
    reader.join(5)
    return latency, code, "".join(lines)


def test_ctrl_c_in_calibration_acts_within_a_second(tmp_path):
    slow_model(tmp_path / "slow.onnx")
    out = tmp_path / "slow.edgekit"
    latency, code, err = interrupt_during("calibrate", [
        "build", "-t", "host", str(tmp_path / "slow.onnx"), "--calib", "synthetic",
        "--format", "onnx", "--method", "minmax", "-o", str(out)])
    assert code == 130, err
    assert "interrupted: no artifact written" in err
    assert latency < 1.0, f"{latency:.2f} s from Ctrl-C to exit"
    assert not out.exists() and not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]

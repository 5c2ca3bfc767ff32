"""bench_zoo's bookkeeping: the zoo entry's build options (the VAD's frozen sample rate and its
state's batch axis) and the parity column, which skips outputs the .tflite gives in float."""

from __future__ import annotations

import zoo  # tools/ is on sys.path via tests/conftest.py


def load_bench():
    from tools.benchmarks import bench_zoo

    return bench_zoo


def test_the_vad_builds_with_its_sample_rate_frozen_and_its_state_on_axis_1() -> None:
    assert zoo.entry("silero_like_vad").build_options() == {
        "batch_axes": {"state": 1}, "consts": {"sr": 16000}}
    assert zoo.entry("resnet18").build_options() == {"batch_axes": {}, "consts": {}}


def test_parity_is_the_worst_int8_output_and_skips_float_ones() -> None:
    bench = load_bench()
    manifest = {
        "models": [{"format": "tflite",
                    "outputs_quantization": {"prob": {"scale": 0.004, "zero_point": -128}}}],
        "validation": {"tflite": {"checked": True, "samples": 4,
                                  "prob": {"within_1_step": 0.97, "max_steps": 2.0},
                                  "stateN": {"within_1_step": 0.01, "max_steps": 900.0}}},
    }
    assert bench.int8_parity(manifest) == 0.97
    del manifest["models"][0]["outputs_quantization"]["prob"]
    assert bench.int8_parity(manifest) is None  # every output float: no step to count


def test_summary_counts_strictly_and_names_what_it_excepts() -> None:
    bench = load_bench()
    rows = [bench.Row("resnet18", built="yes", shipped="tflite"),
            bench.Row("crnn", built="yes", shipped="tflite", float_kinds={"LSTM": 2}),
            bench.Row("yolov8n", built="yes", shipped="tflite", moves={"Concat": 1}),
            bench.Row("dbnet", built="yes", shipped="tflite", float_kinds={"Resize": 1}),
            bench.Row("broken", built="InternalError")]
    line = bench.summary(rows)
    assert line.startswith("2/5 no float ops (recurrent cells excepted: crnn LSTM x2); "
                           "1/5 with no float op at all; "), line
    assert "3/5 if packed-output Concats kept float on purpose count as data moves " \
           "(yolov8n Concat x1)" in line, line
    assert line.endswith("4/5 ship an int8 .tflite; 4/5 built; 1 internal error(s)"), line

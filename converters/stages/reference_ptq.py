"""The reference every build is held against: plain per-channel min-max PTQ, as peers ship it.

onnxruntime's ``quantize_static`` with its defaults for a CPU int8 model (QDQ, per-channel
symmetric int8 weights, uint8 min-max activations: U8S8), on the pinned and pre-processed
float model (before edgekit's equalization, bias correction, precision rungs and packed-output
split), calibrated on the build's calibration samples. The validate stage scores it on the
same validation data as the build's int8 model; the summary prints both, and an artifact
worse than it beyond noise is acted on (``search/autoguard.py``).
"""

from __future__ import annotations

from pathlib import Path

from ..context import Dataset


def reference_ptq(prepared: Path, calib: Dataset, out: Path, batched: bool = False,
                  ranges: Path | None = None, quantized: Path | None = None) -> Path:
    """Write the plain per-channel min-max U8S8 QDQ model of ``prepared`` to ``out``.

    ``quantized``: that very model, already written by the build's quantize stage from
    ``ranges`` (``quantize.PLAIN_MINMAX``): copied, the same bytes without quantizing again (EfficientNet-
    Lite0: about 1 s of onnxruntime's per-channel Python, ``tools/benchmarks/bench_build.py``).

    ``ranges``: the build's own min-max calibration cache of this very model (when equalization
    changed nothing), which is what calibrating again would give. Otherwise calibrated in chunks (``stages/calibrate``'s way: onnxruntime's calibrator fed all
    samples at once holds every intermediate tensor of all of them), then quantized from
    the saved ranges: the same ranges quantize_static would compute itself."""
    import contextlib
    import io

    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    from .quantize import ort_quantization_quiet

    if quantized is not None and ranges is not None and quantized.is_file():
        out.write_bytes(quantized.read_bytes())
        return out
    with contextlib.redirect_stdout(io.StringIO()), ort_quantization_quiet():
        if ranges is None:
            ranges = _calibrate(prepared, calib, out, batched)
        quantize_static(str(prepared), str(out), None, quant_format=QuantFormat.QDQ,
                        per_channel=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        calibrate_method=CalibrationMethod.MinMax, calibration_cache_path=str(ranges),
                        extra_options={"WeightSymmetric": True})
    return out


def _calibrate(prepared: Path, calib: Dataset, out: Path, batched: bool) -> Path:
    from onnxruntime.quantization import CalibrationMethod
    from onnxruntime.quantization.calibrate import create_calibrator, save_tensors_data

    from .calibrate import CHUNK_SAMPLES, _ListReader, feeds

    calibrator = create_calibrator(prepared, None, augmented_model_path=str(out.with_suffix(".augmented.onnx")),
                                   calibrate_method=CalibrationMethod.MinMax)
    for start in range(0, len(calib), CHUNK_SAMPLES):
        calibrator.collect_data(_ListReader(feeds(calib, batched, start, min(start + CHUNK_SAMPLES, len(calib)))))
    ranges = out.with_suffix(".ranges.json")
    save_tensors_data(calibrator.compute_data(), ranges)
    del calibrator
    return ranges

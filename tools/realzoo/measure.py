"""One model's task metric three ways on its held-out set: the float source, the edgekit
artifact (``edgekit.load``, the runtime a user gets), onnxruntime's quantize_static peer.

Run as ``python -m tools.realzoo.measure MODEL ARTIFACT|- OUT.json`` (a subprocess of the suite,
so that a crash in a runtime costs one row, not the run)."""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from .evaluate import input_ranks, run_artifact, run_onnx
from .materialize import materialize, model_dir, source_path
from .metrics import Estimate, interval
from .peer import quantize_peer
from .registry import MODELS, Model


def sample_axes(model: Model) -> dict[str, int]:
    """--batch-axis NAME=K flags of the model, as {NAME: K}."""
    flags, axes = list(model.flags), {}
    for flag, value in zip(flags, flags[1:], strict=False):
        if flag == "--batch-axis":
            name, axis = value.split("=")
            axes[name] = int(axis)
    return axes


def _estimate(scores: np.ndarray) -> dict[str, object]:
    est: Estimate = interval(np.asarray(scores, np.float64))
    return {"mean": est.mean, "low": est.low, "high": est.high, "n": est.count,
            "method": est.method, "text": est.text()}


def _safe(step: str, result: dict[str, object], fn) -> object:  # noqa: ANN001
    started = time.perf_counter()
    try:
        return fn()
    except Exception as exc:
        result[f"{step}_error"] = f"{type(exc).__name__}: {str(exc)[:600]}"
        result[f"{step}_traceback"] = traceback.format_exc()[-1500:]
        return None
    finally:
        result[f"{step}_s"] = round(time.perf_counter() - started, 1)


def _onnx_of_tflite(source: Path, out: Path) -> Path:
    """The float .tflite as the ONNX graph edgekit's load stage builds from (tflite2onnx, in
    the .tflite's layout, checked there to match LiteRT within 1e-3 of each output's largest
    value): the float reference and what the onnxruntime peer quantizes."""
    from edgekit.converters.tflite.source import tflite_to_onnx

    if not out.is_file():
        tflite_to_onnx(source, out)
    return out


def measure(model: Model, artifact: Path | None) -> dict[str, object]:
    sets = materialize(model)
    source, axes = source_path(model), sample_axes(model)
    result: dict[str, object] = {"model": model.name, "metric": model.metric.name}
    if source.suffix == ".tflite":  # float and peer run its ONNX conversion (as the build's)
        source = _onnx_of_tflite(source, model_dir(model) / f"{model.name}.from_tflite.onnx")
    elif source.suffix != ".onnx":
        result["float_error"] = f"not an ONNX or .tflite source: {source.name}"
        return result
    reference = _safe("float", result, lambda: run_onnx(source, sets.val, axes, model.consts))
    if reference is None:
        return result
    result["float"] = _estimate(model.metric.score(reference, reference, sets.truth))
    runs: dict[str, object] = {"float": reference}  # the outputs the extras score
    if artifact is not None:
        # frozen (--const) inputs are not artifact inputs
        arrays = {k: v for k, v in sets.val.items() if k not in model.consts}
        got = _safe("int8", result, lambda: run_artifact(artifact, arrays, axes,
                                                         input_ranks(source)))
        if got is not None:
            runs["int8"] = got
            scored = _safe("int8_metric", result,
                           lambda: model.metric.score(got, reference, sets.truth))
            if scored is not None:
                result["int8"] = _estimate(scored)
        if "onnx" in _formats(artifact) and "tflite" in _formats(artifact):  # --format both: the ONNX too
            onnx_got = _safe("int8_onnx", result, lambda: run_artifact(
                artifact, arrays, axes, input_ranks(source), backend="onnxruntime"))
            if onnx_got is not None:
                runs["int8_onnx"] = onnx_got
                result["int8_onnx"] = _estimate(model.metric.score(onnx_got, reference, sets.truth))
    peer_path = model_dir(model) / "peer_ort_u8s8.onnx"

    def peer() -> object:
        if not peer_path.is_file():
            quantize_peer(source, sets.calib, axes, model.consts, peer_path)
        # ORT_ENABLE_BASIC keeps the QDQ pairs unfused: the exact int8 arithmetic (x86's fused
        # U8S8 kernels saturate without VNNI, which is not what the peer's device computes)
        out = run_onnx(peer_path, sets.val, axes, model.consts, basic=True)
        runs["peer"] = out
        return model.metric.score(out, reference, sets.truth)
    scored = _safe("peer", result, peer)
    if scored is not None:
        result["peer"] = _estimate(scored)
    if model.metric.extras:
        result["extras"] = _safe("extras", result, lambda: _extras(model, runs, reference, sets.truth))
    return result


def _formats(artifact: Path) -> list[str]:
    """The model formats an artifact ships (its manifest's ``models``)."""
    import zipfile

    with zipfile.ZipFile(artifact) as archive:
        return [m["format"] for m in json.loads(archive.read("manifest.json"))["models"]]


def _extras(model: Model, runs: dict[str, object], reference: object, truth: dict) -> dict[str, object]:
    """Each extra figure on every run, and int8's difference from float paired by sample."""
    out: dict[str, object] = {}
    for what, scorer in model.metric.extras:
        scores = {key: np.asarray(scorer(got, reference, truth), np.float64) for key, got in runs.items()}
        row = {key: _estimate(value) for key, value in scores.items()}
        if "int8" in scores:
            row["int8_minus_float"] = _estimate(scores["int8"] - scores["float"])
        out[what] = row
    return out


if __name__ == "__main__":
    name, art, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    row = measure(MODELS[name], None if art == "-" else Path(art))
    out.write_text(json.dumps(row, indent=1))

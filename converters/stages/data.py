"""Read calibration and validation data.

Every calibration sample calibrates the shipped model. Without ``--val`` the samples past
``--calib-samples`` validate when they are at least half the data; else every sample also
serves as the validation set that chooses among methods and reports (``split``; the manifest's
``calibration.validation_also_calibrated`` counts the samples both sets hold); nothing is
silently dropped from calibration.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from edgekit.converters.inputs.checks import (
    check_calibration_size,
    check_trained,
    check_value_range,
)
from edgekit.converters.inputs.datasets import data_label, has_data, load_dataset

from edgekit.errors import CalibrationError, UserError

from ..context import BuildContext
from ..pipeline import Stage


class LoadData(Stage):
    name = "data"
    requires = frozenset({"inputs"})
    provides = frozenset({"calib", "extra_manifest", "inputs", "val"})

    def params(self, ctx: BuildContext) -> dict[str, Any]:
        params: dict[str, Any] = {
            "calib": data_label(ctx.config.calib),
            "calib_samples": len(ctx.calib) if ctx.calib else 0,
            "val": data_label(ctx.config.val) if has_data(ctx.config.val)
            else "split of calib",
            "val_samples": len(ctx.val) if ctx.val else 0,
            "val_in_calib": (ctx.extra_manifest.get("calibration") or {}).get("validation_also_calibrated", 0),
            "labels": bool(ctx.val is not None and ctx.val.labels is not None),
        }
        if ctx.extra_manifest.get("preprocess"):
            params["preprocess"] = ctx.extra_manifest["preprocess"]
        return params

    def run(self, ctx: BuildContext) -> None:
        config = ctx.config
        if not has_data(config.calib):
            raise CalibrationError(
                "a static int8 build needs calibration data; pass --calib with a folder of "
                "images, a .npz (arrays named by input, labels as 'y') or a .npy, or "
                "'--calib synthetic' to build without real data (accuracy then unverified)"
            )
        names = [i["name"] for i in ctx.inputs]
        for flag, given in (("--const", config.consts), ("--batch-axis", config.batch_axes)):
            unknown = sorted(set(given) - set(names))
            if unknown:
                raise UserError(f"{flag} names {unknown}; the model's inputs are {names}")
        for spec in ctx.inputs:
            if spec["name"] in config.batch_axes:
                spec["batch_axis"] = int(config.batch_axes[spec["name"]])
        limit = config.calib_samples + (0 if has_data(config.val) else config.val_samples)
        fed = [i for i in ctx.inputs if i["name"] not in config.consts]  # --const: not data
        if ctx.source_info.get("format") == "onnx" and config.input_shape is not None:
            from edgekit.converters.graph.io_spec import (
                named_shapes,  # --input-shape sizes what the data is read as
            )

            asked = named_shapes(config.input_shape, ctx.inputs)
            fed = [dict(i, shape=list(asked[i["name"]])) if i["name"] in asked else i
                   for i in fed]
        calib, spec = load_dataset(config.calib, fed, config.preprocess,
                                   progress=not config.quiet, limit=limit, seed=config.seed)
        if spec is None:  # arrays, not images: nothing scaled them (input_checks.py)
            check_value_range(calib, ctx.inputs, config, ctx.float_model)
            unused_image_options(config.preprocess, data_label(config.calib), ctx.warn)
        if spec is not None:
            ctx.extra_manifest["preprocess"] = spec
            ctx.inputs[0]["preprocess"] = spec
            ctx.inputs[0]["layout"] = spec["layout"]
        if calib.synthetic:
            ctx.warn("calibrating on synthetic data: the int8 accuracy is unverified")
        if has_data(config.val):
            val, _ = load_dataset(config.val, fed, config.preprocess,
                                  progress=not config.quiet, limit=config.val_samples,
                                  seed=config.seed)
            ctx.calib = calib.take(slice(0, config.calib_samples))
        elif calib.synthetic:
            ctx.calib, val = calib, calib.take(slice(0, min(8, len(calib))))
        else:
            ctx.calib, val, shared = split(calib, config.calib_samples, config.seed)
        ctx.val = val.take(slice(0, config.val_samples))
        # split() puts the shared samples first in the validation set
        shared = 0 if has_data(config.val) or calib.synthetic else min(shared, len(ctx.val))
        ctx.extra_manifest["calibration"] = {"samples": len(ctx.calib), "validation_samples": len(ctx.val),
                                             "validation_also_calibrated": shared}
        check_calibration_size(ctx.calib, ctx.warn)
        if config.weights and not ctx.val.synthetic:  # before calibrating: untrained weights stop here
            from ..executor.shards import build_outputs

            labels = None if ctx.val.labels is None else np.asarray(ctx.val.labels)
            check_trained(config, build_outputs(config, ctx.float_path, ctx.val)[0], labels,
                          ctx.val.source, ctx.warn)
        if hasattr(calib, "class_names"):
            ctx.extra_manifest["labels"] = calib.class_names
        inside = f", {shared} of them also calibrate" if shared else ""
        ctx.report(f"  calibration: {len(ctx.calib)} samples (all calibrate), validation: {len(ctx.val)} samples "
                   f"({'labelled' if ctx.val.labels is not None else 'unlabelled'}{inside})"
                   + (" [synthetic]" if calib.synthetic else ""))


IMAGE_ONLY_KEYS = ("size", "resize", "color", "layout", "mean", "std")


def unused_image_options(preprocess: dict[str, Any], source: str, warn: Any) -> None:
    """Warn when image preprocessing (--mean/--std/--size/...) comes with arrays: arrays are
    fed as given, nothing normalizes them and the manifest records no preprocessing, so
    ``predict_image`` on the device would scale pixels to [0, 1] only (a newcomer's
    PP-OCRv4 det build took --mean/--std with a .npz without a word)."""
    given = [key for key in IMAGE_ONLY_KEYS if key in preprocess]
    if given:
        flags = ", ".join(f"--{key}" for key in given)
        warn(f"{flags} apply to image folders only and {source} is none: its arrays are fed "
             "to the model as they are (not normalized by these options) and the manifest "
             "records no image preprocessing; normalize the arrays yourself, or calibrate "
             "from an image folder")


def split(data: Any, calib_samples: int, seed: int) -> tuple[Any, Any, int]:
    """Shuffle once; calibrate on every sample (at most calib_samples); validate on what is
    left when that is at least half the data, else on every sample (calibration ones first).
    Returns (calibration, validation, samples both hold).

    The shipped model sees all the data it may (issue 15: halving it cost accuracy) while
    validation stays held out whenever the data allows; ``--val`` gives a disjoint set. When it
    cannot be held out, a half of the calibration samples validated no better than all of
    them, and on 32 samples its 16 made one flipped decision worth 6 points (the validate
    stage's noise): so all of them."""
    count = len(data)
    if count < 2:
        raise CalibrationError(
            f"{data.source}: {count} sample(s); need at least 2 to hold some out for validation "
            "(or pass --val)"
        )
    order = np.random.default_rng(seed).permutation(count)
    n_calib = max(1, min(calib_samples, count))
    calib = data.take(order[:n_calib])
    if count - n_calib >= count // 2:
        return calib, data.take(order[n_calib:]), 0
    if n_calib == count:  # the same samples in the same order: one copy, not two
        return calib, calib.take(slice(0, count)), n_calib
    return calib, data.take(order), n_calib

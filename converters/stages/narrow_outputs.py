"""Narrow outputs: clip a raw output where the user's decode cannot see past the bound, so
that its int8 grid spends its steps where decisions are made (``ptq/output_clip.py``).

Runs only when the build has the user's decode (``--postprocess``): without it nothing says
which values of an output matter, and every value is kept.
"""

from __future__ import annotations

from typing import Any

from ..context import BuildContext
from ..pipeline import Stage


class NarrowOutputs(Stage):
    name = "narrow_outputs"
    requires = frozenset({"calib", "float_path", "outputs"})
    provides = frozenset({"float_model", "float_path", "quantization"})

    def __init__(self) -> None:
        super().__init__()
        self.done: dict[str, Any] = {}

    def params(self, ctx: BuildContext) -> dict[str, Any]:
        return dict(self.done)

    def applies(self, ctx: BuildContext) -> bool:
        return bool(ctx.config.postprocess)

    def run(self, ctx: BuildContext) -> None:
        import onnx
        from edgekit.converters.executor.shards import build_outputs
        from edgekit.converters.metrics.user import load_callable
        from edgekit.converters.ptq.output_clip import free_bounds, insert_clips, output_layers

        model = onnx.load(str(ctx.float_path))
        heads = output_layers(model)
        if not heads:
            return
        names = [o.name for o in model.graph.output]
        outputs = build_outputs(ctx.config, ctx.float_path, ctx.calib)
        decode = load_callable(str(ctx.config.postprocess), "postprocess")
        clips: dict[str, tuple[float | None, float | None]] = {}
        narrowed: dict[str, list[float | None]] = {}
        for name, layers in heads.items():
            low, high = free_bounds(outputs, names.index(name), decode)
            if low is None and high is None:
                continue
            clips.update({layer: (low, high) for layer in layers})
            narrowed[name] = [low, high]
        self.done = {"outputs": narrowed}
        if not clips:
            return
        insert_clips(model, clips)
        path = ctx.workdir / "float-narrowed.onnx"
        onnx.save(model, str(path))
        ctx.float_model, ctx.float_path = model, path
        ctx.quantization["narrowed_outputs"] = narrowed
        for name, (low, high) in narrowed.items():
            span = f"[{'-inf' if low is None else f'{low:g}'}, {'inf' if high is None else f'{high:g}'}]"
            ctx.report(f"  output {name!r} clipped to {span}: --postprocess decodes the same "
                       f"detections on all {len(ctx.calib)} calibration samples, and its int8 "
                       "grid gets finer")

"""Host-side converter pipeline: source model -> int8 ``.edgekit`` artifact for a target.

    from edgekit.converters import build
    result = build("model.onnx", target="rpi4", calib="images/", output="model.edgekit")
    print(result.summary())

The API is ``api.py``; the stage order ``pipeline.STAGES``; docs/architecture.md maps the folders.
"""

from .api import BuildConfig, BuildResult, build, plan_for, source_kind, stages_for

__all__ = ["BuildConfig", "BuildResult", "build", "plan_for", "source_kind", "stages_for"]

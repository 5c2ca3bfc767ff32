"""How PP-OCRv4 rec's hardswish is written, measured: accuracy of the int8 .tflite against
float (the build's validate stage: CTC character error points on LiteRT, N = the validation
samples) and its LiteRT time on this host, paired on one thread, with the XNNPACK delegate
(LiteRT's default) and with the builtin kernels only.

Variants (the rest of prepare's fusions on in all):
- ``fused``: prepare fuses ``x*Clip(x+3,0,6)/6`` into ``HardSigmoid(x)*x`` and the writer
  emits one int8 HARD_SWISH (the default since docs/measurements/paddle-graphs.md);
- ``writer-split``: fused, but the writer emits the HardSigmoid (ADD+RELU6, MUL) and the MUL;
- ``unfused``: the hardswish left as exported (ADD, RELU6, MUL, MUL).

    python tools/studies/paddle_hardswish_variants.py MODEL.onnx CALIB.npz [--rounds 6]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tools"), str(REPO / "tools" / "benchmarks")]

VARIANTS = ("fused", "writer-split", "unfused")


def _build(source: Path, calib: Path, variant: str, work: Path) -> tuple[bytes, str]:
    """The variant's int8 .tflite bytes and the validate stage's agreement line."""
    import edgekit.converters.stages.prepare as prepare
    import edgekit.converters.tflite.ops.activation as activation
    from edgekit.converters import plan_for
    from edgekit.converters.context import BuildConfig, BuildContext, temp_under
    from edgekit.converters.pipeline import Pipeline
    from edgekit.converters.tflite import convert
    from edgekit.targets import load_profile

    fuse, partner = prepare.fuse_hardswish, activation._hardswish_partner  # noqa: SLF001
    if variant == "unfused":
        prepare.fuse_hardswish = lambda model: 0
    if variant == "writer-split":
        activation._hardswish_partner = lambda ctx, node: None  # noqa: SLF001
    lines: list[str] = []
    try:
        config = BuildConfig.from_options(source=str(source), target="rpi4", calib=str(calib),
                                          quiet=True)
        ctx = BuildContext(config=config, profile=load_profile("rpi4"), workdir=work,
                           report=lambda m: lines.append(m) if "agreement (" in m else None)
        with temp_under(work):
            Pipeline(plan_for(config).until("validate")).run(ctx)
            import onnx

            data = bytes(convert(onnx.load(str(ctx.quant_path))).data)
    finally:
        prepare.fuse_hardswish, activation._hardswish_partner = fuse, partner  # noqa: SLF001
    return data, (lines[0].strip() if lines else "")


def _caller(data: bytes, delegate: bool):  # noqa: ANN202 - a timing closure
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    kind = OpResolverType.AUTO if delegate else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    interpreter = Interpreter(model_content=data, num_threads=1, experimental_op_resolver_type=kind)
    interpreter.allocate_tensors()
    detail = interpreter.get_input_details()[0]
    x = np.zeros(detail["shape"], detail["dtype"])

    def call() -> None:
        interpreter.set_tensor(detail["index"], x)
        interpreter.invoke()
    return call


def main(argv: list[str] | None = None) -> int:
    from common import paired, ratio_text

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("calib", type=Path)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args(argv)
    built: dict[str, bytes] = {}
    for variant in VARIANTS:
        work = Path(tempfile.mkdtemp(prefix=f"hs_{variant}_"))
        try:
            built[variant], line = _build(args.model, args.calib, variant, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(f"{variant}: {line}", flush=True)
    for delegate in (True, False):
        label = "XNNPACK (default)" if delegate else "builtin kernels only"
        base = _caller(built["fused"], delegate)
        for variant in VARIANTS[1:]:
            r = paired(_caller(built[variant], delegate), base, args.rounds, threads=1)
            print(f"{label}: {variant} {r['a_ms']:.2f} ms vs fused {r['b_ms']:.2f} ms, "
                  f"ratio {ratio_text(r)} (1 thread, median of {args.rounds} blocks)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

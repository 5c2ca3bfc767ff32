"""A lever for BlazeFace's int8 score head (docs/measurements/blazeface-int8.md): clip each
classifier convolution's logits from below before they are concatenated.

Why: the float score logits span about [-465, 3.5] on the calibration crops (anchors far from
any face are very sure), so one int8 step of the shared ``classificators`` tensor is 1.84
logits and every face float scores in (0.5, ~0.71) lands on the logit 0, a score of exactly
0.5, which the decode (``score > 0.5``) drops. A logit below -16 is a score under 1.2e-7: no
decision of the decode (threshold 0.5, NMS among boxes over it) depends on how far below it
is, so the float model's faces are unchanged while the int8 range shrinks to about [-16, 3.5].

    python -m tools.studies.blazeface_score_clip IN.onnx OUT.onnx [--low -16]
"""

from __future__ import annotations

import argparse

import numpy as np
import onnx
from onnx import helper, numpy_helper

HEADS = ("classificator_8", "classificator_16")  # tflite2onnx's names of the two score convs


def clip_heads(model: onnx.ModelProto, low: float, high: float = 80.0) -> onnx.ModelProto:
    """A copy of ``model`` with Clip(low, high) after each score convolution of HEADS."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    produced = {o for n in graph.node for o in n.output}
    missing = [h for h in HEADS if h not in produced]
    if missing:
        raise ValueError(f"expected the score convolutions {HEADS} in the graph; missing {missing}")
    graph.initializer.extend([numpy_helper.from_array(np.array(low, np.float32), "score_clip_low"),
                              numpy_helper.from_array(np.array(high, np.float32), "score_clip_high")])
    nodes = []
    for node in graph.node:
        node.input[:] = [f"{i}_clipped" if i in HEADS else i for i in node.input]
        nodes.append(node)
        for head in HEADS:
            if head in node.output:
                nodes.append(helper.make_node("Clip", [head, "score_clip_low", "score_clip_high"],
                                              [f"{head}_clipped"], name=f"{head}_clip"))
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.checker.check_model(out)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="BlazeFace front as ONNX (tflite2onnx, the build's from_tflite)")
    parser.add_argument("out")
    parser.add_argument("--low", type=float, default=-16.0, help="lowest score logit kept")
    args = parser.parse_args(argv)
    onnx.save(clip_heads(onnx.load(args.source), args.low), args.out)


if __name__ == "__main__":
    main()

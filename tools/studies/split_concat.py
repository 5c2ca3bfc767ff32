"""Unshare a scale: a Split that undoes a Concat, rewritten so the parts never meet.

YOLOv8's Detect head (Ultralytics exports; ``nudenet`` 320n) joins per level the box
distribution logits (64 channels, range about -6..33) and the class logits (18 channels)
along the channel axis, flattens each level, joins the levels along the anchor axis, and
then splits the channels apart again into boxes and classes::

    Concat_c(box_k, cls_k) -> Reshape -> Concat_a(levels) -> Split_c(64, 18)

In int8 a Concat shares one scale among its inputs, so the class logits are rounded onto
the boxes' grid (0.154 per step on nudenet_320n, ``docs/measurements/yolo-int8.md``): a
logit step of 0.154 moves a class score near the 0.25 threshold by 0.03, and half of the
build's lost detections were float scores within 0.05 of it. The float graph computes the
same values as::

    Split output j = Concat_a(Reshape(part j of each level))

which this pass writes instead: exact in float (the same numbers in the same order), and in
int8 each branch keeps its own grid. Matched only when the shapes are static (after the
build's pinning and pre-processing) and every level's channel Concat has exactly the Split's
pieces in order; anything else is left alone.

A study, not a build stage: in the build's prepare stage (commit 6d44cbd) it gave the class
logits their own grid (0.154 -> 0.107 per step) but moved no held-out figure (kept 21/24 both,
cell F1 94.1% -> 93.5%), and the guard, on a figure one detection worse, then shipped a larger
float span (126 nodes, not 119) that measured worse in realzoo (cell F1 80.2% [63.4, 93.5]
n=23 against 95.8% [90.3, 99.6] n=21). ``python -m tools.studies.yolo_int8_levers unshare``.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _shapes(model: Any) -> dict[str, list[int]]:
    """Static shapes of every tensor shape inference can size (open dims left out)."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    shapes: dict[str, list[int]] = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        dims = vi.type.tensor_type.shape.dim
        if dims and all(d.HasField("dim_value") and d.dim_value > 0 for d in dims):
            shapes[vi.name] = [d.dim_value for d in dims]
    return shapes


def _split_sizes(node: Any, consts: dict[str, np.ndarray], channels: int) -> list[int] | None:
    from onnx import helper

    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if len(node.input) > 1 and node.input[1]:
        value = consts.get(node.input[1])
        return None if value is None else [int(v) for v in value.reshape(-1)]
    if "split" in attrs:
        return [int(v) for v in attrs["split"]]
    outputs = len(node.output)
    if "num_outputs" in attrs or outputs:
        step = -(-channels // outputs)
        return [min(step, channels - i * step) for i in range(outputs)]
    return None


def _axis(node: Any, rank: int) -> int:
    from onnx import helper

    axis = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), 0)
    return axis + rank if axis < 0 else axis


def unshare_split_concats(model: Any) -> int:
    """Rewrite (in place) every Split of a Concat of (reshaped) Concats whose pieces are
    the Split's parts, as above. Returns how many Splits were rewritten."""
    from onnx import helper, numpy_helper

    graph = model.graph
    made_by_concat = {o for n in graph.node if n.op_type == "Concat" for o in n.output}
    if not any(n.op_type == "Split" and n.input[0] in made_by_concat for n in graph.node):
        return 0  # nothing to match: no shape inference over a graph it cannot change
    shapes = _shapes(model)
    consts = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    outputs = {o.name for o in graph.output}

    def only_read_once(tensor: str) -> bool:
        return readers.get(tensor, 0) == 1 and tensor not in outputs

    rewritten = 0
    for split in [n for n in graph.node if n.op_type == "Split"]:
        joined = producer.get(split.input[0])
        if joined is None or joined.op_type != "Concat" or not only_read_once(split.input[0]):
            continue
        shape = shapes.get(split.input[0])
        if shape is None:
            continue
        axis = _axis(split, len(shape))
        sizes = _split_sizes(split, consts, shape[axis])
        if sizes is None or sum(sizes) != shape[axis] or len(sizes) != len(split.output):
            continue
        join_axis = _axis(joined, len(shape))
        if join_axis == axis:
            continue  # a Split along the Concat's own axis: another case, not matched here
        levels = []  # per Concat input: (reshape node or None, channel concat)
        for name in joined.input:
            node = producer.get(name)
            reshape = None
            if node is not None and node.op_type == "Reshape" and only_read_once(name):
                reshape, node = node, producer.get(node.input[0])
                inner, outer = shapes.get(reshape.input[0]), shapes.get(name)
                # the Reshape must keep every axis up to the split axis and only flatten after it
                if inner is None or outer is None or inner[:axis + 1] != outer[:axis + 1]:
                    break
            if node is None or node.op_type != "Concat" or not only_read_once(node.output[0]):
                break
            piece_shapes = [shapes.get(i) for i in node.input]
            if any(s is None for s in piece_shapes) or _axis(node, len(piece_shapes[0])) != axis \
                    or [s[axis] for s in piece_shapes] != sizes:
                break
            levels.append((reshape, node))
        else:
            new_nodes = []
            for j, out in enumerate(split.output):
                parts = []
                for k, (reshape, level) in enumerate(levels):
                    piece = level.input[j]
                    if reshape is not None:
                        target = list(shapes[reshape.output[0]])
                        target[axis] = sizes[j]
                        shape_name = f"{reshape.name or 'reshape'}_part{j}_shape"
                        graph.initializer.append(numpy_helper.from_array(np.asarray(target, np.int64), shape_name))
                        piece_out = f"{reshape.output[0]}_part{j}"
                        new_nodes.append(helper.make_node("Reshape", [piece, shape_name], [piece_out],
                                                          name=f"{reshape.name or 'reshape'}_part{j}_{k}"))
                        piece = piece_out
                    parts.append(piece)
                new_nodes.append(helper.make_node("Concat", parts, [out], axis=join_axis,
                                                  name=f"{joined.name or 'concat'}_part{j}"))
            index = list(graph.node).index(split)
            for node in new_nodes[::-1]:
                graph.node.insert(index, node)
            gone = [split, joined] + [n for r, c in levels for n in (r, c) if n is not None]
            for node in gone:
                graph.node.remove(node)
            dropped = {o for n in gone for o in n.output}
            kept = [v for v in graph.value_info if v.name not in dropped or v.name in split.output]
            del graph.value_info[:]
            graph.value_info.extend(kept)
            rewritten += 1
    if rewritten:  # the Split's sizes and the old Reshapes' shapes: read by nothing now
        read = {name for node in graph.node for name in node.input}
        kept_inits = [i for i in graph.initializer if i.name in read]
        del graph.initializer[:]
        graph.initializer.extend(kept_inits)
    return rewritten

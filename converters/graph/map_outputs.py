"""Outputs that are not tensors: a ZipMap's sequence of maps becomes the tensor it reads.

skl2onnx writes a classifier's probabilities, by default, through ``ZipMap`` (``ai.onnx.ml``):
a sequence with one ``{label: probability}`` map per sample. An artifact's outputs are
tensors (the manifest's contract, what every backend returns), and onnxruntime's
calibrator and quantizer work on tensors only (the Softmax before a ZipMap made it raise
"Only an existing tensor can be modified, 'out_activations_result' is not"). The output
keeps its name and becomes the ``[N, classes]`` probability tensor the ZipMap reads, in
the order of its labels (which the build reports). Any other non-tensor output is refused
by name.
"""

from __future__ import annotations

from typing import Any

from edgekit.converters.graph.names import Names

from edgekit.errors import UnsupportedModelError


def _labels(node: Any) -> list[int | str]:
    for attr in node.attribute:
        if attr.name == "classlabels_int64s":
            return list(attr.ints)
        if attr.name == "classlabels_strings":
            return [s.decode() for s in attr.strings]
    return []


def unzip_map_outputs(model: Any) -> list[str]:
    """Rewrite ``model`` in place: each graph output a ZipMap writes becomes the probability
    tensor it reads (an Identity under the output's name). Returns one line per output
    rewritten; a non-tensor output of another kind is an ``UnsupportedModelError``."""
    from onnx import TensorProto, helper

    graph = model.graph
    producer = {o: n for n in graph.node for o in n.output}
    names = Names(graph)
    notes = []
    for out in graph.output:
        if out.type.HasField("tensor_type"):
            continue
        node = producer.get(out.name)
        if node is None or node.op_type != "ZipMap" or node.domain != "ai.onnx.ml":
            kind = out.type.WhichOneof("value")
            raise UnsupportedModelError(
                f"output {out.name!r} is a {kind.replace('_type', '')}, not a tensor; builds "
                "write tensor outputs: export the model with tensor outputs (skl2onnx: "
                "options={id(model): {'zipmap': False}})")
        labels = _labels(node)
        graph.node.remove(node)
        graph.node.append(helper.make_node("Identity", [node.input[0]], [out.name],
                                           name=names.fresh(f"{node.name or 'ZipMap'}_tensor")))
        out.type.CopyFrom(helper.make_tensor_type_proto(TensorProto.FLOAT, [None, len(labels) or None]))
        shown = labels if len(labels) <= 12 else [*labels[:12], "..."]
        notes.append(f"output {out.name!r} (ZipMap: one {{label: probability}} map per sample) "
                     f"is given as the [N, {len(labels)}] probability tensor it maps, columns "
                     f"in label order {shown}")
    return notes

"""Ops the cost model cannot cost, timed on this host: their share of a run.

A target's cost model prices convolutions, matrix products and elementwise passes; control
flow (``If``, ``Loop``, ``Scan``: their work hides in subgraphs and depends on the data) and
ops of other domains (``ai.onnx.ml``'s tree ensembles, a vendor's custom ops) have no price.
Rather than refuse a model that validated, the estimator runs it once here with onnxruntime's
profiler (one thread, every graph optimization, random inputs of the model's shapes) and
reads the share of the run those nodes take. The target's latency is then the costed part
scaled by that share (``costed / (1 - share)``): the uncosted nodes are assumed to run at the
same speed ratio to this host as the rest of the model does.

Node names are made unique for the run (a top-level node ``__ek<i>``, a subgraph node
``__eksub<j>``): onnxruntime records a subgraph's nodes on their own and inside their ``If``
or ``Loop`` too, so only top-level nodes add up to the run.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MIN_RUNS = 3
MIN_SECONDS = 0.2  # profiled runs: at least this long together, for a stable share
MAX_SHARE = 0.9  # past this the costed rest is too small a yardstick to scale by


@dataclass(frozen=True)
class HostShare:
    uncosted_us: float  # microseconds per run in the uncosted nodes
    total_us: float  # microseconds per run in every top-level node
    runs: int

    @property
    def share(self) -> float:
        return self.uncosted_us / self.total_us if self.total_us > 0 else 1.0

    @property
    def usable(self) -> bool:
        """True when the costed rest is a large enough part of the run to scale from."""
        return self.total_us > 0 and self.share <= MAX_SHARE


def _rename(model: Any) -> None:
    """Top-level nodes ``__ek<i>``, every subgraph node ``__eksub<j>`` (in place)."""
    from onnx import helper

    count = 0

    def walk(graph: Any) -> None:
        nonlocal count
        for node in graph.node:
            node.name = f"__eksub{count}"
            count += 1
            for attr in node.attribute:
                if attr.type == helper.AttributeProto.GRAPH:
                    walk(attr.g)
                elif attr.type == helper.AttributeProto.GRAPHS:
                    for sub in attr.graphs:
                        walk(sub)

    for index, node in enumerate(model.graph.node):
        node.name = f"__ek{index}"
        for attr in node.attribute:
            if attr.type == helper.AttributeProto.GRAPH:
                walk(attr.g)
            elif attr.type == helper.AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    walk(sub)


def host_share(model: Any, indexes: list[int]) -> HostShare | None:
    """Time per run of the top-level nodes at ``indexes`` of ``model`` (an
    ``onnx.ModelProto``, fixed shapes or symbolic dims run at 1) against all top-level
    nodes, on this host. None when onnxruntime cannot run the model here."""
    import onnx
    import onnxruntime as ort

    from .measure import random_feeds

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    _rename(copy)
    wanted = {f"__ek{i}" for i in indexes}
    with tempfile.TemporaryDirectory(prefix="edgekit-profile-") as folder:
        options = ort.SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(folder, "run"))
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 4
        try:
            sess = ort.InferenceSession(copy.SerializeToString(), options,
                                        providers=["CPUExecutionProvider"])
            feeds = random_feeds(sess)
            sess.run(None, feeds)  # warm-up: first-run allocations also land in the profile
            runs, began = 0, time.perf_counter()
            while runs < MIN_RUNS or time.perf_counter() - began < MIN_SECONDS:
                sess.run(None, feeds)
                runs += 1
            events = json.loads(Path(sess.end_profiling()).read_text())
        except Exception:  # noqa: BLE001 - onnxruntime's errors are untyped: not measurable
            return None
    per_node: dict[str, float] = {}
    for event in events:
        name = str(event.get("name", ""))
        if event.get("cat") == "Node" and name.endswith("_kernel_time"):
            node = name[: -len("_kernel_time")]
            per_node[node] = per_node.get(node, 0.0) + float(event.get("dur", 0))
    top = {k: v for k, v in per_node.items() if not k.startswith("__eksub")}
    calls = runs + 1  # the warm-up run is profiled too
    return HostShare(sum(v for k, v in top.items() if k in wanted) / calls,
                     sum(top.values()) / calls, runs)

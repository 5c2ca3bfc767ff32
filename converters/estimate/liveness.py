"""Peak activation memory by liveness over the execution order.

A buffer lives from the op that writes it to the last op that reads it (graph outputs to
the end, graph inputs from the start). Reshape-like ops share their input's buffer, and an
elementwise op may write over an input that dies at that op, as onnxruntime's allocation
planner and XNNPACK's memory planner both do. The peak is the largest sum of live buffers
at any op; it is a lower bound for what a runtime's arena allocates.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ops import Op
from .types import Graph


@dataclass(frozen=True)
class Liveness:
    peak_bytes: int
    peak_op: str  # the op at which the peak occurs
    total_bytes: int  # every activation buffer summed (no reuse at all)


def peak_activations(graph: Graph, ops: list[Op]) -> Liveness:
    end = len(ops)
    last_read: dict[str, int] = {}
    for index, op in enumerate(ops):
        for name in op.inputs:
            last_read[name] = index
    for name in graph.outputs:
        last_read[name] = end

    buffer_of: dict[str, int] = {}
    sizes: list[int] = []
    start: list[int] = []
    members: list[list[str]] = []

    def new_buffer(name: str, at: int) -> None:
        buffer_of[name] = len(sizes)
        sizes.append(graph.info(name).nbytes)
        start.append(at)
        members.append([name])

    for name in graph.inputs:
        new_buffer(name, -1)
    pinned = {buffer_of[n] for n in graph.inputs}  # caller-owned: never overwritten
    for index, op in enumerate(ops):
        for out in op.outputs:
            target = None
            if op.kind == "alias" and op.inputs and op.inputs[0] in buffer_of:
                target = buffer_of[op.inputs[0]]
            elif op.inplace:
                for name in op.inputs:
                    buf = buffer_of.get(name)
                    if (buf is not None and buf not in pinned
                            and sizes[buf] == graph.info(out).nbytes
                            and all(last_read.get(m, -1) == index for m in members[buf])):
                        target = buf
                        break
            if target is None:
                new_buffer(out, index)
            else:
                buffer_of[out] = target
                members[target].append(out)

    stop = [max([last_read.get(m, start[b]) for m in members[b]] + [start[b]])
            for b in range(len(sizes))]
    # sweep: +size where a buffer starts, -size after its last read (index shifted by one
    # so that graph inputs, alive "before" op 0, land at 0)
    delta = [0] * (end + 3)
    for b, size in enumerate(sizes):
        delta[max(start[b], 0) + 1] += size
        delta[min(stop[b], end) + 2] -= size
    peak, peak_at, live = 0, -1, 0
    for index in range(1, end + 2):
        live += delta[index]
        if live > peak:
            peak, peak_at = live, index - 1
    name = ops[peak_at].name if 0 <= peak_at < end else ""
    return Liveness(peak, name, sum(sizes))

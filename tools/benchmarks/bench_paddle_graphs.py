"""Two builds of one model side by side on this host's LiteRT: the .tflite of each artifact
timed paired on one thread (``common.paired``: CPU time of the caller's thread, blocks
alternating), the ratio A/B with its 90% interval, and each one's float compute ops.

Made for prepare's fusions (docs/measurements/paddle-graphs.md): PP-OCRv4 rec built with
them (all int8) against the build before them (the guard's float span):

    python tools/benchmarks/bench_paddle_graphs.py NEW.edgekit OLD.edgekit --rounds 20
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tools")]

from common import bare_call, one_input, paired, ratio_text  # noqa: E402


def _float_ops(path: Path) -> tuple[int, int]:
    """(float compute ops, all ops) of the artifact's .tflite, read from its flatbuffer."""
    from tools.realzoo.tflite_ops import float_compute_ops

    with zipfile.ZipFile(path) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".tflite"))
        floats, every = float_compute_ops(archive.read(name))
    return sum(floats.values()), sum(every.values())


def main(argv: list[str] | None = None) -> int:
    import edgekit

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path, help="artifact A (the numerator of the ratio)")
    parser.add_argument("b", type=Path, help="artifact B")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args(argv)
    models = {p: edgekit.load(str(p), threads=1, backend="litert") for p in (args.a, args.b)}
    x = one_input(models[args.a])
    calls = [bare_call(models[p], x) for p in (args.a, args.b)]
    result = paired(calls[0], calls[1], args.rounds, threads=1)
    for label, path, ms in (("A", args.a, result["a_ms"]), ("B", args.b, result["b_ms"])):
        floats, every = _float_ops(path)
        print(f"{label}: {path}  {ms:.2f} ms/call (median of {args.rounds} blocks, 1 thread, "
              f"LiteRT on this host); {every} ops, {floats} float compute")
    print(f"A/B time: {ratio_text(result)} (median of per-block ratios, 90% interval)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

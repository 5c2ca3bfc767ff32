"""``predict``'s cost around the runtime call, this tree against an older checkout (issue 12:
"the session indirection must not cost the hot path"), interleaved in one run.

    git worktree add --detach /tmp/edgekit-pre-session 03d5484   # before edgekit/runtime/session.py
    python tools/benchmarks/bench_predict_vs_old.py --old /tmp/edgekit-pre-session [--rounds 6]

Each tree runs in its own subprocess (one ``edgekit`` per process), the trees alternating
round by round; each subprocess times ``Model.predict`` against onnxruntime's C run of the
same feed (its ``_sess.run``) in paired blocks, at 1 thread in thread CPU time. Printed per
tree: the median bare call, the median extra microseconds of ``predict`` and the overhead.
A tree older than ``edgekit/device/cpu.py`` builds its session fused; it is run unfused here (as
this tree runs it on x86 without VNNI), so both trees time the same onnxruntime graph.
The digits int8 artifact is built with this tree unless ``--small`` names one.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]


def worker(tree: str, artifact: str, threads: int, unfuse: bool) -> None:
    sys.path.insert(0, tree)
    import onnxruntime as ort

    if unfuse:  # what edgekit/device/cpu.py's exact_int8 session does, for a tree without it
        base = ort.InferenceSession

        class Unfused(base):  # type: ignore[misc,valid-type]
            def __init__(self, model: bytes, sess_options: ort.SessionOptions | None = None,
                         **kw: object) -> None:
                so = sess_options or ort.SessionOptions()
                so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
                so.add_session_config_entry("session.disable_quant_qdq", "1")
                kw["disabled_optimizers"] = ["WeightBiasQuantization"]
                super().__init__(model, sess_options=so, **kw)

        ort.InferenceSession = Unfused
    import edgekit

    assert Path(edgekit.__file__).resolve().is_relative_to(Path(tree).resolve()), edgekit.__file__
    model = edgekit.load(artifact, backend="onnxruntime", threads=threads)
    shape = [d if isinstance(d, int) and d > 0 else 1 for d in model.inputs[0].shape]
    x = np.random.default_rng(0).random(shape).astype(np.float32)
    feeds, names = {model.inputs[0].name: x}, [o.name for o in model.outputs]
    native, options = model.backend.session._sess.run, ort.RunOptions()  # noqa: SLF001

    def bare() -> None:
        native(names, feeds, options)

    def api() -> None:
        model.predict(x)

    for _ in range(500):
        bare()
        api()
    clock = time.thread_time if threads == 1 else time.perf_counter
    times: dict[str, list[float]] = {"bare": [], "predict": []}
    for r in range(30):
        pair = (("bare", bare), ("predict", api))
        for key, fn in pair if r % 2 == 0 else pair[::-1]:
            t = clock()
            for _ in range(300):
                fn()
            times[key].append((clock() - t) / 300)
    b, p = np.array(times["bare"]), np.array(times["predict"])
    print(json.dumps({"bare_us": float(np.median(b)) * 1e6,
                      "extra_us": float(np.median(p - b)) * 1e6,
                      "overhead": float(np.median(p / b)) - 1.0}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", required=True, help="checkout of the older tree")
    parser.add_argument("--small", help="digits int8 artifact (default: build one)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args(argv)
    old_has_cpu = (Path(args.old) / "edgekit" / "cpu.py").exists()
    trees = [("old", args.old, not old_has_cpu), ("this", str(REPO), False)]
    with tempfile.TemporaryDirectory() as tmp:
        artifact = args.small
        if artifact is None:
            sys.path[:0] = [str(REPO), str(REPO / "tools")]
            from tools.benchmarks.common import build_small

            artifact = str(build_small(Path(tmp) / "digits.edgekit"))
        runs: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in trees}
        for r in range(args.rounds):
            for name, tree, unfuse in trees if r % 2 == 0 else trees[::-1]:
                out = subprocess.run(
                    [sys.executable, __file__, "--worker", tree, artifact, str(args.threads),
                     str(int(unfuse))], capture_output=True, text=True, check=True)
                runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    for name, rs in runs.items():
        print(f"{name:5s} {args.threads}t  bare {np.median([r['bare_us'] for r in rs]):7.1f} us  "
              f"predict extra {np.median([r['extra_us'] for r in rs]):+6.2f} us  overhead "
              f"{np.median([r['overhead'] for r in rs]):+.2%}  (runs: "
              + ", ".join(f"{r['overhead']:+.1%}" for r in rs) + ")")
    ratio = (np.median([r["extra_us"] for r in runs["this"]])
             / np.median([r["extra_us"] for r in runs["old"]]))
    print(f"extra us, this tree / old tree: {ratio:.3f}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1")
    else:
        sys.exit(main())

"""The two accuracy figures of round 6 on the same pruned models (issue 34, pruning.md round 7):
top-1 agreement with the dense float model (what the prune stage reports) against the budget
search's ``accuracy_drop`` for unlabelled data before 2da8cdb, ``(1 - mean cosine) x 100``
(``budgets.accuracy_figures``), and the top1 metric's drop the search now uses.

    python tools/benchmarks/bench_prune_metric.py rzwork/e2e21.pt rzwork/e2e_cut0.1.pt
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_prune_select import efficientnet  # noqa: E402
from bench_prune_where import logits  # noqa: E402

from tools.realzoo.vision_sets import imagenet_objects  # noqa: E402


def main() -> int:
    import torch
    from edgekit.converters.metrics import top1
    from edgekit.converters.search import budgets

    val = imagenet_objects()[0]
    want = logits(efficientnet(), val)
    for path in map(Path, sys.argv[1:]):
        got = logits(torch.load(path, weights_only=False)[0], val)
        agree = int((got.argmax(1) == want.argmax(1)).sum())
        by_cosine = budgets.accuracy_figures(want, got, None)
        print(f"{path.name}: top-1 agreement {agree}/{len(val)} = {agree / len(val):.1%}; "
              f"cosine {by_cosine['cosine']:.5f} -> (1 - cosine) x 100 = "
              f"{by_cosine['accuracy_drop']:.2f} pts; top1 metric drop "
              f"{top1.top1([want], [got], None).drop:.2f} pts", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

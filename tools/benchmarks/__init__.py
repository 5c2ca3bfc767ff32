"""Benchmarks: each ``bench_*.py`` prints ratios measured side by side (``common.py`` holds what
several share). Run from the repository root as ``python tools/benchmarks/bench_x.py`` or
``python -m tools.benchmarks.bench_x``; figures and their history: ``docs/measurements/``."""

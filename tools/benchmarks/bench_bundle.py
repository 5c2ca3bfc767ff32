"""Size and build time of the digits example's rpi4 bundle (issue 18: under 40 MB, under 60 s
with a warm wheel cache). Builds twice: the first run fills pip's cache, the second is the
warm figure; also checks the two tarballs are byte-identical.

    python tools/benchmarks/bench_bundle.py
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
import time
from pathlib import Path

from edgekit.cli import main as edgekit

ROOT = Path(__file__).resolve().parents[2]
ARTIFACT = ROOT / "examples" / "raspberrypi" / "digits.rpi4.edgekit"


def build(out: Path) -> float:
    started = time.monotonic()
    code = edgekit(["bundle", str(ARTIFACT), "--target", "rpi4", "-o", str(out), "-q"])
    if code != 0:
        sys.exit(f"edgekit bundle exited {code}")
    return time.monotonic() - started


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        first, second = Path(tmp, "a", "digits.tar.gz"), Path(tmp, "b", "digits.tar.gz")
        cold = build(first)
        warm = build(second)
        same = first.read_bytes() == second.read_bytes()
        digest = hashlib.sha256(second.read_bytes()).hexdigest()[:16]
        size = second.stat().st_size / 1e6
    print(f"digits rpi4 bundle: {size:.1f} MB (limit 40), first build {cold:.1f} s, "
          f"warm rebuild {warm:.1f} s (limit 60), reproducible: {same} (sha256 {digest}...)")


if __name__ == "__main__":
    main()

"""The summary ``edgekit matrix`` prints: one row per cell, failures named after it."""

from __future__ import annotations

from collections.abc import Sequence

from .cells import CellResult

COLUMNS = ("cell", "key", "status", "size", "accuracy")
KEY_CHARS = 12


def size_text(count: int) -> str:
    return f"{count / 1e6:.2f} MB" if count >= 100_000 else f"{count / 1e3:.1f} kB" if count else "-"


def summary_table(results: Sequence[CellResult]) -> str:
    rows = [COLUMNS] + [(r.name, r.key[:KEY_CHARS] or "-", r.status, size_text(r.bytes),
                         r.accuracy or "-") for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in rows]
    counts = {s: sum(r.status == s for r in results) for s in ("built", "cached", "failed")}
    lines.append(f"{len(results)} cell(s): " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    return "\n".join(lines)


def failures(results: Sequence[CellResult]) -> str:
    """Every failed cell by name with its error, for stderr and the exit message."""
    failed = [r for r in results if r.status == "failed"]
    return "\n".join(f"  {r.name}: {r.error}" for r in failed)

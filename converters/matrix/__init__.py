"""``edgekit matrix``: models x targets x option sets as independent builds on an executor,
skipped when the output folder already holds an artifact with the cell's content key."""

from __future__ import annotations

from .cells import Cell, CellResult, accuracy_text, cached, plan_cells, run_cell
from .spec import MatrixSpec, MatrixSpecError, load_spec
from .table import failures, summary_table

__all__ = ["Cell", "CellResult", "MatrixSpec", "MatrixSpecError", "accuracy_text", "cached",
           "failures", "load_spec", "plan_cells", "run_cell", "summary_table"]

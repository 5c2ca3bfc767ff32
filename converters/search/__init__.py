"""The budget search: candidates are stage configs run through the build's plan.

``search`` (the driver), ``cache`` (stage prefixes run once and reused), ``budgets`` (limits,
checks and the figures they read), ``guard`` (per-layer int8 sensitivity, float fallback),
``table`` (the ranked candidate table). It sits above the stages: it imports them, they
never import it.
"""

from __future__ import annotations

from .search import RATIOS, Candidate, Search, run_search

__all__ = ["RATIOS", "Candidate", "Search", "run_search"]

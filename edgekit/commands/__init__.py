"""CLI commands beyond the core ones in ``edgekit/cli.py``: one module per command.

Each module exposes a click command named ``command``; list it here (import path, lazily
imported so that ``edgekit --help`` stays fast and light).
"""

from __future__ import annotations

COMMANDS: list[str] = [
    "edgekit.commands.bench",
    "edgekit.commands.run",
    "edgekit.commands.doctor",
    "edgekit.commands.emulate",
    "edgekit.commands.estimate",
    "edgekit.commands.calibrate_host",
]

"""The ``edgekit`` commands, by name: device commands here, host commands in the converters.

Each command module exposes a click command named ``command``. Both tables are static
(name -> module path) so that ``edgekit --help`` and every device command import no
command module but their own, and a device install never imports the host side: a host
command is imported only when it is run and its tools are installed (``host_missing``).
"""

from __future__ import annotations

from importlib.util import find_spec

DEVICE_COMMANDS: dict[str, str] = {
    "bench": "edgekit.commands.bench",
    "doctor": "edgekit.commands.doctor",
    "inspect": "edgekit.commands.inspect",
    "install": "edgekit.commands.install",
    "rollback": "edgekit.commands.rollback",
    "keygen": "edgekit.commands.keygen",
    "run": "edgekit.commands.run",
    "sign": "edgekit.commands.sign",
    "targets": "edgekit.commands.targets",
    "verify": "edgekit.commands.verify",
}

# Host-only: need onnx and the other build tools, live in edgekit.converters.commands.
HOST_COMMANDS: dict[str, str] = {
    "build": "edgekit.converters.commands.build",
    "bundle": "edgekit.converters.commands.bundle",
    "calibrate-host": "edgekit.converters.commands.calibrate_host",
    "emulate": "edgekit.converters.commands.emulate",
    "estimate": "edgekit.converters.commands.estimate",
    "matrix": "edgekit.converters.commands.matrix",
    "report": "edgekit.converters.commands.report",
}

# The one place that names the distribution and the extra holding the host tools.
# Not "edgekit": on the package index that name is an unrelated project (see setup.py).
DISTRIBUTION = "edgekit-sdk"
BUILD_EXTRA = "build"
INSTALL_HOST_TOOLS = f'pip install "{DISTRIBUTION}[{BUILD_EXTRA}]"'
# Import names of the host side and of the [build] extra's packages that a device install
# (numpy, click, one runtime) lacks; any one missing makes the host commands unavailable.
HOST_MODULES = ("edgekit.converters", "onnx", "onnxruntime", "PIL", "tqdm", "flatbuffers",
                "platformdirs", "filelock")


def host_missing() -> list[str]:
    """The host modules not installed here (found without importing them)."""
    missing = []
    for name in HOST_MODULES:
        try:
            found = find_spec(name) is not None
        except (ImportError, ValueError):  # a broken install counts as missing
            found = False
        if not found:
            missing.append(name)
    return missing

"""The digits example bundled for rpi4, built once per session (pip download of the target's
wheels: the first run fills pip's cache, later runs are warm)."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgekit.cli import main
from tests.conftest import EXAMPLE

SHIPPED = EXAMPLE / "digits.rpi4.edgekit"
BUNDLE_NAME = "digits-rpi4-bundle.tar.gz"


def build(out: Path) -> int:
    return main(["bundle", str(SHIPPED), "--target", "rpi4", "-o", str(out), "-q"])


@pytest.fixture(scope="session")
def digits_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / BUNDLE_NAME
    assert build(out) == 0
    return out

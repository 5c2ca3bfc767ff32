"""The example app is not an installed package: put its folder (classify_service.py and
app/) on sys.path before the test modules here import it."""

from __future__ import annotations

import sys

from tests.conftest import EXAMPLE

if str(EXAMPLE) not in sys.path:
    sys.path.insert(0, str(EXAMPLE))

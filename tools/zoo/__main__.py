"""``python tools/zoo OUT_DIR [NAME ...]``: export zoo models (see zoo/__init__.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tools/, so "zoo" imports

from zoo import main  # noqa: E402

sys.exit(main(sys.argv[1:]))

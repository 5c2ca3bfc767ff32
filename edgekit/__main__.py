"""``python -m edgekit``: the same CLI as the ``edgekit`` console script (install.sh runs it
this way, through the venv's interpreter, so no script's shebang has to be executable)."""

import sys

from edgekit.cli import main

sys.exit(main())

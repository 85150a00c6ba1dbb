"""``python -m routelab``: see routelab.cli."""

import sys

from .cli import main

sys.exit(main())

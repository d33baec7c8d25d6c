"""``python -m perfkit ...``: the same command line as the ``perfkit`` script."""

import sys

from ._cli import main

sys.exit(main())

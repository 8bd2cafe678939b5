"""``python -m perfsim``: the ``perfsim`` command line."""

import sys

from perfsim.cli import main

sys.exit(main())

"""`python -m watchkeeper.cli ...`: the same entry point as the `watchkeeper` script."""

import sys

from watchkeeper.cli.app import main

sys.exit(main())

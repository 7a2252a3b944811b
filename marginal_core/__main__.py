"""`python -m marginal_core` runs the command line interface (same as the `marginal` script)."""

import sys

from marginal_core.cli.commands import main

if __name__ == "__main__":
    sys.exit(main())

"""`python -m marginal_core.models --install | --warm | --list [names...]` (``cli.model_commands``)."""

import sys

from marginal_core.cli.model_commands import models_main

if __name__ == "__main__":
    sys.exit(models_main())

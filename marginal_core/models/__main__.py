"""`python -m marginal_core.models --install | --warm | --list [names...]` (see marginal_core.models.model_commands)."""

import sys

from marginal_core.models.model_commands import main

if __name__ == "__main__":
    sys.exit(main())

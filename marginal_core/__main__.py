"""`python -m marginal_core` runs the command line interface."""

from marginal_core.cli import main

if __name__ == "__main__":
    main()

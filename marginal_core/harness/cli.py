"""`marginal lm-eval ARGS`: lm-eval's own command line, with the ``marginal`` model and the
offline task folder registered first (lm-eval 0.4.13 discovers no plugins)."""

from __future__ import annotations

import sys


def main(args: list[str]) -> int | None:
    """Run ``lm-eval ARGS`` (exactly lm-eval's arguments) after registering marginal's backend
    and tasks; returns lm-eval's exit status."""
    from marginal_core.harness import register

    register()
    from lm_eval.__main__ import cli_evaluate

    argv = sys.argv
    sys.argv = ["lm-eval", *args]
    try:
        cli_evaluate()
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    finally:
        sys.argv = argv
    return 0

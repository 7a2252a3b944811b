"""Table 1 of the paper as a task: how well the constrained LM (the proxy) ranks tokenizations.

Each sentence is scored by the proxy alone; its metric is Spearman's rho between log p and log q
over the distinct tokenizations drawn (NaN where fewer than three were), and the table is the
mean and standard deviation of rho by nominal sentence length. The app's Rank correlation page
and ``bench/paper_tables/`` run it through the one evaluator, each with its own sentences.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from marginal_core.estimators.methods import Method
from marginal_core.tasks.markdown import table
from marginal_core.tasks.options import EvalOptions
from marginal_core.tasks.task import Request, Task

RANK_METHODS = (Method.PROXY.value,)  # what Table 1 runs: the proxy's log q beside the model's log p


@dataclass(frozen=True)
class Sentence:
    """One sentence of Table 1, with the nominal length (characters) it stands for."""

    id: str
    text: str
    length: int
    index: int = 0


def sentences_by_length(texts: Mapping[int, Sequence[tuple[str, str]]]) -> list[Sentence]:
    """Sentences from {nominal length: [(id, text), ...]}, shortest lengths first."""
    items = [(length, sid, text) for length in sorted(texts) for sid, text in texts[length]]
    return [Sentence(sid, text, length, i) for i, (length, sid, text) in enumerate(items)]


def rank_options(samples: int, seed: int = 0, **options: Any) -> EvalOptions:
    """The evaluator's options for Table 1: the proxy at k samples a sentence."""
    return EvalOptions(samples=samples, seed=seed, methods=RANK_METHODS, **options)


class RankTask(Task):
    """Spearman's rho of log p and log q per sentence, summarised by length (the paper's Table 1)."""

    name, unit, columns = "rank", "sentences", ["item", "choice", "length", "chars"]

    def __init__(self, dataset: str, sentences: Sequence[Sentence]) -> None:
        super().__init__(dataset)
        self.sentences = list(sentences)

    def load(self, options: EvalOptions) -> list[Sentence]:
        return self.sentences[: options.limit]

    def identity(self, options: EvalOptions, model: str) -> dict[str, Any]:
        return {"task": self.name, "dataset": self.dataset, "model": model, "samples": options.samples,
                "seed": options.seed}

    def requests(self, item: Sentence, record: dict[str, Any] | None = None) -> list[Request]:
        return [Request(0, "", item.text, {"length": item.length, "chars": len(item.text)})]

    def report(self, out: Path, items: Sequence[str], methods: Sequence[str]) -> dict[str, Any]:
        from marginal_core.tasks.store import read_samples
        from marginal_core.viz.analysis import rank_correlation

        samples = read_samples(out)
        rows = []
        for s in self.sentences:
            record = samples.get((s.id, 0, Method.PROXY.value))
            if s.id in items and record is not None:
                rho, n = rank_correlation(record["log_p"], record["log_q"])
                rows.append({"item": s.id, "length": s.length, "chars": len(s.text), "text": s.text, "rho": rho,
                             "distinct": n, "draws": int(sum(record["draws"]))})
        summary = by_length(rows)
        markdown = "\n".join(["## Table 1: Spearman's rho of log p and log q, by sentence length", "",
                              *table(["length ≈ (chars)", "sentences", "with ρ", "ρ (mean ± sd)", "distinct (mean)"],
                                     [[r["length"], r["sentences"], r["with_rho"], r["rho"], f"{r['distinct']:.0f}"]
                                      for r in summary]), ""])
        return {"task": self.name, "dataset": self.dataset, "sentences": len(rows), "rows": rows,
                "by_length": summary, "markdown": markdown}


def by_length(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per nominal length: sentences, those with a rho, its mean and standard deviation (also as
    text: 'mean ± sd', the mean alone for one rho, 'n/a' for none), and the mean count of distinct
    tokenizations."""
    out = []
    for length in sorted({r["length"] for r in rows}):
        group = [r for r in rows if r["length"] == length]
        rhos = [r["rho"] for r in group if not math.isnan(r["rho"])]
        mean = float(np.mean(rhos)) if rhos else math.nan
        std = float(np.std(rhos)) if rhos else math.nan
        out.append({"length": int(length), "sentences": len(group), "with_rho": len(rhos), "mean_rho": mean,
                    "std_rho": std, "rho": _mean_sd(rhos),
                    "distinct": float(np.mean([r["distinct"] for r in group]))})
    return out


def _mean_sd(values: Sequence[float]) -> str:
    if not values:
        return "n/a"
    return f"{np.mean(values):.2f}" + (f" ± {np.std(values):.2f}" if len(values) > 1 else "")

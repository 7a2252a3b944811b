"""Two models of one scan compared text by text: each text's log p(canonical), log p(text) and gain
under both, the difference log p_A − log p_B by canonical and by marginal, the texts where
marginalizing changes which model finds the text more likely (a flip), and Spearman's rho of the
gains over the corpus.

With three or more models, the report compares every pair (in the scan's model order) and the
paired CSV stacks the pairs (columns ``model_a``, ``model_b``); the Results page compares the pair
chosen in two boxes, the first two models by default. The rules of a flip and of a moved difference
are here (``flips``, ``moves``), and ``mc.compare``'s Difference uses them, so one text reads the
same here and on Compare.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from marginal_core.corpus.gains import TOP, best_rows, short_text
from marginal_core.ground.jsonsafe import json_float
from marginal_core.tasks import markdown

PER_MODEL = ("log_p_canonical", "log_p_text", "gain_nats", "method")  # a model's columns, suffixed _a / _b
SHOWN = 10  # texts in each "differ most" list of a report.md (the CSV holds them all)
# A difference between two models that marginalizing moves by this many nats or more is worth a sentence.
MOVED_NATS = 0.1


def flips(canonical: Any, marginal: Any) -> Any:
    """Whether marginalizing changes which model finds the text more likely, from log p_A − log p_B
    by canonical and by marginal (numbers or arrays alike: the Compare page's and a scan's rule)."""
    return ((canonical > 0) != (marginal > 0)) & (canonical != 0) & (marginal != 0)


def moves(canonical: Any, marginal: Any) -> Any:
    """Whether marginalizing moves the difference by MOVED_NATS or more (numbers or arrays alike)."""
    return abs(marginal - canonical) >= MOVED_NATS


def paired_table(texts: pd.DataFrame, a: str, b: str) -> pd.DataFrame:
    """A row per text both models scored (the tidy table's ``id``): each model's best bound and gain,
    the differences log p_A − log p_B by canonical and by marginal, and whether it flips or moves."""
    best = best_rows(texts.rename(columns={"id": "item"}), ("item", "model")).rename(
        columns={"item": "id", "log_marginal": "log_p_text"})
    order = list(dict.fromkeys(texts["id"]))  # the scan's text order

    def side(model: str, suffix: str) -> pd.DataFrame:
        part = best[best["model"] == model].set_index("id")
        return part[list(PER_MODEL)].add_suffix(suffix)

    wide = side(a, "_a").join(side(b, "_b"), how="inner")
    wide = wide.loc[[i for i in order if i in wide.index]]
    first = best.drop_duplicates("id").set_index("id")
    canonical = wide["log_p_canonical_a"] - wide["log_p_canonical_b"]
    marginal = wide["log_p_text_a"] - wide["log_p_text_b"]
    finite = np.isfinite(canonical) & np.isfinite(marginal)
    flipped = finite & flips(canonical, marginal)
    out = pd.DataFrame({"id": wide.index, "text": first.loc[wide.index, "text"].to_numpy(),
                        "context": first.loc[wide.index, "context"].to_numpy(), "model_a": a, "model_b": b})
    out = pd.concat([out, wide.reset_index(drop=True)], axis=1)
    return out.assign(diff_canonical=canonical.to_numpy(), diff_marginal=marginal.to_numpy(),
                      gain_diff=(wide["gain_nats_a"] - wide["gain_nats_b"]).to_numpy(),
                      flips=flipped.to_numpy(), moved=(finite & moves(canonical, marginal)).to_numpy())


def gain_rho(paired: pd.DataFrame) -> float | None:
    """Spearman's rho of the two models' gains; None with fewer than 3 texts or a constant side."""
    from scipy.stats import spearmanr

    gains = paired[["gain_nats_a", "gain_nats_b"]].replace([np.inf, -np.inf], np.nan).dropna()
    if len(gains) < 3 or gains["gain_nats_a"].nunique() < 2 or gains["gain_nats_b"].nunique() < 2:
        return None
    rho = float(spearmanr(gains["gain_nats_a"], gains["gain_nats_b"]).statistic)
    return rho if math.isfinite(rho) else None


def differ_most(paired: pd.DataFrame, by: str = "marginal", n: int = SHOWN) -> pd.DataFrame:
    """The n texts whose models differ most: by |log p_A(text) − log p_B(text)| (``marginal``) or
    by |gain_A − gain_B| (``gain``)."""
    column = {"marginal": "diff_marginal", "gain": "gain_diff"}[by]
    return paired.loc[paired[column].abs().sort_values(ascending=False, kind="stable").index[:n]]


@dataclass(frozen=True)
class Comparison:
    """Models a and b over the texts both scored: the paired table and its figures."""

    a: str
    b: str
    paired: pd.DataFrame

    @classmethod
    def of(cls, texts: pd.DataFrame, a: str, b: str) -> Comparison:
        """The comparison of two models of a scan's tidy table."""
        return cls(a, b, paired_table(texts, a, b))

    @cached_property
    def rho(self) -> float | None:
        """Spearman's rho of the gains (see gain_rho)."""
        return gain_rho(self.paired)

    @property
    def flips(self) -> pd.DataFrame:
        """The texts where marginalizing changes which model finds the text more likely."""
        return self.paired[self.paired["flips"]]

    def as_json(self) -> dict[str, Any]:
        """The figures, every flip and the texts that differ most, JSON-safe."""
        def rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
            return [{"id": r.id, "text": r.text, "context": r.context,
                     **{c: json_float(getattr(r, c)) for c in ("diff_canonical", "diff_marginal", "gain_a", "gain_b")}}
                    for r in frame.rename(columns={"gain_nats_a": "gain_a", "gain_nats_b": "gain_b"}).itertuples()]

        return {"a": self.a, "b": self.b, "texts": len(self.paired), "gain_rho": self.rho,
                "flips": len(self.flips), "moved": int(self.paired["moved"].sum()), "flip_list": rows(self.flips),
                "differ_most_marginal": rows(differ_most(self.paired, "marginal")),
                "differ_most_gain": rows(differ_most(self.paired, "gain"))}

    def markdown(self) -> str:
        """The report's section: rho, how many texts flip and move, the flips, the texts that differ most."""
        rho = "n/a (fewer than 3 texts, or one model's gains all equal)" if self.rho is None else f"{self.rho:.3f}"
        header = ["text", "id", f"canonical, {self.a} − {self.b}", f"marginal, {self.a} − {self.b}",
                  f"gain, {self.a}", f"gain, {self.b}"]

        def table(frame: pd.DataFrame) -> list[str]:
            return markdown.table(header, [[short_text(r.text), r.id, f"{r.diff_canonical:+.3f}", f"{r.diff_marginal:+.3f}",
                                            f"{r.gain_nats_a:.3f}", f"{r.gain_nats_b:.3f}"] for r in frame.itertuples()])

        flips, title = self.flips, f"### {self.a} against {self.b}: {len(self.paired)} texts scored by both"
        if not len(self.paired):
            return "\n".join([title, ""])
        lines = [title, "", f"Spearman's rho of the gains: {rho}. Marginalizing changes which model finds the text "
                 f"more likely on {len(flips)} of {len(self.paired)} texts; it moves log p({self.a}) − log p({self.b}) "
                 f"by {MOVED_NATS} nats or more on {int(self.paired['moved'].sum())}. Differences in nats.", ""]
        if len(flips):
            lines += [f"#### The {len(flips)} texts that flip", "", *table(flips.head(TOP)), ""]
            lines += [f"... and {len(flips) - TOP} more in compare.csv", ""] if len(flips) > TOP else []
        for by, what in (("marginal", "by log p(text)"), ("gain", "by gain")):
            shown = differ_most(self.paired, by)
            lines += [f"#### The {len(shown)} texts where the models differ most {what}", "", *table(shown), ""]
        return "\n".join(lines)


def comparisons(texts: pd.DataFrame, models: Sequence[str] | None = None) -> list[Comparison]:
    """Every pair of the models (default: the tidy table's, in its order), the first named as a."""
    models = list(dict.fromkeys(texts["model"])) if models is None else list(models)
    return [Comparison.of(texts, a, b) for a, b in itertools.combinations(models, 2)]

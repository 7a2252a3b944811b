"""Where the probability mass sits, and how well the constrained LM ranks tokenizations.

It reads finished estimates, so it needs no model: the estimators are imported for types only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy.special import logsumexp
from scipy.stats import spearmanr

from marginal_core.lattice.graph import Lattice
from marginal_core.lattice.paths import Path

if TYPE_CHECKING:
    from marginal_core.estimators.estimate_result import Estimate


def spearman(estimate: Estimate) -> tuple[float, int]:
    """Spearman's rho between log p and log q over the distinct proxy samples, and their count.

    NaN when fewer than three distinct paths were drawn (the paper's Table 1 statistic).
    """
    if estimate.log_q is None:
        raise ValueError("Spearman's rho needs proxy samples (with log q)")
    rows = estimate.distinct_paths()
    return rank_correlation(rows["log_p"], rows["log_q"])


def rank_correlation(log_p: Sequence[float | None], log_q: Sequence[float | None]) -> tuple[float, int]:
    """Spearman's rho between log p and log q over distinct paths (None: -inf, as stored in a
    results folder), and their count; NaN under three."""
    if len(log_p) < 3:
        return math.nan, len(log_p)
    p, q = (np.array([-math.inf if x is None else x for x in xs], dtype=float) for xs in (log_p, log_q))
    return float(spearmanr(p, q).statistic), len(log_p)


def boundaries(lattice: Lattice, path: Path) -> set[int]:
    """Byte offsets where the path's tokens end (the end of the text excluded)."""
    return set(lattice.nodes_of(path)[1:-1])


def splits_from_canonical(lattice: Lattice, path: Path) -> int:
    """How many token boundaries the path has that the canonical tokenization lacks.

    Off-by-one paths have exactly one; a path that merges canonical tokens without adding a
    boundary has none.
    """
    return len(boundaries(lattice, path) - boundaries(lattice, lattice.canonical))


def _shares(groups: pd.Series, log_p: np.ndarray, log_total: float) -> pd.DataFrame:
    """Log mass and share of the total per group."""
    frame = pd.DataFrame({"group": groups, "log_p": log_p})
    table = frame.groupby("group")["log_p"].agg(log_mass=logsumexp, paths="size").reset_index()
    table["share"] = np.exp(table["log_mass"] - log_total)
    return table


def mass_by_length(lattice: Lattice, estimate: Estimate) -> pd.DataFrame:
    """Mass of the found tokenizations (canonical included) by number of tokens."""
    rows = estimate.found(lattice)
    lengths = rows["ids"].map(len).rename("tokens")
    return _shares(lengths, rows["log_p"].to_numpy(), logsumexp(rows["log_p"])).rename(
        columns={"group": "tokens"}
    )


def mass_by_splits(lattice: Lattice, estimate: Estimate) -> pd.DataFrame:
    """Mass of the found tokenizations (canonical included) by splits from the canonical."""
    rows = estimate.found(lattice)
    splits = rows["ids"].map(lambda p: splits_from_canonical(lattice, p))
    return _shares(splits, rows["log_p"].to_numpy(), logsumexp(rows["log_p"])).rename(
        columns={"group": "splits"}
    )


def mass_by_kind(lattice: Lattice, estimate: Estimate) -> pd.DataFrame:
    """Mass on the canonical path, the off-by-one set and the rest, among what was found."""
    rows = estimate.found(lattice)
    canon = np.asarray(lattice.canonical)
    kind = rows["ids"].map(
        lambda p: "canonical" if p == lattice.canonical else "off_by_one" if _off_by_one(canon, p) else "rest"
    )
    return _shares(kind, rows["log_p"].to_numpy(), logsumexp(rows["log_p"])).rename(
        columns={"group": "kind"}
    )


def top_n_mass(lattice: Lattice, estimate: Estimate) -> pd.DataFrame:
    """Cumulative share of the found mass held by the n most probable tokenizations."""
    rows = estimate.found(lattice).sort_values("log_p", ascending=False)
    log_p = rows["log_p"].to_numpy()
    cumulative = np.exp(np.logaddexp.accumulate(log_p) - logsumexp(log_p))
    return pd.DataFrame({"n": np.arange(1, len(log_p) + 1), "cumulative_share": cumulative})


def top_tokenizations(lattice: Lattice, estimate: Estimate, n: int = 5) -> pd.DataFrame:
    """The n most probable tokenizations found (canonical included), with their share of the
    found mass: which tokenizations carry the marginal."""
    top = estimate.found(lattice).head(n)
    return pd.DataFrame({"ids": top["ids"].to_list(), "log_p": top["log_p"].to_numpy(),
                         "share": top["share"].to_numpy(),
                         "canonical": [p == lattice.canonical for p in top["ids"]]})


def underestimates(proxy: Estimate, lattice: Estimate) -> bool:
    """Whether the proxy's non-canonical estimate falls below the lattice lower bound."""
    return proxy.log_noncanonical < lattice.log_noncanonical


def _off_by_one(canon: np.ndarray, path: tuple[int, ...]) -> bool:
    """Whether a path of the lattice is the canonical one with one token split in two: one token
    longer, the same up to where they first differ and after the split (no set of the whole
    off-by-one set, which a long text's thousands of splits make gigabytes)."""
    if len(path) != len(canon) + 1:
        return False
    ids = np.asarray(path)
    differ = np.flatnonzero(ids[:-1] != canon)
    first = int(differ[0]) if differ.size else len(canon)
    return bool(np.array_equal(ids[first + 2 :], canon[first + 1 :]))

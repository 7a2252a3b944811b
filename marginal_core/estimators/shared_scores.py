"""One log p per tokenization across estimates shown together: the beam and the proxy score
their paths their own way (step by step), the lattice sampler in batched trie passes, and in
bfloat16 the two disagree in the second decimal, so one path could show two scores and the
beam's bound read below the lattice's although it holds the same paths. Here every path that
more than one estimate holds gets the trie scorer's one score, and the bounds and the proxy's
weights are recomputed from the scores shown."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from marginal_core.scoring.trie_scoring import score_paths

if TYPE_CHECKING:
    from marginal_core.estimators.estimate_result import Estimate
    from marginal_core.estimators.marginalizer import Marginalizer
    from marginal_core.lattice.paths import Path


def on_one_scorer(m: Marginalizer, reference: Estimate, others: Sequence[Estimate]) -> list[Estimate]:
    """The other estimates with one log p for every path two estimates hold: the reference's
    own (a lattice or exact estimate, trie-scored) where it holds the path, else the trie
    scorer's, in one score_paths call over the paths only the others share. A path one estimate
    alone holds keeps its score. A proxy estimate is taken as drawn without the canonical path
    (Marginalizer.proxy's default)."""
    scores: dict[Path, float] = dict(zip(reference.paths.tolist(), reference.log_p.tolist()))
    held = Counter(p for e in others for p in set(e.paths.tolist()))
    shared = [p for p, n in held.items() if n > 1 and p not in scores]
    scores.update(zip(shared, score_paths(m.lm, shared, m.context_state()).tolist()))
    return [_with_scores(e, np.array([scores.get(p, lp) for p, lp in zip(e.paths.tolist(), e.log_p.tolist())],
                                     dtype=np.float64)) for e in others]


def _with_scores(estimate: Estimate, log_p: np.ndarray) -> Estimate:
    """The estimate with these path scores, its running estimate recomputed: the importance
    weights' mean for the proxy, else the sum over distinct paths (a lower bound)."""
    if not len(log_p):
        return estimate
    if estimate.log_q is not None:
        running = np.logaddexp.accumulate(log_p - estimate.log_q) - np.log(np.arange(1, len(log_p) + 1))
    else:
        running = np.logaddexp.accumulate(log_p)
    last = float(running[-1]) if math.isfinite(running[-1]) else -math.inf
    return replace(estimate, log_p=log_p, running=running, log_noncanonical=last)

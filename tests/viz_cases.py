"""Shared by the test_viz*.py files: the QA_TEXT whose lattice is conftest's ``qa`` fixture,
made-up estimates over real samples, and the visible edges of a DOT source."""

from __future__ import annotations

import re

import numpy as np

from marginal_core.estimators.estimate_result import Estimate
from marginal_core.estimators.run_state import Completion, RunState
from marginal_core.lattice.sampling import lattice_samples

QA_TEXT = " Paris is the capital of France."


def fake_estimate(lat, k=40, method="lattice", with_q=False, seed=0):
    """An Estimate over real lattice samples with deterministic made-up scores."""
    samples = lattice_samples(lat, k, seed=seed)
    n = len(samples)
    rng = np.random.default_rng(seed)
    log_p = -10.0 - samples.paths.lengths + rng.normal(0, 0.5, n)
    log_q = log_p + rng.normal(0, 1.0, n) if with_q else None
    running = np.logaddexp.accumulate(log_p)
    return Estimate(
        method=method, log_p_canonical=-5.0, log_noncanonical=float(running[-1]), paths=samples.paths,
        kinds=samples.kinds if not with_q else np.full(n, "proxy"), log_p=log_p, log_q=log_q,
        running=running, seconds=1.0, forward_passes=2, run=RunState(Completion(n)),
    )


def edges(dot: str) -> list[tuple[int, int, str]]:
    """(start, end, attribute text) of every visible edge of a DOT source."""
    found = []
    for a, b, attrs in re.findall(r"\bn(\d+) -> n(\d+) \[(.*?)\]\s*$", dot, flags=re.M):
        if "invis" not in attrs:
            found.append((int(a), int(b), attrs))
    return found

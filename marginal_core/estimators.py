"""The four marginal estimators the app, the CLI and the experiments compare.

All of them share one text, one lattice, one context and the canonical path's score:

- canonical: p(canonical) alone; the non-canonical marginal is taken as zero.
- lattice:   Algorithm 1's sample set scored in batched passes; its log-sum-exp is a lower
             bound on the non-canonical marginal that only grows with k (nested sample sets).
- proxy:     importance sampling from the LM constrained to the lattice (unbiased, slow).
- exact:     every path scored; offered while the path count is under a budget.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from marginal_core.context import context_ids
from marginal_core.lattice import DEFAULT_ENUMERATION_BUDGET, Lattice, PathBatch, build_lattice
from marginal_core.models import LoadedModel
from marginal_core.proxy import proxy_sample
from marginal_core.sampling import lattice_samples
from marginal_core.scoring import ScoreStats, score_paths

METHODS = ("canonical", "lattice", "proxy", "exact")
Progress = Callable[[int, int], None]
StopCheck = Callable[[], bool]


@dataclass(frozen=True, eq=False)
class Estimate:
    """One method's estimate with every sample behind it, in sample order.

    ``running`` is the non-canonical log estimate after each sample. Marginals are natural
    logs; -inf means no mass found (no non-canonical path, or the canonical method).
    """

    method: str
    log_p_canonical: float
    log_noncanonical: float
    paths: PathBatch
    kinds: np.ndarray
    log_p: np.ndarray
    log_q: np.ndarray | None
    running: np.ndarray
    seconds: float
    forward_passes: int
    num_paths: int | None = None
    cancelled: bool = False

    @property
    def log_marginal(self) -> float:
        """log p(text): the canonical path plus the non-canonical estimate."""
        return float(np.logaddexp(self.log_p_canonical, self.log_noncanonical))

    @property
    def num_samples(self) -> int:
        return len(self.log_p)

    @cached_property
    def num_distinct(self) -> int:
        return len(set(self.paths.tolist()))

    def running_marginal(self) -> np.ndarray:
        """The full log marginal after each sample."""
        return np.logaddexp(self.log_p_canonical, self.running)

    def summary(self) -> dict:
        """The figures the CLI prints (non-finite logs become None, as JSON has no -inf)."""
        row = {
            "log_marginal": _finite(self.log_marginal),
            "log_noncanonical": _finite(self.log_noncanonical),
            "num_samples": self.num_samples,
            "num_distinct": self.num_distinct,
            "seconds": round(self.seconds, 4),
            "forward_passes": self.forward_passes,
        }
        if self.num_paths is not None:
            row["num_paths"] = str(self.num_paths)
        if self.cancelled:
            row["cancelled"] = True
        return row


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _log_sum_running(log_p: np.ndarray) -> np.ndarray:
    """Running log-sum-exp: the lower bound after each sample."""
    return np.logaddexp.accumulate(log_p) if len(log_p) else log_p


class Marginalizer:
    """Estimators for one text (and optional context) under one loaded model."""

    def __init__(self, lm: LoadedModel, text: str, context: str | None = None) -> None:
        self.lm, self.text, self.context = lm, text, context
        self.lattice: Lattice = build_lattice(text, lm.tokenizer)
        self.context_ids: list[int] = context_ids(lm.tokenizer, context)

    @cached_property
    def log_p_canonical(self) -> float:
        """log p(canonical | context), one forward pass."""
        return float(score_paths(self.lm, [self.lattice.canonical], self.context_ids)[0])

    def _score(
        self, paths: PathBatch, progress: Progress | None, should_stop: StopCheck | None, chunk: int
    ) -> tuple[np.ndarray, ScoreStats, bool]:
        """Scores in sample order, chunk by chunk so a caller can watch and stop."""
        stats, scores, total = ScoreStats(), [], len(paths)
        for start in range(0, total, chunk):
            if should_stop and should_stop():
                return np.concatenate(scores or [np.zeros(0)]), stats, True
            part = PathBatch(
                paths.ids[paths.offsets[start] : paths.offsets[min(start + chunk, total)]],
                paths.offsets[start : min(start + chunk, total) + 1] - paths.offsets[start],
            )
            scores.append(score_paths(self.lm, part, self.context_ids, stats=stats))
            if progress:
                progress(min(start + chunk, total), total)
        return np.concatenate(scores or [np.zeros(0)]), stats, False

    def _scored(
        self,
        method: str,
        paths: PathBatch,
        kinds: np.ndarray,
        started: float,
        progress: Progress | None,
        should_stop: StopCheck | None,
        chunk: int | None,
        num_paths: int | None = None,
    ) -> Estimate:
        log_p, stats, cancelled = self._score(paths, progress, should_stop, chunk or max(len(paths), 1))
        kept = PathBatch(paths.ids[: paths.offsets[len(log_p)]], paths.offsets[: len(log_p) + 1])
        running = _log_sum_running(log_p)
        return Estimate(
            method=method,
            log_p_canonical=self.log_p_canonical,
            log_noncanonical=float(running[-1]) if len(running) else -math.inf,
            paths=kept,
            kinds=kinds[: len(log_p)],
            log_p=log_p,
            log_q=None,
            running=running,
            seconds=time.perf_counter() - started,
            forward_passes=stats.forward_passes,
            cancelled=cancelled,
            num_paths=num_paths,
        )

    def canonical(self) -> Estimate:
        """The canonical tokenization alone."""
        started = time.perf_counter()
        log_p = self.log_p_canonical
        return Estimate(
            method="canonical",
            log_p_canonical=log_p,
            log_noncanonical=-math.inf,
            paths=PathBatch.from_paths([self.lattice.canonical]),
            kinds=np.array(["canonical"]),
            log_p=np.array([log_p]),
            log_q=None,
            running=np.array([-math.inf]),
            seconds=time.perf_counter() - started,
            forward_passes=1,
        )

    def lattice_estimate(
        self,
        k: int,
        *,
        max_len: int | None = None,
        seed: int | None = 0,
        progress: Progress | None = None,
        should_stop: StopCheck | None = None,
        chunk: int | None = None,
    ) -> Estimate:
        """Algorithm 1 with k samples, scored in batched trie passes (a lower bound)."""
        started = time.perf_counter()
        samples = lattice_samples(self.lattice, k, max_len=max_len, seed=seed)
        return self._scored(
            "lattice", samples.paths, samples.kinds, started, progress, should_stop, chunk
        )

    def exact(
        self,
        *,
        budget: int = DEFAULT_ENUMERATION_BUDGET,
        progress: Progress | None = None,
        should_stop: StopCheck | None = None,
        chunk: int | None = None,
    ) -> Estimate:
        """Every non-canonical path scored (TooManyPathsError beyond budget)."""
        started = time.perf_counter()
        paths = [p for p in self.lattice.enumerate(budget=budget) if p != self.lattice.canonical]
        batch = PathBatch.from_paths(paths)
        kinds = np.full(len(paths), "exact")
        return self._scored(
            "exact", batch, kinds, started, progress, should_stop, chunk,
            num_paths=self.lattice.count(),
        )

    def proxy(
        self,
        k: int,
        *,
        seed: int | None = 0,
        include_canonical: bool = False,
        progress: Progress | None = None,
        should_stop: StopCheck | None = None,
    ) -> Estimate:
        """Importance sampling from the lattice-constrained LM (the paper's baseline).

        With include_canonical the proposal covers every path and the estimate is of the full
        marginal; its non-canonical part is then reported as log(full - canonical).
        """
        result = proxy_sample(
            self.lm, self.lattice, k, self.context_ids,
            include_canonical=include_canonical, seed=seed,
            progress=progress, should_stop=should_stop,
        )
        running = result.running_log_estimates()
        if include_canonical:
            running = _log_minus(running, self.log_p_canonical)
        return Estimate(
            method="proxy",
            log_p_canonical=self.log_p_canonical,
            log_noncanonical=float(running[-1]) if len(running) else -math.inf,
            paths=result.paths,
            kinds=np.full(len(result), "proxy"),
            log_p=result.log_p,
            log_q=result.log_q,
            running=running,
            seconds=result.seconds,
            forward_passes=result.forward_passes,
            cancelled=result.cancelled,
        )

    def estimate(
        self,
        method: str,
        *,
        samples: int = 1000,
        max_len: int | None = None,
        seed: int | None = 0,
        budget: int = DEFAULT_ENUMERATION_BUDGET,
        progress: Progress | None = None,
        should_stop: StopCheck | None = None,
    ) -> Estimate:
        """Run one method by name (one of METHODS)."""
        if method == "canonical":
            return self.canonical()
        if method == "lattice":
            return self.lattice_estimate(
                samples, max_len=max_len, seed=seed, progress=progress, should_stop=should_stop
            )
        if method == "proxy":
            return self.proxy(samples, seed=seed, progress=progress, should_stop=should_stop)
        if method == "exact":
            return self.exact(budget=budget, progress=progress, should_stop=should_stop)
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")


def _log_minus(log_a: np.ndarray, log_b: float) -> np.ndarray:
    """log(exp(a) - exp(b)) elementwise, -inf where a <= b (an estimate below the canonical)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = log_a + np.log1p(-np.exp(log_b - log_a))
    return np.where(log_a > log_b, diff, -np.inf)

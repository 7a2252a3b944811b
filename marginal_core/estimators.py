"""The four marginal estimators the app, the CLI and the experiments compare.

All of them share one text, one lattice, one context and the canonical path's score:

- canonical: p(canonical) alone; the non-canonical marginal is taken as zero.
- lattice:   Algorithm 1's sample set scored in batched passes; its log-sum-exp is a lower
             bound on the non-canonical marginal that only grows with k (nested sample sets).
- proxy:     importance sampling from the LM constrained to the lattice (unbiased, slow).
- exact:     every path scored; offered while the path count is under a budget.

Every method is a stream: ``Marginalizer.stream`` yields the estimate after each chunk of
samples (the app draws it live and keeps it when stopped); ``Marginalizer.estimate`` runs the
stream to its end. The canonical score is computed once, before any method's clock starts.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from marginal_core.context import context_ids
from marginal_core.lattice import DEFAULT_ENUMERATION_BUDGET, Lattice, PathBatch, build_lattice
from marginal_core.lm.adapter import LM, ContextState
from marginal_core.models import LoadedModel
from marginal_core.proxy import ProxyResult, proxy_stream
from marginal_core.sampling import lattice_samples
from marginal_core.scoring import ScoreStats, score_paths

METHODS = ("canonical", "lattice", "proxy", "exact")
Progress = Callable[[int, int], None]
StopCheck = Callable[[], bool]
Checkpoints = tuple[tuple[int, float], ...]


@dataclass(frozen=True, eq=False)
class Estimate:
    """One method's estimate with every sample behind it, in sample order.

    ``running`` is the non-canonical log estimate after each sample. Marginals are natural
    logs; -inf means no mass found (no non-canonical path, or the canonical method).
    A stream's estimates before the last have ``done`` False; a stopped run's last one has
    ``cancelled`` True. ``checkpoints`` holds (samples so far, seconds) after each chunk.
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
    done: bool = True
    requested: int | None = None
    checkpoints: Checkpoints = ()

    @property
    def log_marginal(self) -> float:
        """log p(text): the canonical path plus the non-canonical estimate."""
        return float(np.logaddexp(self.log_p_canonical, self.log_noncanonical))

    @property
    def num_samples(self) -> int:
        return len(self.log_p)

    @property
    def fraction(self) -> float:
        """Share of the requested samples this estimate covers (1.0 once done)."""
        if self.done or not self.requested:
            return 1.0
        return min(1.0, self.num_samples / self.requested)

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


def _last_of(running: np.ndarray) -> float:
    return float(running[-1]) if len(running) else -math.inf


def _scaled(progress: Progress | None, start: int, size: int, total: int) -> Progress | None:
    """A chunk's (done, of) progress as (paths so far, paths), counting the chunk's share."""
    if progress is None:
        return None
    return lambda done, of: progress(start + size * done / max(of, 1), total)


def _head(paths: PathBatch, start: int, stop: int) -> PathBatch:
    """Paths [start, stop) as their own batch."""
    return PathBatch(
        paths.ids[paths.offsets[start] : paths.offsets[stop]],
        paths.offsets[start : stop + 1] - paths.offsets[start],
    )


class Marginalizer:
    """Estimators for one text (and optional context) under one loaded model."""

    def __init__(self, lm: LM | LoadedModel, text: str, context: str | None = None) -> None:
        self.lm, self.text, self.context = LM.of(lm), text, context
        self.lattice: Lattice = build_lattice(text, self.lm.tokenizer)
        self.context_ids: list[int] = context_ids(self.lm.tokenizer, context)
        self.canonical_seconds = 0.0
        self._context_state: ContextState | None = None

    def context_state(self) -> ContextState:
        """The context's KV cache, prefilled on first use and shared by every chunk and method."""
        if self._context_state is None:
            self._context_state = self.lm.prefill(self.context_ids)
        return self._context_state

    @cached_property
    def log_p_canonical(self) -> float:
        """log p(canonical | context), one forward pass (timed in canonical_seconds)."""
        started = time.perf_counter()
        score = float(score_paths(self.lm, [self.lattice.canonical], self.context_state())[0])
        self.canonical_seconds = time.perf_counter() - started
        return score

    # ---------------------------------------------------------------- the streams

    def _scored_stream(
        self,
        method: str,
        paths: PathBatch,
        kinds: np.ndarray,
        started: float,
        chunk: int | None,
        should_stop: StopCheck | None,
        progress: Progress | None,
        num_paths: int | None = None,
    ) -> Iterator[Estimate]:
        """Score paths chunk by chunk in sample order, yielding the lower bound after each.

        progress gets (paths scored, paths), fractional within a chunk (from tokens fed)."""
        total, stats = len(paths), ScoreStats()
        step = max(1, chunk or total)
        scores: list[np.ndarray] = [np.zeros(0)]
        checkpoints: list[tuple[int, float]] = []
        stop = 0
        while True:
            cancelled = stop < total and should_stop is not None and should_stop()
            if not cancelled and stop < total:
                start, stop = stop, min(stop + step, total)
                within = _scaled(progress, start, stop - start, total)
                head = _head(paths, start, stop)
                scores.append(score_paths(self.lm, head, self.context_state(), stats=stats, progress=within))
            log_p = np.concatenate(scores)
            running = np.logaddexp.accumulate(log_p) if len(log_p) else log_p
            seconds = time.perf_counter() - started
            checkpoints.append((stop, seconds))
            yield Estimate(
                method=method,
                log_p_canonical=self.log_p_canonical,
                log_noncanonical=_last_of(running),
                paths=_head(paths, 0, stop),
                kinds=kinds[:stop],
                log_p=log_p,
                log_q=None,
                running=running,
                seconds=seconds,
                forward_passes=stats.forward_passes,
                num_paths=num_paths,
                cancelled=cancelled,
                done=stop == total,
                requested=total,
                checkpoints=tuple(checkpoints),
            )
            if cancelled or stop == total:
                return

    def _canonical_stream(self) -> Iterator[Estimate]:
        log_p = self.log_p_canonical
        yield Estimate(
            method="canonical",
            log_p_canonical=log_p,
            log_noncanonical=-math.inf,
            paths=PathBatch.from_paths([self.lattice.canonical]),
            kinds=np.array(["canonical"]),
            log_p=np.array([log_p]),
            log_q=None,
            running=np.array([-math.inf]),
            seconds=self.canonical_seconds,
            forward_passes=1,
            requested=1,
            checkpoints=((1, self.canonical_seconds),),
        )

    def _lattice_stream(
        self, k: int, max_len: int | None, seed: int | None, chunk: int | None, should_stop: StopCheck | None,
        progress: Progress | None,
    ) -> Iterator[Estimate]:
        self.log_p_canonical  # noqa: B018 -- scored once, outside the timing
        started = time.perf_counter()
        samples = lattice_samples(self.lattice, k, max_len=max_len, seed=seed)
        yield from self._scored_stream("lattice", samples.paths, samples.kinds, started, chunk, should_stop, progress)

    def _exact_stream(
        self, budget: int, chunk: int | None, should_stop: StopCheck | None, progress: Progress | None
    ) -> Iterator[Estimate]:
        self.log_p_canonical  # noqa: B018
        started = time.perf_counter()
        paths = [p for p in self.lattice.enumerate(budget=budget) if p != self.lattice.canonical]
        yield from self._scored_stream(
            "exact", PathBatch.from_paths(paths), np.full(len(paths), "exact"), started, chunk, should_stop,
            progress, num_paths=self.lattice.count(),
        )

    def _proxy_stream(
        self, k: int, seed: int | None, include_canonical: bool, chunk: int | None, should_stop: StopCheck | None,
        progress: Progress | None,
    ) -> Iterator[Estimate]:
        self.log_p_canonical  # noqa: B018
        checkpoints: list[tuple[int, float]] = []
        options = {"batch_size": chunk} if chunk else {}
        for result in proxy_stream(
            self.lm, self.lattice, k, self.context_state(),
            include_canonical=include_canonical, seed=seed, should_stop=should_stop, progress=progress, **options,
        ):
            checkpoints.append((len(result), result.seconds))
            yield self._from_proxy(result, tuple(checkpoints))

    def _from_proxy(self, result: ProxyResult, checkpoints: Checkpoints) -> Estimate:
        """An Estimate of the non-canonical marginal from proxy samples so far."""
        running = result.running_log_estimates()
        if result.include_canonical:
            running = _log_minus(running, self.log_p_canonical)
        return Estimate(
            method="proxy",
            log_p_canonical=self.log_p_canonical,
            log_noncanonical=_last_of(running),
            paths=result.paths,
            kinds=np.full(len(result), "proxy"),
            log_p=result.log_p,
            log_q=result.log_q,
            running=running,
            seconds=result.seconds,
            forward_passes=result.forward_passes,
            cancelled=result.cancelled,
            done=result.done,
            requested=result.requested,
            checkpoints=checkpoints,
        )

    def stream(
        self,
        method: str,
        *,
        samples: int = 1000,
        max_len: int | None = None,
        seed: int | None = 0,
        budget: int = DEFAULT_ENUMERATION_BUDGET,
        include_canonical: bool = False,
        chunk: int | None = None,
        should_stop: StopCheck | None = None,
        progress: Progress | None = None,
    ) -> Iterator[Estimate]:
        """The estimate of one method (one of METHODS) after each chunk; the last is the result.

        chunk is the samples per update (None: lattice and exact score everything at once,
        which shares the most prefixes; the proxy draws in its default batches). Samples do not
        depend on chunk. should_stop is polled between chunks (and between proxy passes);
        progress gets (samples done, samples requested) as work goes on.
        """
        if method == "canonical":
            return self._canonical_stream()
        if method == "lattice":
            return self._lattice_stream(samples, max_len, seed, chunk, should_stop, progress)
        if method == "proxy":
            return self._proxy_stream(samples, seed, include_canonical, chunk, should_stop, progress)
        if method == "exact":
            return self._exact_stream(budget, chunk, should_stop, progress)
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")

    def estimate(self, method: str, **options) -> Estimate:
        """Run one method's stream to its end (options as for ``stream``)."""
        return deque(self.stream(method, **options), maxlen=1).pop()

    def canonical(self) -> Estimate:
        """The canonical tokenization alone."""
        return self.estimate("canonical")

    def lattice_estimate(self, k: int, **options) -> Estimate:
        """Algorithm 1 with k samples, scored in batched trie passes (a lower bound)."""
        return self.estimate("lattice", samples=k, **options)

    def exact(self, **options) -> Estimate:
        """Every non-canonical path scored (TooManyPathsError beyond the budget option)."""
        return self.estimate("exact", **options)

    def proxy(self, k: int, **options) -> Estimate:
        """Importance sampling from the lattice-constrained LM (the paper's baseline).

        With include_canonical the proposal covers every path and the estimate is of the full
        marginal; its non-canonical part is then reported as log(full - canonical).
        """
        return self.estimate("proxy", samples=k, **options)


def _log_minus(log_a: np.ndarray, log_b: float) -> np.ndarray:
    """log(exp(a) - exp(b)) elementwise, -inf where a <= b (an estimate below the canonical)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = log_a + np.log1p(-np.exp(log_b - log_a))
    return np.where(log_a > log_b, diff, -np.inf)

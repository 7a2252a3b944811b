"""The marginal estimators the app, the CLI and the experiments compare.

All of them share one text, one lattice, one context and the canonical path's score:

- canonical: p(canonical) alone; the non-canonical marginal is taken as zero.
- lattice:   Algorithm 1's sample set scored in batched passes; its log-sum-exp is a lower
             bound on the non-canonical marginal that only grows with k (nested sample sets).
- proxy:     importance sampling from the LM constrained to the lattice (unbiased, slow).
- beam:      the most probable non-canonical paths found by a beam of W prefixes per lattice
             state (``marginal_core.estimators.beam``); a lower bound that grows with W.
- exact:     every path scored; offered while the path count is under a budget.

Every method is a stream: ``Marginalizer.stream`` yields the estimate after each chunk of
samples (the app draws it live and keeps it when stopped); ``Marginalizer.estimate`` runs the
stream to its end. The canonical score is computed once, outside every method's clock (alone, or
in a lattice or exact run's first chunk with ``canonical_in_first_chunk``).
An Estimate, its options and its run's state are defined in ``estimate_result``,
``estimate_options`` and ``run_state`` (no torch), and imported from there.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from marginal_core.estimators.beam import anytime_beam, beam_stream
from marginal_core.estimators.beam_width import auto_widths
from marginal_core.estimators.estimate_options import EstimateOptions, chunk_sizes
from marginal_core.estimators.estimate_result import Estimate, Source
from marginal_core.estimators.methods import Method
from marginal_core.estimators.proxy import ProxyResult, proxy_stream
from marginal_core.estimators.run_state import BeamRun, Checkpoints, Completion, RunState
from marginal_core.ground import hooks as serving_hooks
from marginal_core.ground.errors import ContextWindowError, MarginalError
from marginal_core.ground.progress import Progress, StopCheck
from marginal_core.lattice.conditioning import context_ids
from marginal_core.lattice.graph import Lattice, lattice_of
from marginal_core.lattice.paths import PathBatch
from marginal_core.lattice.proposal import proposal_of
from marginal_core.lattice.sampling import lattice_samples
from marginal_core.lm.adapter import LM
from marginal_core.lm.contexts import ContextState
from marginal_core.models import dtype_name, load_model
from marginal_core.scoring.score_stats import ScoreStats
from marginal_core.scoring.trie_scoring import score_paths
from marginal_core.search.surprisal.result import Surprisal

__all__ = ["CanonicalScore", "Marginalizer", "by_context"]


@dataclass(frozen=True)
class CanonicalScore:
    """log p(canonical | context) and the seconds its forward pass took."""

    log_p: float
    seconds: float


def _last_of(running: np.ndarray) -> float:
    return float(running[-1]) if len(running) else -math.inf


def _scaled(progress: Progress | None, start: int, size: int, total: int) -> Progress | None:
    """A chunk's (done, of) progress as (paths so far, paths), counting the chunk's share."""
    if progress is None:
        return None
    return lambda done, of: progress(start + size * done / max(of, 1), total)


def model_of(model: LM | str, device: str | None, dtype: str | None) -> LM:
    """A model's name loaded on device in dtype (default auto), or the loaded model as it is."""
    if isinstance(model, str):
        return load_model(model, device=device, dtype=dtype or "auto")
    if device is not None or dtype is not None:
        raise MarginalError(f"device and dtype go with a model's name: {model.name} is loaded already "
                            f"(load_model(name, device=..., dtype=...) loads it otherwise)")
    return model


def _handing_on(stream: Iterator[Estimate]) -> Iterator[Estimate]:
    """A stream whose chunk ends are checkpoints (``serving_hooks.checkpoint``): where runs take
    turns (the app's), another waiting run gets the device while this one's estimate is drawn."""
    for estimate in stream:
        serving_hooks.checkpoint()
        yield estimate


def _head(paths: PathBatch, start: int, stop: int) -> PathBatch:
    """Paths [start, stop) as their own batch."""
    return PathBatch(
        paths.ids[paths.offsets[start] : paths.offsets[stop]],
        paths.offsets[start : stop + 1] - paths.offsets[start],
    )


class Marginalizer:
    """Estimators for one text (and optional context) under one loaded model.

    The context is prefilled once and its KV cache shared by every chunk of every method; the
    canonical path is scored once (``canonical_score``), outside every method's clock.
    """

    def __init__(
        self, lm: LM | str, text: str, context: str | None = None, *, state: ContextState | None = None,
        device: str | None = None, dtype: str | None = None,
    ) -> None:
        """``lm``: a loaded model (``load_model``'s LM), or a model's name, loaded on ``device`` in
        ``dtype`` (as the CLI's --device and --dtype; default auto); ``state``: the context's
        prefilled KV to share (several texts after one context)."""
        self.lm, self.text, self.context = model_of(lm, device, dtype), text, context
        self.lattice: Lattice = lattice_of(text, self.lm.text_tokenizer)
        self.context_ids: list[int] = context_ids(self.lm.text_tokenizer, context)
        if state is not None and list(state.ids) != self.context_ids:
            raise ValueError("the shared context state holds other ids than this context's")
        self._context_state: ContextState | None = state
        self._canonical: CanonicalScore | None = None
        self.interrupted: Estimate | None = None  # what a run stopped by Ctrl-C had finished
        self.source = Source(self.lm.name, dtype_name(self.lm.dtype), str(self.lm.device), context, self.lattice)

    def context_state(self) -> ContextState:
        """The context's KV cache, taken on first use from the model's kept contexts (prefilled
        there once for every Marginalizer with this context) and shared by every chunk and method."""
        if self._context_state is None:
            self._context_state = self.lm.context(self.context_ids)
        return self._context_state

    def require_fits(self, tokens: int, what: str = "the text's canonical tokenization", hint: str = "") -> None:
        """Refuse (ContextWindowError) a tokenization of tokens tokens that, after the context,
        passes the model's context window (its config's max_position_embeddings)."""
        room = self.window_room()
        if room is not None and tokens > room:
            raise ContextWindowError.of(what, tokens, len(self.context_ids), room + len(self.context_ids),
                                        self.lm.name, hint)

    def window_room(self) -> int | None:
        """The most tokens a tokenization may have after the context (None: no limit known)."""
        limit = self.lm.max_positions
        return None if limit is None else limit - len(self.context_ids)

    def canonical_score(self, progress: Progress | None = None) -> CanonicalScore:
        """log p(canonical | context) and its seconds, scored on first call only (ContextWindowError
        before any work when the canonical path passes the context window); progress gets
        (tokens, of tokens) after each forward pass, so a long text's caller can show it or end it."""
        if self._canonical is None:
            self.require_fits(len(self.lattice.canonical))
            state = self.context_state()
            started = time.perf_counter()
            log_p = float(score_paths(self.lm, [self.lattice.canonical], state, progress=progress)[0])
            self._canonical = CanonicalScore(log_p, time.perf_counter() - started)
        return self._canonical

    # ---------------------------------------------------------------- the streams

    def _scored_stream(
        self,
        method: Method,
        paths: PathBatch,
        kinds: np.ndarray,
        started: float,
        options: EstimateOptions,
        should_stop: StopCheck | None,
        progress: Progress | None,
        num_paths: int | None = None,
    ) -> Iterator[Estimate]:
        """Score paths chunk by chunk in sample order, yielding the lower bound after each; with
        ``canonical_in_first_chunk``, an unscored canonical path rides in the first chunk.

        progress gets (paths scored, paths), fractional within a chunk (from tokens fed)."""
        total, stats = len(paths), ScoreStats()
        scores_canonical = options.canonical_in_first_chunk and self._canonical is None
        spent: list[tuple[int, float]] = []  # (samples, seconds scoring them) per chunk
        sizes = chunk_sizes(total, options.chunk, options.first_chunk, options.chunk_seconds, spent)
        scores: list[np.ndarray] = [np.zeros(0)]
        checkpoints: list[tuple[int, float]] = []
        stop = 0
        while True:
            cancelled = stop < total and should_stop is not None and should_stop()
            if not cancelled and stop < total:
                start, stop = stop, stop + next(sizes)
                within = _scaled(progress, start, stop - start, total)
                head, began = _head(paths, start, stop), time.perf_counter()
                scores.append(self._score_chunk(head, stats, within, with_canonical=scores_canonical))
                spent.append((stop - start, time.perf_counter() - began))
            canonical = self.canonical_score(_scaled(progress, 0, 0, total))  # by the first chunk, or alone (stoppable)
            log_p = np.concatenate(scores)
            running = np.logaddexp.accumulate(log_p) if len(log_p) else log_p
            seconds = time.perf_counter() - started - (canonical.seconds if scores_canonical else 0.0)
            checkpoints.append((stop, seconds))
            yield Estimate(
                method=method,
                log_p_canonical=canonical.log_p,
                log_noncanonical=_last_of(running),
                paths=_head(paths, 0, stop),
                kinds=kinds[:stop],
                log_p=log_p,
                log_q=None,
                running=running,
                seconds=seconds,
                forward_passes=stats.forward_passes,
                run=RunState(Completion(total, done=stop == total, cancelled=cancelled), tuple(checkpoints)),
                num_paths=num_paths,
                source=self.source,
            )
            if cancelled or stop == total:
                return

    def _score_chunk(self, head: PathBatch, stats: ScoreStats, progress: Progress | None, with_canonical: bool) -> np.ndarray:
        """A chunk's log-probabilities; ``with_canonical``, an unscored canonical path goes in its trie
        (one pass, not two), its seconds the chunk's times its share of the tokens."""
        if not with_canonical or self._canonical is not None:
            return score_paths(self.lm, head, self.context_state(), stats=stats, progress=progress)
        began, canonical = time.perf_counter(), PathBatch.from_paths([self.lattice.canonical])
        log_p = score_paths(self.lm, PathBatch.concat([canonical, head]), self.context_state(), stats=stats, progress=progress)
        share = len(canonical.ids) / (len(canonical.ids) + len(head.ids))
        self._canonical = CanonicalScore(float(log_p[0]), (time.perf_counter() - began) * share)
        return log_p[1:]

    def _canonical_first(self, progress: Progress | None, requested: int, in_first_chunk: bool = False) -> None:
        """Score the canonical path before a method's clock starts (in_first_chunk: check that it fits);
        progress hears (0, requested) after each forward pass (where a caller may end a long text's run)."""
        if in_first_chunk:
            self.require_fits(len(self.lattice.canonical))
        else:
            self.canonical_score(None if progress is None else lambda done, of: progress(0, requested))

    def _canonical_stream(
        self, options: EstimateOptions, should_stop: StopCheck | None, progress: Progress | None
    ) -> Iterator[Estimate]:
        self._canonical_first(progress, 1)
        score = self.canonical_score()
        yield Estimate(
            method=Method.CANONICAL,
            log_p_canonical=score.log_p,
            log_noncanonical=-math.inf,
            paths=PathBatch.from_paths([self.lattice.canonical]),
            kinds=np.array(["canonical"]),
            log_p=np.array([score.log_p]),
            log_q=None,
            running=np.array([-math.inf]),
            seconds=score.seconds,
            forward_passes=1,
            run=RunState(Completion(1), ((1, score.seconds),)),
            source=self.source,
        )

    def _lattice_stream(
        self, options: EstimateOptions, should_stop: StopCheck | None, progress: Progress | None
    ) -> Iterator[Estimate]:
        self._canonical_first(progress, options.samples, options.canonical_in_first_chunk)  # off the clock
        started, o = time.perf_counter(), options
        samples = lattice_samples(self.lattice, o.samples, max_len=o.max_len, seed=o.seed, should_stop=should_stop)
        room = self.window_room()
        hint = f"set the length bound L to at most {room:,}" if room and len(self.lattice.canonical) < room else ""
        self.require_fits(int(samples.paths.lengths.max(initial=0)), "the longest lattice sample", hint)
        yield from self._scored_stream(
            Method.LATTICE, samples.paths, samples.kinds, started, options, should_stop, progress
        )

    def _exact_stream(
        self, options: EstimateOptions, should_stop: StopCheck | None, progress: Progress | None
    ) -> Iterator[Estimate]:
        self._canonical_first(progress, self.lattice.count() - 1, options.canonical_in_first_chunk)
        started = time.perf_counter()
        paths = [p for p in self.lattice.enumerate(budget=options.budget) if p != self.lattice.canonical]
        self.require_fits(max(map(len, paths), default=0), "the text's longest tokenization")
        yield from self._scored_stream(
            Method.EXACT, PathBatch.from_paths(paths), np.full(len(paths), "exact"), started, options,
            should_stop, progress, num_paths=self.lattice.count(),
        )

    def _proxy_stream(
        self, options: EstimateOptions, should_stop: StopCheck | None, progress: Progress | None
    ) -> Iterator[Estimate]:
        self._canonical_first(progress, options.samples)
        steps = proposal_of(self.lattice, options.include_canonical).max_steps
        self.require_fits(steps, "the longest tokenization the proxy may draw")
        checkpoints: list[tuple[int, float]] = []
        batching = {"batch_size": options.chunk} if options.chunk else {}
        if options.first_chunk:
            batching["first_batch"] = options.first_chunk
        for result in proxy_stream(
            self.lm, self.lattice, options.samples, self.context_state(), include_canonical=options.include_canonical,
            seed=options.seed, should_stop=should_stop, progress=progress, **batching,
        ):
            checkpoints.append((len(result), result.seconds))
            yield self._from_proxy(result, tuple(checkpoints))

    def _beam_stream(
        self, options: EstimateOptions, should_stop: StopCheck | None, progress: Progress | None
    ) -> Iterator[Estimate]:
        steps = proposal_of(self.lattice).max_steps
        self._canonical_first(progress, steps)
        self.require_fits(steps, "the longest tokenization the beam may reach")
        checkpoints: list[tuple[int, float]] = []
        canonical = self.canonical_score().log_p
        if options.beam_width is None:
            results = anytime_beam(self.lm, self.lattice, self.context_state(), widths=auto_widths(options.max_beam_width),
                                   tolerance=options.tolerance, time_budget=options.time_budget, progress=progress,
                                   should_stop=should_stop)
        else:
            results = beam_stream(self.lm, self.lattice, options.beam_width, self.context_state(),
                                  progress=progress, should_stop=should_stop)
        for result in results:
            checkpoints.append((len(result.log_p), result.seconds))
            running = np.logaddexp.accumulate(result.log_p) if len(result.log_p) else result.log_p
            yield Estimate(
                method=Method.BEAM,
                log_p_canonical=canonical,
                log_noncanonical=_last_of(running),
                paths=result.paths,
                kinds=np.full(len(result.log_p), "beam"),
                log_p=result.log_p,
                log_q=None,
                running=running,
                seconds=result.seconds,
                forward_passes=result.forward_passes,
                run=BeamRun(result.completion, tuple(checkpoints), steps=result.steps, rounds=result.rounds),
                source=self.source,
            )

    def _from_proxy(self, result: ProxyResult, checkpoints: Checkpoints) -> Estimate:
        """An Estimate of the non-canonical marginal from proxy samples so far."""
        canonical = self.canonical_score().log_p
        running = result.running_log_estimates()
        if result.include_canonical:
            running = _log_minus(running, canonical)
        return Estimate(
            method=Method.PROXY,
            log_p_canonical=canonical,
            log_noncanonical=_last_of(running),
            paths=result.paths,
            kinds=np.full(len(result), "proxy"),
            log_p=result.log_p,
            log_q=result.log_q,
            running=running,
            seconds=result.seconds,
            forward_passes=result.forward_passes,
            run=RunState(result.completion, checkpoints),
            source=self.source,
        )

    def stream(
        self,
        method: str | Method,
        options: EstimateOptions | None = None,
        *,
        should_stop: StopCheck | None = None,
        progress: Progress | None = None,
        **settings: Any,
    ) -> Iterator[Estimate]:
        """The estimate of one method after each chunk; the last is the result.

        Options come as an EstimateOptions, or as its fields by keyword (samples, max_len, seed,
        budget, include_canonical, chunk, first_chunk, chunk_seconds, canonical_in_first_chunk,
        beam_width, ...); a method ignores those it does not use. Samples do not depend on chunking.
        should_stop is polled between chunks (and between proxy passes);
        progress gets (samples done, samples requested) as work goes on.
        """
        runner = self._streams()[Method.parse(method)]
        options = replace(options or EstimateOptions(), **settings)
        return _handing_on(runner(options, should_stop, progress))

    def _streams(self) -> dict[Method, Callable[..., Iterator[Estimate]]]:
        return {
            Method.CANONICAL: self._canonical_stream,
            Method.LATTICE: self._lattice_stream,
            Method.PROXY: self._proxy_stream,
            Method.BEAM: self._beam_stream,
            Method.EXACT: self._exact_stream,
        }

    def estimate(self, method: str | Method, options: EstimateOptions | None = None, **settings: Any) -> Estimate:
        """Run one method's stream to its end (arguments as for ``stream``). Ctrl-C ends it: the
        estimate of the chunks it finished is kept as ``interrupted`` (run.cancelled), and said."""
        last = None
        try:
            for estimate in self.stream(method, options, **settings):
                last = estimate
        except KeyboardInterrupt:
            if last is not None:
                self.interrupted = replace(last, run=replace(last.run, completion=replace(last.run.completion, cancelled=True)))
                print(f"marginal: interrupted {last.run.describe()}; that estimate is kept as "
                      "<Marginalizer>.interrupted", file=sys.stderr)
            raise
        if last is None:  # every method's stream yields at least one estimate
            raise RuntimeError(f"the {method} stream gave no estimate")
        return last

    def canonical(self) -> Estimate:
        """The canonical tokenization alone."""
        return self.estimate(Method.CANONICAL)

    def lattice_estimate(self, k: int, **settings: Any) -> Estimate:
        """Algorithm 1 with k samples, scored in batched trie passes (a lower bound)."""
        return self.estimate(Method.LATTICE, samples=k, **settings)

    def exact(self, **settings: Any) -> Estimate:
        """Every non-canonical path scored (TooManyPathsError beyond the budget option)."""
        return self.estimate(Method.EXACT, **settings)

    def beam(self, width: int | None = None, **settings: Any) -> Estimate:
        """The beam of `width` prefixes per automaton state: complete non-canonical paths, each
        scored exactly (a lower bound, exact once the width covers every prefix). Without a width,
        the anytime beam: widths 16, 64, 256, 1024 until a round prunes nothing or a widening
        adds less than the tolerance (settings: tolerance, time_budget)."""
        return self.estimate(Method.BEAM, beam_width=width, **settings)

    def surprisal(self, unit: str = "word", space: str = "trailing", method: str = "search", **settings: Any
                  ) -> Surprisal:
        """The text's marginal surprisal by region beside the canonical one (``surprisal_run``;
        settings: max_rows, tolerance, time_budget, budget, should_stop, progress)."""
        from marginal_core.search.surprisal.stream import surprisal_stream

        *_, last = surprisal_stream(self, unit, space, method, **settings)
        return last

    def proxy(self, k: int, **settings: Any) -> Estimate:
        """Importance sampling from the lattice-constrained LM (the paper's baseline).

        With include_canonical the proposal covers every path and the estimate is of the full
        marginal; its non-canonical part is then reported as log(full - canonical).
        """
        return self.estimate(Method.PROXY, samples=k, **settings)


def _log_minus(log_a: np.ndarray, log_b: float) -> np.ndarray:
    """log(exp(a) - exp(b)) elementwise, -inf where a <= b (an estimate below the canonical)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = log_a + np.log1p(-np.exp(log_b - log_a))
    return np.where(log_a > log_b, diff, -np.inf)


def by_context(lm: LM, pairs: Sequence[tuple[str | None, str]]) -> Iterator[tuple[int, Marginalizer]]:
    """A Marginalizer for each (context, text) pair, with its index in pairs, grouped by context so
    that each distinct context is prefilled once and its KV shared (the one request loop of the
    tasks' evaluator and the lm-eval backend)."""
    groups: dict[str | None, list[int]] = {}
    for i, (context, _) in enumerate(pairs):
        groups.setdefault(context or None, []).append(i)
    for context, indices in groups.items():
        state = lm.context(context_ids(lm.text_tokenizer, context))
        for i in indices:
            yield i, Marginalizer(lm, pairs[i][1], context, state=state)


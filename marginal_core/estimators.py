"""The marginal estimators the app, the CLI and the experiments compare.

All of them share one text, one lattice, one context and the canonical path's score:

- canonical: p(canonical) alone; the non-canonical marginal is taken as zero.
- lattice:   Algorithm 1's sample set scored in batched passes; its log-sum-exp is a lower
             bound on the non-canonical marginal that only grows with k (nested sample sets).
- proxy:     importance sampling from the LM constrained to the lattice (unbiased, slow).
- beam:      the most probable non-canonical paths found by a beam of W prefixes per lattice
             state (``marginal_core.beam``); a lower bound that grows with W.
- exact:     every path scored; offered while the path count is under a budget.

Every method is a stream: ``Marginalizer.stream`` yields the estimate after each chunk of
samples (the app draws it live and keeps it when stopped); ``Marginalizer.estimate`` runs the
stream to its end. The canonical score is computed once, before any method's clock starts.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from marginal_core import turns
from marginal_core.beam import anytime_beam, beam_stream
from marginal_core.beam_width import DEFAULT_BEAM_WIDTH, DEFAULT_TOLERANCE, MAX_BEAM_WIDTH, Round, auto_widths, check_width
from marginal_core.context import context_ids
from marginal_core.errors import ContextWindowError, MarginalError
from marginal_core.jsonsafe import json_float
from marginal_core.lattice import DEFAULT_ENUMERATION_BUDGET, Lattice, PathBatch, build_lattice
from marginal_core.lm.adapter import LM, ContextState
from marginal_core.methods import Method
from marginal_core.models import LoadedModel, dtype_name, load_model
from marginal_core.progress import Progress, StopCheck
from marginal_core.proposal import proposal_of
from marginal_core.proxy import ProxyResult, proxy_stream
from marginal_core.sampling import lattice_samples
from marginal_core.scoring import ScoreStats, score_paths

if TYPE_CHECKING:
    import pandas as pd

Checkpoints = tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class EstimateOptions:
    """What a method's run may be told, checked once: samples (k), the length bound L, the
    seed, the exact method's path budget, whether the proxy covers the canonical path, the
    samples per streamed update (None: everything at once, which shares the most prefixes), and
    the first update's samples (then full chunks, so a large run's first estimate comes early;
    None: every chunk is ``chunk``); the beam's width (None: the anytime beam, widened until a
    widening adds less than ``tolerance`` nats or ``time_budget`` seconds have passed, its
    widest round ``max_beam_width``)."""

    samples: int = 1000
    max_len: int | None = None
    seed: int | None = 0
    budget: int = DEFAULT_ENUMERATION_BUDGET
    include_canonical: bool = False
    chunk: int | None = None
    first_chunk: int | None = None
    beam_width: int | None = DEFAULT_BEAM_WIDTH
    tolerance: float = DEFAULT_TOLERANCE
    time_budget: float | None = None
    max_beam_width: int = MAX_BEAM_WIDTH  # the anytime beam's widest round (a class server caps it)

    def __post_init__(self) -> None:
        check_width(self.max_beam_width)
        if self.beam_width is not None:
            check_width(self.beam_width)
        checks = [
            (self.tolerance > 0, f"the tolerance must be above 0 nats, not {self.tolerance}"),
            (self.time_budget is None or self.time_budget > 0, f"the time budget must be above 0 s, not {self.time_budget}"),
            (self.samples >= 0, f"samples must be 0 or more, not {self.samples}"),
            (self.max_len is None or self.max_len >= 1, f"the length bound must be at least 1, not {self.max_len}"),
            (self.budget >= 1, f"the enumeration budget must be at least 1, not {self.budget}"),
            (self.chunk is None or self.chunk >= 1, f"chunks must hold at least 1 sample, not {self.chunk}"),
            (self.first_chunk is None or self.first_chunk >= 1,
             f"the first chunk must hold at least 1 sample, not {self.first_chunk}"),
        ]
        for ok, message in checks:
            if not ok:
                raise MarginalError(message)


@dataclass(frozen=True)
class RunState:
    """How far a sampling stream got: the samples asked for, (samples, seconds) after each
    chunk, and whether it finished (``done``) or was stopped (``cancelled``, keeping what it
    finished). A beam's run is a :class:`BeamRun`: each kind says its own progress."""

    requested: int
    checkpoints: Checkpoints = ()
    done: bool = True
    cancelled: bool = False

    @property
    def completed(self) -> int:
        """Samples scored (a beam: paths completed) by the last checkpoint."""
        return self.checkpoints[-1][0] if self.checkpoints else 0

    @property
    def covered(self) -> int:
        """The units of ``requested`` done: samples scored."""
        return self.completed

    @property
    def fraction(self) -> float:
        """Share of the requested work covered (1.0 once done)."""
        if self.done or not self.requested:
            return 1.0
        return min(1.0, self.covered / self.requested)

    def describe(self) -> str:
        """How far it got, in words: '100 of 600 samples scored'."""
        return f"{self.completed:,} of {self.requested:,} samples scored"


@dataclass(frozen=True)
class BeamRun(RunState):
    """A beam's run: it asks for no number of samples, so ``requested`` is the walk's most steps
    and ``steps`` those done, while its checkpoints count the paths it completed; an anytime
    beam's finished ``rounds`` too."""

    steps: int = 0
    rounds: tuple[Round, ...] = ()

    @property
    def covered(self) -> int:
        """The units of ``requested`` done: the walk's steps."""
        return self.steps

    def describe(self) -> str:
        """'48 paths completed, step 7 of 14'."""
        return f"{self.completed:,} paths completed, step {self.steps:,} of {self.requested:,}"


@dataclass(frozen=True)
class CanonicalScore:
    """log p(canonical | context) and the seconds its forward pass took."""

    log_p: float
    seconds: float


@dataclass(frozen=True, eq=False)
class Source:
    """What an Estimate was computed from, for its displays: the model's name, precision and
    device, the context, and the text's lattice (the Marginalizer's own, shared, not copied)."""

    model: str
    dtype: str
    device: str
    context: str | None
    lattice: Lattice

    def __repr__(self) -> str:
        """One short line (the lattice stays out of it)."""
        return f"Source({self.model}, {self.dtype}, {self.device})"


@dataclass(frozen=True, eq=False)
class Estimate:
    """One method's estimate with every sample behind it, in sample order, and its run's state.

    ``running`` is the non-canonical log estimate after each sample. Marginals are natural
    logs; -inf means no mass found (no non-canonical path, or the canonical method). ``source``
    (set by the Marginalizer) names the model and holds the lattice its displays decode with.
    """

    method: Method
    log_p_canonical: float
    log_noncanonical: float
    paths: PathBatch
    kinds: np.ndarray
    log_p: np.ndarray
    log_q: np.ndarray | None
    running: np.ndarray
    seconds: float
    forward_passes: int
    run: RunState
    num_paths: int | None = None
    source: Source | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "method", Method.parse(self.method))  # a name given as a string

    def __repr__(self) -> str:
        """One short line (the arrays stay out of a table's cell or a notebook's output)."""
        sign = "≈" if not self.method.is_bound else "=" if self.certified_gap() == 0 else "≥"
        state = "" if self.run.done else f", {'stopped' if self.run.cancelled else 'running'}"
        return (f"Estimate({self.method.value}: log p(text) {sign} {self.log_marginal:.3f}, "
                f"{self.num_distinct:,} paths, {self.seconds:.2f} s{state})")

    def _lattice(self, lattice: Lattice | None) -> Lattice | None:
        """The lattice given, else the source's (None where neither is known)."""
        return lattice if lattice is not None else self.source.lattice if self.source is not None else None

    def distinct_paths(self) -> pd.DataFrame:
        """One row per distinct path, in sample order: ids, kind, log p, log q (NaN where unknown)
        and how often it was drawn."""
        import pandas as pd

        frame = pd.DataFrame({"ids": self.paths.tolist(), "kind": self.kinds, "log_p": self.log_p,
                              "log_q": self.log_q if self.log_q is not None else np.nan})
        counts = frame.groupby("ids", sort=False).size().rename("draws")
        return frame.drop_duplicates("ids").join(counts, on="ids").reset_index(drop=True)

    def found(self, lattice: Lattice | None = None) -> pd.DataFrame:
        """Every distinct tokenization found plus the canonical one (kind "canonical"), most probable
        first: ids, kind, log p, log q, draws and share of the mass found."""
        import pandas as pd

        lattice = self._lattice(lattice)
        if lattice is None:
            raise MarginalError("this Estimate was not made by a Marginalizer, so it knows no lattice: pass lattice=")
        rows = self.distinct_paths()
        if lattice.canonical not in set(rows["ids"]):
            canonical = pd.DataFrame({"ids": [lattice.canonical], "kind": ["canonical"],
                                      "log_p": [self.log_p_canonical]})
            rows = pd.concat([canonical, rows], ignore_index=True)
        rows = rows.sort_values("log_p", ascending=False, kind="stable").reset_index(drop=True)
        rows.loc[rows["ids"] == lattice.canonical, "kind"] = "canonical"
        log_p = rows["log_p"].to_numpy(dtype=float)
        rows["share"] = np.exp(log_p - np.logaddexp.reduce(log_p))
        return rows

    def to_pandas(self, lattice: Lattice | None = None) -> pd.DataFrame:
        """One row per distinct scored tokenization plus the canonical one, most probable first:
        its tokens joined by "|", their number, log p, kind and share of the mass found."""
        import pandas as pd

        from marginal_core.viz.text import segmented

        lattice = self._lattice(lattice)
        rows = self.found(lattice)
        return pd.DataFrame({"tokenization": [segmented(lattice, p) for p in rows["ids"]],
                             "tokens": rows["ids"].map(len).to_numpy(dtype=int), "log_p": rows["log_p"].to_numpy(),
                             "kind": rows["kind"].to_numpy(), "share": rows["share"].to_numpy()})

    def rounds_frame(self) -> pd.DataFrame:
        """An anytime beam's rounds, one row each: width, log mass found, prefixes pruned, certified
        gap (nats), seconds and paths at its end; no rows for any other run."""
        import pandas as pd

        columns = ["width", "log_mass", "pruned", "certified_gap", "seconds", "paths"]
        return pd.DataFrame([[r.width, r.log_mass, r.pruned, r.certified_gap, r.seconds, r.paths] for r in self.rounds],
                            columns=columns)

    def certified_gap(self, lattice: Lattice | None = None) -> float:
        """Nats the exact log p(text) may lie above ``log_marginal``, at most: 0 where exact (every
        tokenization scored, a finished exact run, or a finished anytime beam that pruned nothing),
        a finished anytime beam's certificate, inf where not known (or not a bound: the proxy)."""
        if not self.method.is_bound:
            return math.inf
        known = self._lattice(lattice)
        if known is not None and len(set(self.paths.tolist()) | {known.canonical}) == known.count():
            return 0.0  # every tokenization scored
        if self.method is Method.EXACT and self.run.done:
            return 0.0
        return self.rounds[-1].certified_gap if self.rounds and self.run.done else math.inf

    @property
    def rounds(self) -> tuple[Round, ...]:
        """An anytime beam's finished rounds; none for every other run."""
        return self.run.rounds if isinstance(self.run, BeamRun) else ()

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
            "log_marginal": json_float(self.log_marginal),
            "log_noncanonical": json_float(self.log_noncanonical),
            "num_samples": self.num_samples,
            "num_distinct": self.num_distinct,
            "seconds": round(self.seconds, 4),
            "forward_passes": self.forward_passes,
        }
        if self.num_paths is not None:
            row["num_paths"] = str(self.num_paths)
        if self.run.cancelled:
            row["cancelled"] = True
        if self.rounds:  # the anytime beam: each round's width, mass found, pruned prefixes, seconds and paths
            row["rounds"] = [{**r._asdict(), "log_mass": json_float(r.log_mass), "log_missed": json_float(r.log_missed),
                              "seconds": round(r.seconds, 4)}
                             for r in self.rounds]
        return row


def _last_of(running: np.ndarray) -> float:
    return float(running[-1]) if len(running) else -math.inf


def _scaled(progress: Progress | None, start: int, size: int, total: int) -> Progress | None:
    """A chunk's (done, of) progress as (paths so far, paths), counting the chunk's share."""
    if progress is None:
        return None
    return lambda done, of: progress(start + size * done / max(of, 1), total)


def chunk_sizes(total: int, chunk: int | None, first: int | None = None) -> Iterator[int]:
    """The sizes of a stream's chunks over total samples: ``chunk`` each (None: all at once),
    after a ``first`` one where given (a small first chunk brings the first estimate early;
    full chunks after it share the most prefixes, which doubling up to ``chunk`` did not)."""
    cap = max(1, chunk or total)
    size, done = min(cap, first or cap), 0
    while done < total:
        size = min(size, total - done)
        yield size
        done += size
        size = cap


def _handing_on(stream: Iterator[Estimate]) -> Iterator[Estimate]:
    """A stream whose chunk ends are checkpoints: where runs take turns (the app's), another
    waiting run gets the device while this one's estimate is drawn."""
    for estimate in stream:
        turns.checkpoint()
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
    canonical path is scored once (``canonical_score``), before any method's clock starts.
    """

    def __init__(
        self, lm: LM | LoadedModel | str, text: str, context: str | None = None, *, state: ContextState | None = None
    ) -> None:
        """``lm``: a loaded model, or a model's name (loaded on device and dtype 'auto'); ``state``: the
        context's prefilled KV to share (several texts after one context)."""
        self.lm, self.text, self.context = LM.of(load_model(lm) if isinstance(lm, str) else lm), text, context
        self.lattice: Lattice = build_lattice(text, self.lm.text_tokenizer)
        self.context_ids: list[int] = context_ids(self.lm.text_tokenizer, context)
        if state is not None and list(state.ids) != self.context_ids:
            raise ValueError("the shared context state holds other ids than this context's")
        self._context_state: ContextState | None = state
        self._canonical: CanonicalScore | None = None
        self.interrupted: Estimate | None = None  # what a run stopped by Ctrl-C had finished
        loaded = self.lm.loaded
        self.source = Source(loaded.name, dtype_name(loaded.dtype), str(self.lm.device), context, self.lattice)

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
                                        self.lm.loaded.name, hint)

    def window_room(self) -> int | None:
        """The most tokens a tokenization may have after the context (None: no limit known)."""
        limit = getattr(self.lm.config, "max_position_embeddings", None)
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
        """Score paths chunk by chunk in sample order, yielding the lower bound after each.

        progress gets (paths scored, paths), fractional within a chunk (from tokens fed)."""
        total, stats, canonical = len(paths), ScoreStats(), self.canonical_score().log_p
        sizes = chunk_sizes(total, options.chunk, options.first_chunk)
        scores: list[np.ndarray] = [np.zeros(0)]
        checkpoints: list[tuple[int, float]] = []
        stop = 0
        while True:
            cancelled = stop < total and should_stop is not None and should_stop()
            if not cancelled and stop < total:
                start, stop = stop, stop + next(sizes)
                within = _scaled(progress, start, stop - start, total)
                head = _head(paths, start, stop)
                scores.append(score_paths(self.lm, head, self.context_state(), stats=stats, progress=within))
            log_p = np.concatenate(scores)
            running = np.logaddexp.accumulate(log_p) if len(log_p) else log_p
            seconds = time.perf_counter() - started
            checkpoints.append((stop, seconds))
            yield Estimate(
                method=method,
                log_p_canonical=canonical,
                log_noncanonical=_last_of(running),
                paths=_head(paths, 0, stop),
                kinds=kinds[:stop],
                log_p=log_p,
                log_q=None,
                running=running,
                seconds=seconds,
                forward_passes=stats.forward_passes,
                run=RunState(total, tuple(checkpoints), done=stop == total, cancelled=cancelled),
                num_paths=num_paths,
                source=self.source,
            )
            if cancelled or stop == total:
                return

    def _canonical_first(self, progress: Progress | None, requested: int) -> None:
        """Score the canonical path before a method's clock starts; meanwhile progress hears
        (0, requested) after each forward pass (where a caller may end a long text's run)."""
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
            run=RunState(1, ((1, score.seconds),)),
            source=self.source,
        )

    def _lattice_stream(
        self, options: EstimateOptions, should_stop: StopCheck | None, progress: Progress | None
    ) -> Iterator[Estimate]:
        self._canonical_first(progress, options.samples)  # scored once, outside the timing
        started = time.perf_counter()
        samples = lattice_samples(self.lattice, options.samples, max_len=options.max_len, seed=options.seed)
        room = self.window_room()
        hint = f"set the length bound L to at most {room:,}" if room and len(self.lattice.canonical) < room else ""
        self.require_fits(int(samples.paths.lengths.max(initial=0)), "the longest lattice sample", hint)
        yield from self._scored_stream(
            Method.LATTICE, samples.paths, samples.kinds, started, options, should_stop, progress
        )

    def _exact_stream(
        self, options: EstimateOptions, should_stop: StopCheck | None, progress: Progress | None
    ) -> Iterator[Estimate]:
        self._canonical_first(progress, self.lattice.count() - 1)
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
                run=BeamRun(result.max_steps, tuple(checkpoints), done=result.done, cancelled=result.cancelled,
                            steps=result.steps, rounds=result.rounds),
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
            run=RunState(result.requested, checkpoints, done=result.done, cancelled=result.cancelled),
            source=self.source,
        )

    def stream(
        self,
        method: str | Method,
        options: EstimateOptions | None = None,
        *,
        should_stop: StopCheck | None = None,
        progress: Progress | None = None,
        **settings: object,
    ) -> Iterator[Estimate]:
        """The estimate of one method after each chunk; the last is the result.

        Options come as an EstimateOptions, or as its fields by keyword (samples, max_len, seed,
        budget, include_canonical, chunk, first_chunk, beam_width); a method ignores those it does
        not use.
        Samples do not depend on chunking. should_stop is polled between chunks (and between proxy passes);
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

    def estimate(self, method: str | Method, options: EstimateOptions | None = None, **settings: object) -> Estimate:
        """Run one method's stream to its end (arguments as for ``stream``). Ctrl-C ends it: the
        estimate of the chunks it finished is kept as ``interrupted`` (run.cancelled), and said."""
        last = None
        try:
            for estimate in self.stream(method, options, **settings):
                last = estimate
        except KeyboardInterrupt:
            if last is not None:
                self.interrupted = replace(last, run=replace(last.run, cancelled=True))
                print(f"marginal: interrupted {last.run.describe()}; that estimate is kept as "
                      "<Marginalizer>.interrupted", file=sys.stderr)
            raise
        return last

    def canonical(self) -> Estimate:
        """The canonical tokenization alone."""
        return self.estimate(Method.CANONICAL)

    def lattice_estimate(self, k: int, **settings: object) -> Estimate:
        """Algorithm 1 with k samples, scored in batched trie passes (a lower bound)."""
        return self.estimate(Method.LATTICE, samples=k, **settings)

    def exact(self, **settings: object) -> Estimate:
        """Every non-canonical path scored (TooManyPathsError beyond the budget option)."""
        return self.estimate(Method.EXACT, **settings)

    def beam(self, width: int | None = None, **settings: object) -> Estimate:
        """The beam of `width` prefixes per automaton state: complete non-canonical paths, each
        scored exactly (a lower bound, exact once the width covers every prefix). Without a width,
        the anytime beam: widths 16, 64, 256, 1024 until a round prunes nothing or a widening
        adds less than the tolerance (settings: tolerance, time_budget)."""
        return self.estimate(Method.BEAM, beam_width=width, **settings)

    def proxy(self, k: int, **settings: object) -> Estimate:
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


def by_context(lm: LM | LoadedModel, pairs: Sequence[tuple[str | None, str]]) -> Iterator[tuple[int, Marginalizer]]:
    """A Marginalizer for each (context, text) pair, with its index in pairs, grouped by context so
    that each distinct context is prefilled once and its KV shared (the one request loop of the
    tasks' evaluator and the lm-eval backend)."""
    lm = LM.of(lm)
    groups: dict[str | None, list[int]] = {}
    for i, (context, _) in enumerate(pairs):
        groups.setdefault(context or None, []).append(i)
    for context, indices in groups.items():
        state = lm.context(context_ids(lm.text_tokenizer, context))
        for i in indices:
            yield i, Marginalizer(lm, pairs[i][1], context, state=state)


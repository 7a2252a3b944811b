"""The beam: the most probable non-canonical tokenizations, found by the proxy's walk with a
top-W choice in place of a draw (docs/design.md, "The estimators").

Rows are distinct prefixes of equal length in tokens, extended one token per forward pass from
the context's shared KV cache (``proxy.extend``), constrained to the proxy's proposal automaton,
whose paths are the lattice's non-canonical tokenizations. At each step every allowed extension
of every row is scored exactly (log p over the whole vocabulary, in float64), a prefix that
reaches the end of the text is kept as a complete path, and the others compete per automaton
state (a byte offset, off or on the canonical path): a prefix that reaches a state is extended
when it ranks within the W most probable of all the prefixes that state has extended so far,
this step's included, whatever their length. Prefixes with fewer tokens reach a state first; a
longer one that arrives later still takes its place among the W best if it is more probable (a
budget of the first W arrivals dropped the mass-carrying paths of some sentences:
docs/history/2026-12-07-figures-from-the-design-notes.md).

Every complete path is a distinct tokenization with its exact log p, so the log-sum-exp of those
found so far is a lower bound on the non-canonical marginal at every step, growing with W and
exact once W covers every prefix of every state.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from transformers import DynamicCache

from marginal_core.estimators.beam_width import AUTO_WIDTHS, Round, check_width
from marginal_core.estimators.proxy import extend
from marginal_core.estimators.run_state import Completion
from marginal_core.ground.errors import MarginalError, is_oom
from marginal_core.ground.progress import Progress, StopCheck, round_hook, steps_only
from marginal_core.lattice.graph import Lattice
from marginal_core.lattice.paths import PathBatch
from marginal_core.lattice.proposal import proposal_of
from marginal_core.lm.adapter import LM
from marginal_core.lm.contexts import ContextState
from marginal_core.scoring.tables import Tables
from marginal_core.search.settings import DEFAULT_TOLERANCE


@dataclass(frozen=True, eq=False)
class BeamResult:
    """The complete paths found so far, in the order found, with their log p and the walk's state.

    ``steps`` of at most ``completion.requested`` tokens are done; ``forward_passes`` counts model
    calls (a prefill of the context included when the walk made it). ``completion.cancelled`` is
    True when should_stop ended the walk; ``completion.done`` is False for the results yielded
    before the last.
    ``pruned`` counts the prefixes the per-state rank left unextended: a finished walk that
    pruned none found every non-canonical path, so its bound is exact. ``log_missed`` is the log
    of their summed probability: every path the walk did not find extends one of them, so it
    bounds the mass missed. ``rounds`` holds, for an anytime beam, each finished round
    (:class:`Round`).
    """

    paths: PathBatch
    log_p: np.ndarray
    width: int
    steps: int
    completion: Completion
    forward_passes: int
    seconds: float
    pruned: int = 0
    rounds: tuple[Round, ...] = ()
    scored: int = 0  # prefixes whose next-token scores the head computed (not taken from a memo)
    log_missed: float = -math.inf

    @property
    def log_mass(self) -> float:
        """log of the non-canonical mass found (-inf for none)."""
        return float(np.logaddexp.reduce(self.log_p)) if len(self.log_p) else -math.inf

    def as_round(self) -> Round:
        """This walk as one finished round (its certified gap, for one walk of a fixed width)."""
        return Round(self.width, self.log_mass, self.pruned, self.seconds, len(self.log_p), self.log_missed)


@dataclass
class _Beam:
    """The walk's rows: automaton state, log p and tokens of each live prefix."""

    state: torch.Tensor  # [R]
    log_p: torch.Tensor  # [R] float64
    tokens: torch.Tensor  # [R, step]


def _ranks(key: torch.Tensor) -> torch.Tensor:
    """Each element's rank among the elements of the same key, keys already grouped (sorted)."""
    first = torch.searchsorted(key, key)
    return torch.arange(len(key), device=key.device) - first


def _choose(
    beam: _Beam, lp: torch.Tensor, tables: Tables, best: torch.Tensor, width: int
) -> tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, ...], tuple[torch.Tensor, torch.Tensor]]:
    """Split one step's extensions into complete paths (rows, tokens, log p), the chosen
    ones to extend (parent rows, columns, states, log p) and those left out (states, log p). An
    extension is chosen when fewer than W prefixes at least as probable have been (or are being)
    extended at its state: ``best`` holds each state's W most probable extended log p so far
    (descending, -inf where fewer), and takes the chosen ones in."""
    tok, nxt = tables.tokens[beam.state], tables.next_state[beam.state]
    score = beam.log_p[:, None] + lp
    valid = torch.isfinite(lp) & (nxt >= 0)
    final = valid & tables.final[nxt.clamp(min=0)]
    rows, cols = final.nonzero(as_tuple=True)
    complete = (rows, tok[rows, cols], score[rows, cols])
    rows, cols = (valid & ~final).nonzero(as_tuple=True)
    states, values = nxt[rows, cols], score[rows, cols]
    order = torch.argsort(values, descending=True, stable=True)
    order = order[torch.argsort(states[order], stable=True)]  # by state, best first within each
    rows, cols, states, values = rows[order], cols[order], states[order], values[order]
    ranks = _ranks(states)  # this step's more probable arrivals at the same state
    # fewer than W - rank earlier ones at least as probable: it beats the (W - rank)-th best so far
    # (monotone within a state: a kept one's betters are kept too)
    keep = (ranks < width) & (values > best[states, (width - 1 - ranks).clamp(min=0)])
    left = (states[~keep], values[~keep])
    rows, cols, states, values, ranks = rows[keep], cols[keep], states[keep], values[keep], ranks[keep]
    _take(best, states, ranks, values)
    return complete, (rows, cols, states, values), left


def _take(best: torch.Tensor, states: torch.Tensor, ranks: torch.Tensor, values: torch.Tensor) -> None:
    """Merge the chosen log p (by state, with their rank there, each < W) into each state's W best."""
    if not len(states):
        return
    touched, where = torch.unique(states, return_inverse=True)
    fresh = torch.full((len(touched), best.shape[1]), -math.inf, dtype=best.dtype, device=best.device)
    fresh[where, ranks] = values
    best[touched] = torch.topk(torch.cat([best[touched], fresh], dim=1), best.shape[1], dim=1).values


def advance(lm: LM, cache: DynamicCache, beam: _Beam, tok: torch.Tensor, chosen: tuple[torch.Tensor, ...], what: str,
            step: int) -> tuple[_Beam, torch.Tensor]:
    """The chosen extensions (parent rows, columns, states, log p) as the next step's rows, and
    their hidden states from one decoder step; out of memory is one MarginalError naming ``what``
    (the walk and its width)."""
    parent, cols, states, values = chosen
    feed = tok[parent, cols]
    rows = _Beam(states, values, torch.cat([beam.tokens[parent], feed[:, None]], dim=1))
    try:
        return rows, extend(lm, cache, parent, feed, len(tok))
    except (RuntimeError, MemoryError) as err:
        if not is_oom(err):
            raise
        raise MarginalError(f"{what} ({len(parent)} prefixes at step {step}) does not fit in memory on "
                            f"{lm.device.type}; use a smaller width") from err


def _log_sum(log_values: torch.Tensor) -> float:
    """log Σ exp(values), -inf for none."""
    return float(torch.logsumexp(log_values, dim=0)) if len(log_values) else -math.inf


Memo = dict[tuple[int, ...], torch.Tensor]
"""A prefix's next-token log-probabilities (its automaton state's allowed tokens), by its tokens."""


def _head_scores(lm: LM, hidden: torch.Tensor, beam: _Beam, tables: Tables, memo: Memo | None) -> tuple[torch.Tensor, int]:
    """Each row's allowed next-token log p, and how many rows the head computed: rows a memo holds
    (scored in an earlier, narrower walk) are read from it, and the rest are added to it."""
    tok, width = tables.tokens[beam.state], tables.width[beam.state]
    if memo is None:
        return lm.allowed_logprobs(hidden, tok, width), len(tok)
    keys = [tuple(row) for row in beam.tokens.tolist()]
    new = [i for i, key in enumerate(keys) if key not in memo]
    old = [i for i, key in enumerate(keys) if key in memo]
    lp = torch.empty(tok.shape, dtype=torch.float64, device=tok.device)
    if old:
        lp[torch.tensor(old, device=tok.device)] = torch.stack([memo[keys[i]] for i in old])
    if new:
        rows = torch.tensor(new, device=tok.device)
        fresh = lm.allowed_logprobs(hidden[rows], tok[rows], width[rows])
        lp[rows] = fresh
        memo.update(zip((keys[i] for i in new), fresh, strict=True))
    return lp, len(new)


def beam_stream(
    lm: LM,
    lattice: Lattice,
    width: int,
    context: Sequence[int] | ContextState,
    *,
    progress: Progress | None = None,
    should_stop: StopCheck | None = None,
    memo: Memo | None = None,
) -> Iterator[BeamResult]:
    """The complete paths found so far after each step that found some; the last result is final.

    context is token ids (prefilled here) or a ContextState to share. progress gets (steps done,
    most steps), and its round hook (progress.RoundHook) this walk as one round; should_stop is
    polled before every pass, and a stopped walk keeps its paths.
    A text whose only tokenization is the canonical one gets no paths and no passes. A memo
    (shared by the anytime beam's rounds) spares the head the prefixes an earlier walk scored.
    """
    started = time.perf_counter()
    check_width(width)
    proposal = proposal_of(lattice, include_canonical=False)
    found_tokens: list[np.ndarray] = []
    found_lp: list[float] = []
    passes = step = pruned = scored = 0
    missed = -math.inf  # log of the pruned prefixes' summed probability

    def result(done: bool, cancelled: bool = False) -> BeamResult:
        paths = PathBatch.from_paths([tuple(t) for t in found_tokens])
        log_p = np.array(found_lp, dtype=np.float64)
        return BeamResult(paths, log_p, width, step, Completion(proposal.max_steps, done, cancelled), passes,
                          time.perf_counter() - started, pruned, scored=scored, log_missed=missed)

    if proposal.empty:
        yield result(True)
        return
    ctx = lm.state_of(context)
    passes = 0 if ctx is context else ctx.passes
    device = lm.device
    tables = Tables.of(proposal, device)
    best = torch.full((len(proposal.width), width), -math.inf, dtype=torch.float64, device=device)
    best[proposal.start, 0] = 0.0  # the empty prefix, extended at the start
    beam = _Beam(torch.tensor([proposal.start], device=device), torch.zeros(1, dtype=torch.float64, device=device),
                 torch.zeros((1, 0), dtype=torch.long, device=device))
    cache, hidden = copy.deepcopy(ctx.cache), ctx.last_hidden
    if (on_round := round_hook(progress)) is not None:
        on_round(0, 1, width, None)
    with torch.inference_mode():
        while True:
            tok = tables.tokens[beam.state]
            lp, computed = _head_scores(lm, hidden, beam, tables, memo)
            scored += computed
            (rows, last, scores), (parent, cols, states, values), (_, left) = _choose(beam, lp, tables, best, width)
            step, pruned, missed = step + 1, pruned + len(left), float(np.logaddexp(missed, _log_sum(left)))
            if len(rows):
                paths = torch.cat([beam.tokens[rows], last[:, None]], dim=1).cpu().numpy()
                found_tokens.extend(paths)
                found_lp.extend(scores.cpu().tolist())
            if progress is not None:
                progress(step, proposal.max_steps)
            if not len(parent):
                break
            if should_stop is not None and should_stop():
                yield result(False, cancelled=True)
                return
            if len(rows):
                yield result(False)
            beam, hidden = advance(lm, cache, beam, tok, (parent, cols, states, values), f"a beam of width {width}", step)
            passes += 1
    final = result(True)
    if on_round is not None:
        on_round(1, 1, width, final.as_round().certified_gap)
    yield final


def anytime_beam(
    lm: LM,
    lattice: Lattice,
    context: Sequence[int] | ContextState,
    *,
    widths: Sequence[int] = AUTO_WIDTHS,
    tolerance: float = DEFAULT_TOLERANCE,
    time_budget: float | None = None,
    progress: Progress | None = None,
    should_stop: StopCheck | None = None,
) -> Iterator[BeamResult]:
    """The beam widened round by round (``widths``) until what a round pruned could add less than
    ``tolerance`` nats to the mass found (nothing pruned: the bound is exact), a widening adds
    less than that, the time budget (seconds) runs out, or should_stop; the best bound found so
    far after every step that found paths. Its paths are the union over the rounds (each scored exactly), so the bound never
    falls from one round to the next; ``rounds`` lists each finished :class:`Round`. progress hears
    each round's walk steps, and its round hook (progress.RoundHook) the rounds."""
    started = time.perf_counter()
    rounds: list[Round] = []
    memo: Memo = {}
    found: dict[tuple[int, ...], float] = {}
    scored = 0  # head rows of finished rounds
    ctx = lm.state_of(context)
    earlier = 0 if ctx is context else ctx.passes  # passes of finished rounds (and of a prefill made here)
    deadline = None if time_budget is None else started + time_budget
    on_round, steps = round_hook(progress), steps_only(progress)

    def user_stop() -> bool:
        return should_stop is not None and should_stop()

    def stop() -> bool:
        return (deadline is not None and time.perf_counter() > deadline) or user_stop()

    def mass() -> float:
        return float(np.logaddexp.reduce(np.fromiter(found.values(), float, len(found)))) if found else -math.inf

    def take(last: BeamResult) -> None:
        for ids, lp in zip(last.paths.tolist(), last.log_p.tolist(), strict=True):
            found.setdefault(tuple(ids), lp)

    def best(last: BeamResult, done: bool, cancelled: bool = False) -> BeamResult:
        take(last)
        return BeamResult(PathBatch.from_paths(list(found)), np.fromiter(found.values(), float, len(found)),
                          last.width, last.steps, Completion(last.completion.requested, done, cancelled),
                          earlier + last.forward_passes, time.perf_counter() - started, last.pruned, tuple(rounds),
                          scored + last.scored)

    for i, width in enumerate(widths):
        before = mass()
        if on_round is not None:
            on_round(i, len(widths), width, rounds[-1].certified_gap if rounds else None)
        for last in beam_stream(lm, lattice, width, ctx, progress=steps, should_stop=stop, memo=memo):
            if not last.completion.done and not last.completion.cancelled:
                yield best(last, False)
        if last.completion.cancelled:  # Stop or the time budget inside the round: what it found is kept
            yield best(last, not user_stop(), user_stop())
            return
        take(last)
        rounds.append(Round(width, mass(), last.pruned, time.perf_counter() - started, len(found), last.log_missed))
        converged = last.pruned == 0 or rounds[-1].certified_gap < tolerance or rounds[-1].log_mass - before < tolerance
        if converged or i == len(widths) - 1 or stop():
            if on_round is not None:
                on_round(len(rounds), len(rounds), width, rounds[-1].certified_gap)
            yield best(last, True, user_stop())
            return
        earlier, scored = earlier + last.forward_passes, scored + last.scored

"""Proxy importance sampling: the LM constrained to the lattice as proposal (docs/design.md,
point 11), the baseline the paper compares against.

The proposal q (``marginal_core.lattice.proposal``) is the locally constrained LM of the paper (section
3, "Constrained Sampling"): at each step the LM's next-token distribution is renormalized over
the tokens that keep the prefix completable to an allowed path. Allowed paths are the lattice's
paths minus the canonical one by default, or all of them with ``include_canonical=True``. Each
sample keeps log p (the unconstrained log-softmax summed over its tokens) and log q; the
estimate is log mean exp(log p - log q).

Generation is sequential in the number of tokens and batched across samples with a KV cache:

* the context's cache comes from the LM adapter (shared with the caller's other methods); every
  chunk of samples starts from a copy of it;
* samples that share a prefix share a cache row (their next-token distributions are the same),
  so each forward pass feeds one token per distinct prefix; rows are regrouped with an index
  select on the cache (as beam search does), which also drops finished samples;
* all rows have the same length at every step, so no padding and no attention mask is needed;
* draws use per-(sample, step) uniforms fixed by the seed, so a sample's path does not depend
  on the batch size (up to float rounding at a CDF boundary).

The beam (``marginal_core.estimators.beam``) walks the same way with the same step (``extend``), keeping
the most probable prefixes instead of drawing.
"""

from __future__ import annotations

import copy
import math
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from transformers import DynamicCache

from marginal_core.estimators.run_state import Completion
from marginal_core.ground import hooks as serving_hooks
from marginal_core.ground.progress import Progress, StopCheck
from marginal_core.lattice.graph import Lattice
from marginal_core.lattice.paths import PathBatch
from marginal_core.lattice.proposal import proposal_of
from marginal_core.lm.adapter import LM
from marginal_core.lm.contexts import ContextState
from marginal_core.lm.oom import halved
from marginal_core.scoring.tables import Tables

PROXY_BATCH_SIZE = 1024  # samples per batch: more share more prefixes


# --------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True, eq=False)
class ProxyResult:
    """Proxy samples in sample order, with their log p and log q, and what they cost.

    ``forward_passes`` counts model calls (the context pass included); ``positions`` counts the
    token positions those calls computed. ``completion``: the k asked for, ``done`` (False for
    the partial results proxy_stream yields before its last) and ``cancelled`` (should_stop
    ended the run: only whole chunks are kept then, so the samples stay an unbiased i.i.d. set).
    """

    paths: PathBatch
    log_p: np.ndarray
    log_q: np.ndarray
    forward_passes: int
    positions: int
    seconds: float
    include_canonical: bool
    completion: Completion

    def __len__(self) -> int:
        """How many samples were kept."""
        return len(self.log_p)

    @property
    def log_weights(self) -> np.ndarray:
        """log p - log q of each sample."""
        return self.log_p - self.log_q

    @property
    def log_estimate(self) -> float:
        """log mean exp(log p - log q): the marginal q covers (-inf with no samples)."""
        return float(self.running_log_estimates()[-1]) if len(self) else -math.inf

    def running_log_estimates(self) -> np.ndarray:
        """The estimate after each sample, in sample order."""
        w = self.log_weights
        return np.logaddexp.accumulate(w) - np.log(np.arange(1, len(w) + 1)) if len(w) else w


# --------------------------------------------------------------------------------------------
# Sampling


@dataclass
class _Chunk:
    """Per-sample outputs of one chunk of samples (tensors while running, numpy after)."""

    tokens: Any  # [n, max_steps] token ids, -1 past the end
    lengths: Any
    log_p: Any
    log_q: Any
    forward_passes: int = 0
    positions: int = 0

    @classmethod
    def empty(cls, n: int, steps: int, device: torch.device) -> _Chunk:
        """Accumulators for n samples of at most steps tokens."""
        return cls(
            torch.full((n, steps), -1, dtype=torch.long, device=device),
            torch.zeros(n, dtype=torch.long, device=device),
            torch.zeros(n, dtype=torch.float64, device=device),
            torch.zeros(n, dtype=torch.float64, device=device),
        )

    def to_numpy(self) -> _Chunk:
        """The same outputs as numpy arrays on the CPU."""
        tokens, lengths, log_p, log_q = (t.cpu().numpy() for t in (self.tokens, self.lengths, self.log_p, self.log_q))
        return _Chunk(tokens, lengths, log_p, log_q, self.forward_passes, self.positions)


class _Cancelled(Exception):
    """should_stop asked to stop in the middle of a chunk."""


def _draw(
    log_q: torch.Tensor, rows: torch.Tensor, uniforms: torch.Tensor, width: torch.Tensor
) -> torch.Tensor:
    """Inverse-CDF draw of one allowed column per sample from its row's q."""
    cdf = log_q.exp().cumsum(dim=-1)[rows]
    target = (uniforms * cdf[:, -1]).unsqueeze(1)
    choice = torch.searchsorted(cdf, target, right=True).squeeze(1)
    return torch.minimum(choice, width[rows] - 1)


@dataclass
class _Rows:
    """The distinct prefixes being extended: their proposal states and which one each sample has."""

    state: torch.Tensor  # [R] proposal state of each row
    of_sample: torch.Tensor  # [n_active] row of each active sample
    active: torch.Tensor  # [n_active] sample indices still generating


def _draw_step(
    lm: LM, rows: _Rows, hidden: torch.Tensor, tables: Tables, uniforms: torch.Tensor, out: _Chunk, step: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw every active sample's next token; record it; return (allowed tokens [R, A], choice).

    log p of an allowed token is normalized over the whole vocabulary, log q over the allowed."""
    tok, width = tables.tokens[rows.state], tables.width[rows.state]
    lp = lm.allowed_logprobs(hidden, tok, width)
    lq = torch.log_softmax(lp, dim=-1)
    r, active = rows.of_sample, rows.active
    choice = _draw(lq, r, uniforms[active, step], width)
    out.log_p[active] += lp[r, choice]
    out.log_q[active] += lq[r, choice]
    out.tokens[active, step] = tok[r, choice]
    return tok, choice


def _regroup(
    rows: _Rows, tok: torch.Tensor, choice: torch.Tensor, tables: Tables
) -> tuple[_Rows, torch.Tensor, torch.Tensor]:
    """Rows for the next step (one per distinct extended prefix), their parent rows and tokens."""
    width = tok.shape[1]
    uniq, of_sample = torch.unique(rows.of_sample * width + choice, return_inverse=True)
    parent, col = uniq // width, uniq % width
    state = tables.next_state[rows.state[parent], col]
    return _Rows(state, of_sample, rows.active), parent, tok[parent, col]


def _finish(
    rows: _Rows, choice: torch.Tensor, tables: Tables, out: _Chunk, step: int
) -> tuple[_Rows, torch.Tensor, int]:
    """Record samples that reached the end of the text and drop them from the active set."""
    done = tables.final[tables.next_state[rows.state[rows.of_sample], choice]]
    count = int(done.sum())
    if not count:
        return rows, choice, 0
    out.lengths[rows.active[done]] = step + 1
    keep = ~done
    return _Rows(rows.state, rows.of_sample[keep], rows.active[keep]), choice[keep], count


def _is_identity(parent: torch.Tensor, rows: int) -> bool:
    """Whether the next rows are exactly the current rows in order (no cache regrouping needed)."""
    if parent.numel() != rows:
        return False
    return not bool((parent != torch.arange(rows, device=parent.device)).any())


def extend(lm: LM, cache: DynamicCache, parent: torch.Tensor, feed: torch.Tensor, rows: int) -> torch.Tensor:
    """The walk's one step, shared by the proxy and the beam: regroup the cache's `rows` rows so
    that new row i continues row parent[i] (which drops ended and duplicated prefixes), feed
    each new row its token, and return each new row's last hidden state."""
    with serving_hooks.unit():
        if not _is_identity(parent, rows):
            cache.reorder_cache(parent)  # type: ignore[arg-type]  # transformers wants torch.LongTensor, a distinct stub type
        result = lm.decoder(input_ids=feed[:, None], cache=cache, use_cache=True)
    return result.last_hidden_state[:, -1]


def _run_chunk(
    lm: LM,
    ctx: ContextState,
    tables: Tables,
    start: int,
    uniforms: torch.Tensor,
    should_stop: Callable[[], bool],
    on_done: Callable[[int], None],
) -> _Chunk:
    """Draw len(uniforms) samples, advancing every distinct prefix one token per forward pass."""
    device, n = uniforms.device, uniforms.shape[0]
    out = _Chunk.empty(n, uniforms.shape[1], device)
    cache, hidden = copy.deepcopy(ctx.cache), ctx.last_hidden
    zeros = torch.zeros(n, dtype=torch.long, device=device)
    rows = _Rows(torch.tensor([start], device=device), zeros, torch.arange(n, device=device))
    for step in range(uniforms.shape[1]):
        tok, choice = _draw_step(lm, rows, hidden, tables, uniforms, out, step)
        rows, choice, finished = _finish(rows, choice, tables, out, step)
        if finished:
            on_done(finished)
        if not rows.active.numel():
            break
        if should_stop():
            raise _Cancelled
        rows, parent, feed = _regroup(rows, tok, choice, tables)
        hidden = extend(lm, cache, parent, feed, hidden.shape[0])
        out.forward_passes, out.positions = out.forward_passes + 1, out.positions + int(feed.numel())
    return out.to_numpy()


def _uniforms(k: int, steps: int, seed: int | None) -> torch.Tensor:
    """One uniform per (sample, step), fixed by the seed whatever the batching."""
    gen = torch.Generator()
    if seed is None:
        gen.seed()
    else:
        gen.manual_seed(seed)
    return torch.rand((k, max(1, steps)), generator=gen, dtype=torch.float64)


def _collect(chunks: list[_Chunk]) -> tuple[PathBatch, np.ndarray, np.ndarray]:
    """Paths, log p and log q of the chunks' samples, in sample order."""
    if not chunks:
        empty = np.zeros(0, dtype=np.float64)
        return PathBatch.from_paths([]), empty, empty.copy()
    tokens = [c.tokens[i, : c.lengths[i]] for c in chunks for i in range(len(c.lengths))]
    lengths = np.array([len(t) for t in tokens], dtype=np.int64)
    ids = np.concatenate(tokens).astype(np.int64) if tokens else np.zeros(0, dtype=np.int64)
    paths = PathBatch(ids, np.concatenate([[0], np.cumsum(lengths)]))
    return paths, np.concatenate([c.log_p for c in chunks]), np.concatenate([c.log_q for c in chunks])


@dataclass
class _Plan:
    """What every chunk of one proxy_sample call shares."""

    lm: LM
    ctx: ContextState
    tables: Tables
    start: int
    uniforms: torch.Tensor
    should_stop: StopCheck | None
    progress: Progress | None
    done: int = 0

    def on_done(self, count: int) -> None:
        """Count finished samples and report progress."""
        self.done += count
        if self.progress is not None:
            self.progress(self.done, len(self.uniforms))

    def stop_requested(self) -> bool:
        """Whether the caller asked to cancel."""
        return self.should_stop is not None and bool(self.should_stop())


def _sample_chunks(plan: _Plan, batch_size: int, first_batch: int | None = None) -> Iterator[_Chunk]:
    """Chunks of at most batch_size samples in sample order (the first of first_batch, the rest
    of batch_size: a batch costs about its longest path's steps whatever its size, so doubling
    up would multiply the sequential passes), halving batch_size on out-of-memory.

    Raises _Cancelled when should_stop asks, between chunks or inside one.
    """
    k, device = len(plan.uniforms), plan.uniforms.device
    first, size = 0, min(batch_size, first_batch or batch_size)
    while first < k:
        if first and plan.stop_requested():
            raise _Cancelled
        stop = min(k, first + size)
        try:
            with torch.inference_mode():
                chunk = _run_chunk(
                    plan.lm, plan.ctx, plan.tables, plan.start, plan.uniforms[first:stop],
                    plan.stop_requested, plan.on_done,
                )
        except (RuntimeError, MemoryError) as err:
            size = batch_size = halved(size, err, device.type)
            plan.done = first
            continue
        yield chunk
        first, size = stop, batch_size


def proxy_stream(
    lm: LM,
    lattice: Lattice,
    k: int,
    context: Sequence[int] | ContextState,
    *,
    include_canonical: bool = False,
    seed: int | None = None,
    batch_size: int = PROXY_BATCH_SIZE,
    first_batch: int | None = None,
    progress: Progress | None = None,
    should_stop: StopCheck | None = None,
) -> Iterator[ProxyResult]:
    """The samples so far after each chunk of at most batch_size (the first of first_batch, the
    rest of batch_size); the last result is final.

    context is token ids (prefilled here, one forward pass counted) or a ContextState to share.
    Samples do not depend on batch_size (halved on out-of-memory): each has its own uniforms.
    Without include_canonical the canonical path is never drawn and the estimate is of the
    non-canonical marginal; a text whose only tokenization is canonical gets no samples.
    progress(done, k) counts finished samples; should_stop() is polled before every pass, and a
    stopped run keeps only whole chunks, so its samples stay an unbiased i.i.d. set.
    """
    t0 = time.perf_counter()
    if k < 0 or batch_size < 1 or (first_batch is not None and first_batch < 1):
        raise ValueError("k must be >= 0, and batch_size and first_batch >= 1")
    proposal = proposal_of(lattice, include_canonical)
    chunks: list[_Chunk] = []
    passes = positions = 0

    def result(done: bool, cancelled: bool = False) -> ProxyResult:
        paths, log_p, log_q = _collect(chunks)
        return ProxyResult(
            paths, log_p, log_q, passes + sum(c.forward_passes for c in chunks),
            positions + sum(c.positions for c in chunks), time.perf_counter() - t0,
            include_canonical, Completion(k, done, cancelled),
        )

    if not k or proposal.empty:
        yield result(True)
        return
    ctx = lm.state_of(context)
    if ctx is not context:
        passes, positions = ctx.passes, len(ctx)
    uniforms = _uniforms(k, proposal.max_steps, seed).to(lm.device)
    tables = Tables.of(proposal, lm.device)
    plan = _Plan(lm, ctx, tables, proposal.start, uniforms, should_stop, progress)
    try:
        for chunk in _sample_chunks(plan, batch_size, first_batch):
            chunks.append(chunk)
            if sum(len(c.lengths) for c in chunks) < k:
                yield result(False)
    except _Cancelled:
        yield result(False, cancelled=True)
        return
    yield result(True)


def proxy_sample(
    lm: LM, lattice: Lattice, k: int, context: Sequence[int] | ContextState, **options: Any
) -> ProxyResult:
    """Draw k paths from the lattice-constrained LM and keep log p and log q of each
    (options as for proxy_stream)."""
    return deque(proxy_stream(lm, lattice, k, context, **options), maxlen=1).pop()

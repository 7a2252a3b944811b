"""Proxy importance sampling: the LM constrained to the lattice as proposal (DESIGN.md point 11).

The proposal q is the locally constrained LM of the paper (section 3, "Constrained Sampling"):
at each step the LM's next-token distribution is renormalized over the tokens that keep the
prefix completable to an allowed path. Allowed paths are the lattice's paths minus the
canonical one by default (states = lattice node x "still on the canonical path"), or all of
them with ``include_canonical=True``. Each sample keeps log p (the unconstrained log-softmax
summed over its tokens) and log q; the estimate is log mean exp(log p - log q).

Generation is sequential in the number of tokens and batched across samples with a KV cache:

* the context is encoded once; every chunk of samples starts from a copy of its cache;
* samples that share a prefix share a cache row (their next-token distributions are the same),
  so each forward pass feeds one token per distinct prefix; rows are regrouped with an index
  select on the cache (as beam search does), which also drops finished samples;
* all rows have the same length at every step, so no padding and no attention mask is needed;
* draws use per-(sample, step) uniforms fixed by the seed, so a sample's path does not depend
  on the batch size (up to float rounding at a CDF boundary).
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

from marginal_core.lattice import Lattice, Path, PathBatch
from marginal_core.sampling import Sample

DEFAULT_BATCH_SIZE = 1024  # samples per batch: more share more prefixes (1.4x faster than 256)
DEFAULT_SCORE_ROWS = 256


# --------------------------------------------------------------------------------------------
# The proposal automaton


@dataclass(frozen=True, eq=False)
class Proposal:
    """The product of the lattice with "still on the canonical path", trimmed to live states.

    State ``s`` allows the tokens ``tokens[s, :width[s]]``, leading to ``next_state[s, :]``
    (padded with 0 and -1). ``final[s]`` marks the end of a path. ``start`` is -1 when no
    allowed path exists (a text whose only tokenization is the canonical one, excluded).
    """

    tokens: np.ndarray
    next_state: np.ndarray
    width: np.ndarray
    final: np.ndarray
    start: int
    max_steps: int
    include_canonical: bool

    @property
    def num_states(self) -> int:
        """How many states the automaton has."""
        return len(self.final)

    @property
    def empty(self) -> bool:
        """Whether no path is allowed at all."""
        return self.start < 0

    def allowed(self, state: int) -> dict[int, int]:
        """Allowed token id -> next state, for one state."""
        w = int(self.width[state])
        return dict(zip(self.tokens[state, :w].tolist(), self.next_state[state, :w].tolist()))

    def walk(self, path: Path) -> list[int]:
        """The states a path visits (its first state is the start); ValueError if not allowed."""
        states = [self.start]
        for token in path:
            nxt = self.allowed(states[-1]).get(int(token)) if states[-1] >= 0 else None
            if nxt is None:
                raise ValueError(f"{path} is not an allowed path of this proposal")
            states.append(nxt)
        if not self.final[states[-1]]:
            raise ValueError(f"{path} stops before the end of the text")
        return states


def _live_canonical(lattice: Lattice, include_canonical: bool) -> list[bool]:
    """live[i]: some allowed path continues from canonical boundary i still on the canonical path."""
    canon, bounds = lattice.canonical, lattice.canonical_nodes
    live = [False] * (len(canon) + 1)
    live[-1] = include_canonical
    for i in range(len(canon) - 1, -1, -1):
        leaves = any(int(lattice.arc_token[a]) != canon[i] for a in lattice.out_arcs(bounds[i]))
        live[i] = leaves or live[i + 1]
    return live


def _longest(lattice: Lattice) -> int:
    """The most tokens any path uses."""
    most = np.full(lattice.end + 1, -1, dtype=np.int64)
    most[0] = 0
    for node in lattice.nodes.tolist():
        arcs = lattice.out_arcs(node)
        if arcs and most[node] >= 0:
            ends = lattice.arc_end[arcs.start : arcs.stop]
            np.maximum.at(most, ends, most[node] + 1)
    return int(most[lattice.end])


def build_proposal(lattice: Lattice, include_canonical: bool = False) -> Proposal:
    """The proposal automaton of a lattice: states, allowed tokens, co-reachability exact."""
    nodes = lattice.nodes.tolist()
    off = {n: s for s, n in enumerate(nodes)}  # (node, off the canonical path) -> state
    canon, bounds = lattice.canonical, lattice.canonical_nodes
    live = _live_canonical(lattice, include_canonical)
    on = {i: len(nodes) + i for i in range(len(canon) + 1)}  # (boundary i, on it) -> state
    rows: list[list[tuple[int, int]]] = []
    for node in nodes:
        arcs = lattice.out_arcs(node)
        rows.append([(int(lattice.arc_token[a]), off[int(lattice.arc_end[a])]) for a in arcs])
    for i, node in enumerate(bounds):
        row = []
        for a in lattice.out_arcs(node) if i < len(canon) else ():
            token, target = int(lattice.arc_token[a]), int(lattice.arc_end[a])
            if token != canon[i]:
                row.append((token, off[target]))
            elif live[i + 1]:
                row.append((token, on[i + 1]))
        rows.append(row)
    width = np.array([len(r) for r in rows], dtype=np.int64)
    cols = max(1, int(width.max()))
    tokens = np.zeros((len(rows), cols), dtype=np.int64)
    next_state = np.full((len(rows), cols), -1, dtype=np.int64)
    for s, row in enumerate(rows):
        for c, (token, target) in enumerate(row):
            tokens[s, c], next_state[s, c] = token, target
    final = np.zeros(len(rows), dtype=bool)
    final[off[lattice.end]] = True
    final[on[len(canon)]] = include_canonical
    start = on[0] if live[0] else -1
    return Proposal(tokens, next_state, width, final, start, _longest(lattice), include_canonical)


# --------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True, eq=False)
class ProxyResult:
    """Proxy samples in sample order, with their log p and log q, and what they cost.

    ``forward_passes`` counts model calls (the context pass included); ``positions`` counts the
    token positions those calls computed; ``requested`` is the k asked for. ``cancelled`` is
    True when should_stop ended the run: only whole chunks are kept then, so the samples stay an
    unbiased i.i.d. set. ``done`` is False for the partial results proxy_stream yields before
    its last.
    """

    paths: PathBatch
    log_p: np.ndarray
    log_q: np.ndarray
    forward_passes: int
    positions: int
    seconds: float
    include_canonical: bool
    requested: int
    cancelled: bool = False
    done: bool = True

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

    def samples(self) -> list[Sample]:
        """The samples as Sample objects of kind "proxy"."""
        return [Sample(p, "proxy") for p in self.paths.tolist()]


# --------------------------------------------------------------------------------------------
# Model plumbing


def _hf_model(lm: Any) -> torch.nn.Module:
    """The Hugging Face model inside a LoadedModel (or the model itself)."""
    return getattr(lm, "model", lm)


def _device(lm: Any) -> torch.device:
    """Where the model's parameters live."""
    return next(_hf_model(lm).parameters()).device


def _is_oom(exc: BaseException) -> bool:
    """Whether an exception is an out-of-memory error (CUDA, MPS or the CPU allocator)."""
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)


def _free_memory(device: torch.device) -> None:
    """Return cached accelerator memory after an out-of-memory error."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
    elif device.type == "mps":
        torch.mps.empty_cache()


@dataclass
class _Context:
    """The context's KV cache (batch 1) and the logits of the first token after it."""

    cache: Any
    logits: torch.Tensor
    length: int


def _encode_context(model: torch.nn.Module, context: Sequence[int], device: torch.device) -> _Context:
    """One forward pass over the context, keeping its cache and its last logits only."""
    if not len(context):
        raise ValueError("the context must hold at least one token (BOS or EOS without a context)")
    ids = torch.tensor([list(context)], dtype=torch.long, device=device)
    out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
    return _Context(out.past_key_values, out.logits[:, -1], len(context))


def _step_log_probs(
    logits: torch.Tensor, tokens: torch.Tensor, width: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row: log p of each allowed token (full-vocabulary normalizer) and log q (renormalized).

    logits [R, V]; tokens [R, A] allowed ids padded; width [R] how many are real. The
    normalizer is computed in fp32; the small gathered part in fp64. Padding gets -inf.
    """
    lse = torch.logsumexp(logits.float(), dim=-1).double()
    picked = logits.gather(1, tokens).double()
    pad = torch.arange(tokens.shape[1], device=tokens.device)[None, :] >= width[:, None]
    picked = picked.masked_fill(pad, -math.inf)
    return picked - lse[:, None], torch.log_softmax(picked, dim=-1)


# --------------------------------------------------------------------------------------------
# Sampling


@dataclass
class _Tables:
    """The proposal's arrays as tensors on the model's device."""

    tokens: torch.Tensor
    next_state: torch.Tensor
    width: torch.Tensor
    final: torch.Tensor

    @classmethod
    def of(cls, proposal: Proposal, device: torch.device) -> _Tables:
        t = lambda a: torch.as_tensor(a, device=device)  # noqa: E731
        return cls(t(proposal.tokens), t(proposal.next_state), t(proposal.width), t(proposal.final))


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
        arrays = (t.cpu().numpy() for t in (self.tokens, self.lengths, self.log_p, self.log_q))
        return _Chunk(*arrays, self.forward_passes, self.positions)


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
    rows: _Rows, logits: torch.Tensor, tables: _Tables, uniforms: torch.Tensor, out: _Chunk, step: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw every active sample's next token; record it; return (allowed tokens [R, A], choice)."""
    tok, width = tables.tokens[rows.state], tables.width[rows.state]
    lp, lq = _step_log_probs(logits, tok, width)
    r, active = rows.of_sample, rows.active
    choice = _draw(lq, r, uniforms[active, step], width)
    out.log_p[active] += lp[r, choice]
    out.log_q[active] += lq[r, choice]
    out.tokens[active, step] = tok[r, choice]
    return tok, choice


def _regroup(
    rows: _Rows, tok: torch.Tensor, choice: torch.Tensor, tables: _Tables
) -> tuple[_Rows, torch.Tensor, torch.Tensor]:
    """Rows for the next step (one per distinct extended prefix), their parent rows and tokens."""
    width = tok.shape[1]
    uniq, of_sample = torch.unique(rows.of_sample * width + choice, return_inverse=True)
    parent, col = uniq // width, uniq % width
    state = tables.next_state[rows.state[parent], col]
    return _Rows(state, of_sample, rows.active), parent, tok[parent, col]


def _finish(
    rows: _Rows, choice: torch.Tensor, tables: _Tables, out: _Chunk, step: int
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


def _run_chunk(
    model: torch.nn.Module,
    ctx: _Context,
    tables: _Tables,
    start: int,
    uniforms: torch.Tensor,
    should_stop: Callable[[], bool],
    on_done: Callable[[int], None],
) -> _Chunk:
    """Draw len(uniforms) samples, advancing every distinct prefix one token per forward pass."""
    device, n = uniforms.device, uniforms.shape[0]
    out = _Chunk.empty(n, uniforms.shape[1], device)
    cache, logits = copy.deepcopy(ctx.cache), ctx.logits
    zeros = torch.zeros(n, dtype=torch.long, device=device)
    rows = _Rows(torch.tensor([start], device=device), zeros, torch.arange(n, device=device))
    for step in range(uniforms.shape[1]):
        tok, choice = _draw_step(rows, logits, tables, uniforms, out, step)
        rows, choice, finished = _finish(rows, choice, tables, out, step)
        if finished:
            on_done(finished)
        if not rows.active.numel():
            break
        if should_stop():
            raise _Cancelled
        rows, parent, feed = _regroup(rows, tok, choice, tables)
        if not _is_identity(parent, logits.shape[0]):
            cache.reorder_cache(parent)  # regroup rows; drops finished and duplicated prefixes
        result = model(input_ids=feed[:, None], past_key_values=cache, use_cache=True)
        cache, logits = result.past_key_values, result.logits[:, -1]
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

    model: torch.nn.Module
    ctx: _Context
    tables: _Tables
    start: int
    uniforms: torch.Tensor
    should_stop: Callable[[], bool] | None
    progress: Callable[[int, int], None] | None
    done: int = 0

    def on_done(self, count: int) -> None:
        """Count finished samples and report progress."""
        self.done += count
        if self.progress is not None:
            self.progress(self.done, len(self.uniforms))

    def stop_requested(self) -> bool:
        """Whether the caller asked to cancel."""
        return self.should_stop is not None and bool(self.should_stop())


def _sample_chunks(plan: _Plan, batch_size: int) -> Iterator[_Chunk]:
    """Chunks of at most batch_size samples in sample order, halving it on out-of-memory.

    Raises _Cancelled when should_stop asks, between chunks or inside one.
    """
    k, device = len(plan.uniforms), plan.uniforms.device
    first, size = 0, batch_size
    while first < k:
        if first and plan.stop_requested():
            raise _Cancelled
        stop = min(k, first + size)
        try:
            with torch.inference_mode():
                chunk = _run_chunk(
                    plan.model, plan.ctx, plan.tables, plan.start, plan.uniforms[first:stop],
                    plan.stop_requested, plan.on_done,
                )
        except RuntimeError as exc:
            if not _is_oom(exc) or size == 1:
                raise
            _free_memory(device)
            plan.done, size = first, size // 2
            continue
        yield chunk
        first = stop


def proxy_stream(
    lm: Any,
    lattice: Lattice,
    k: int,
    context: Sequence[int],
    *,
    include_canonical: bool = False,
    seed: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Iterator[ProxyResult]:
    """The samples so far after each chunk of at most batch_size; the last result is final.

    Samples do not depend on batch_size (halved on out-of-memory): each has its own uniforms.
    Without include_canonical the canonical path is never drawn and the estimate is of the
    non-canonical marginal; a text whose only tokenization is canonical gets no samples.
    progress(done, k) counts finished samples; should_stop() is polled before every pass, and a
    stopped run keeps only whole chunks, so its samples stay an unbiased i.i.d. set.
    """
    t0 = time.perf_counter()
    if k < 0 or batch_size < 1:
        raise ValueError("k must be >= 0 and batch_size >= 1")
    proposal = build_proposal(lattice, include_canonical)
    chunks: list[_Chunk] = []
    passes = positions = 0

    def result(done: bool, cancelled: bool = False) -> ProxyResult:
        paths, log_p, log_q = _collect(chunks)
        return ProxyResult(
            paths, log_p, log_q, passes + sum(c.forward_passes for c in chunks),
            positions + sum(c.positions for c in chunks), time.perf_counter() - t0,
            include_canonical, k, cancelled, done,
        )

    if not k or proposal.empty:
        yield result(True)
        return
    model, device = _hf_model(lm), _device(lm)
    with torch.inference_mode():
        ctx = _encode_context(model, context, device)
        uniforms = _uniforms(k, proposal.max_steps, seed).to(device)
        tables = _Tables.of(proposal, device)
    passes, positions = 1, ctx.length
    plan = _Plan(model, ctx, tables, proposal.start, uniforms, should_stop, progress)
    try:
        for chunk in _sample_chunks(plan, batch_size):
            chunks.append(chunk)
            if sum(len(c.lengths) for c in chunks) < k:
                yield result(False)
    except _Cancelled:
        yield result(False, cancelled=True)
        return
    yield result(True)


def proxy_sample(lm: Any, lattice: Lattice, k: int, context: Sequence[int], **options: Any) -> ProxyResult:
    """Draw k paths from the lattice-constrained LM and keep log p and log q of each
    (options as for proxy_stream)."""
    return deque(proxy_stream(lm, lattice, k, context, **options), maxlen=1).pop()


# --------------------------------------------------------------------------------------------
# Teacher-forced q of given paths


def proposal_log_q(
    lm: Any,
    lattice: Lattice,
    paths: Sequence[Path] | PathBatch,
    context: Sequence[int],
    *,
    include_canonical: bool = False,
    rows: int = DEFAULT_SCORE_ROWS,
) -> np.ndarray:
    """log q of given paths under the proposal, teacher-forced (-inf for disallowed paths).

    Paths are fed after the context's shared cache, right-padded in batches (causal attention
    leaves earlier positions untouched by padding); ``rows`` caps batch x length per pass.
    """
    proposal = build_proposal(lattice, include_canonical)
    items = paths.tolist() if isinstance(paths, PathBatch) else [tuple(p) for p in paths]
    out = np.full(len(items), -math.inf)
    walks = {i: w for i, path in enumerate(items) if (w := _try_walk(proposal, path)) is not None}
    todo = sorted(walks, key=lambda i: len(items[i]))
    if not todo:
        return out
    model, device = _hf_model(lm), _device(lm)
    with torch.inference_mode():
        ctx = _encode_context(model, context, device)
        for batch in _length_batches(todo, [len(items[i]) for i in todo], rows):
            chosen = [items[j] for j in batch]
            _score_batch(model, ctx, proposal, chosen, [walks[j] for j in batch], out, batch)
    return out


def _try_walk(proposal: Proposal, path: Path) -> list[int] | None:
    """The states an allowed path visits, or None if the proposal never draws it."""
    if proposal.empty:
        return None
    try:
        return proposal.walk(path)
    except ValueError:
        return None


def _length_batches(order: list[int], lengths: list[int], rows: int) -> list[list[int]]:
    """Split items sorted by length into batches whose count x longest length stays under rows."""
    batches: list[list[int]] = [[]]
    for i, length in zip(order, lengths):
        if batches[-1] and (len(batches[-1]) + 1) * length > rows:
            batches.append([])
        batches[-1].append(i)
    return batches


def _score_batch(
    model: torch.nn.Module,
    ctx: _Context,
    proposal: Proposal,
    paths: list[Path],
    walks: list[list[int]],
    out: np.ndarray,
    where: list[int],
) -> None:
    """Teacher-force one batch of paths and write their log q into out[where]."""
    device, n, longest = ctx.logits.device, len(paths), max(len(p) for p in paths)
    ids = torch.zeros((n, longest), dtype=torch.long, device=device)
    for b, p in enumerate(paths):
        ids[b, : len(p)] = torch.tensor(p, dtype=torch.long)
    cache = copy.deepcopy(ctx.cache)
    cache.reorder_cache(torch.zeros(n, dtype=torch.long, device=device))
    if longest > 1:
        logits = model(input_ids=ids[:, :-1], past_key_values=cache, use_cache=True).logits
        logits = torch.cat([ctx.logits.expand(n, -1)[:, None], logits], dim=1)
    else:
        logits = ctx.logits.expand(n, -1)[:, None]
    for b, (path, walk) in enumerate(zip(paths, walks)):
        allowed = torch.as_tensor(proposal.tokens[walk[:-1]], device=device)
        width = torch.as_tensor(proposal.width[walk[:-1]], device=device)
        _, lq = _step_log_probs(logits[b, : len(path)], allowed, width)
        col = (allowed == ids[b, : len(path), None]).int().argmax(dim=1)
        out[where[b]] = float(lq[torch.arange(len(path), device=device), col].sum())

"""Log-probabilities of tokenizations under a causal LM, each distinct prefix computed once
(docs/design.md, point 8 and "Where the time goes").

``score_paths`` runs the paths' prefix trie (``marginal_core.trie``) after a context whose KV
cache it takes from the LM adapter, or shares with its caller: a ``ContextState`` passed in is
reused as it is, so a Marginalizer prefills its context once for every chunk and method. Rows
carry their ancestors' KV states from pass to pass under tree attention masks. The LM head and
the log-softmax run on the hidden states in chunks of rows (pooled across passes, since each
chunk reads the whole output layer), in fp32, reading only the needed tokens.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import torch
from transformers import DynamicCache

from marginal_core import turns
from marginal_core.batching import current_batcher
from marginal_core.lattice import Path, PathBatch
from marginal_core.lm.adapter import LM, ContextState
from marginal_core.lm.oom import halved
from marginal_core.progress import Progress
from marginal_core.trie import (
    Pass,
    Shape,
    Trie,
    as_paths,
    build_trie,
    cut,
    path_sums,
    plan_pass,
    plan_shape,
    tree_allowed,
)

if TYPE_CHECKING:
    from marginal_core.models import LoadedModel

DEFAULT_MAX_BATCH_TOKENS = 1024
# On a GPU a pass of a small model costs mostly its kernel launches: larger passes, fewer launches.
CUDA_MAX_BATCH_TOKENS = 8192
# A pass attends over at most this many (query, key) pairs: short texts never reach it, a long
# text's passes get fewer tokens as its depth grows, so each stays short (a stop is heard
# between passes).
DEFAULT_MAX_PASS_PAIRS = 1 << 22
CUDA_MAX_PASS_PAIRS = 1 << 26
DEFAULT_ROW_TOKENS = 256
DEFAULT_MAX_BATCH_BYTES = 1 << 30
# On CUDA a pass's estimated activations may take this share of the memory the weights leave.
CUDA_PASS_SHARE = 0.25

@dataclass
class ScoreStats:
    """Work done by scoring calls, summed over every call that is given this object.

    plain_tokens is what plain scoring feeds for the same paths (context + path each, without
    padding); tokens_fed counts what was fed here (padding excluded, padded_tokens includes it);
    head_rows counts the hidden states that went through the LM head.
    """

    paths: int = 0
    scored_tokens: int = 0
    plain_tokens: int = 0
    tokens_fed: int = 0
    padded_tokens: int = 0
    forward_passes: int = 0
    head_rows: int = 0
    oom_retries: int = 0
    seconds: float = 0.0

    def share(self, fraction: float) -> ScoreStats:
        """A request's part of a shared pass's work: its fraction of the tokens and head rows,
        every pass (each carried it)."""
        return ScoreStats(tokens_fed=round(self.tokens_fed * fraction),
                          padded_tokens=round(self.padded_tokens * fraction),
                          forward_passes=self.forward_passes, head_rows=round(self.head_rows * fraction),
                          oom_retries=self.oom_retries)

    def add(self, other: ScoreStats) -> None:
        """Add other's work to this one's."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    @property
    def saved_share(self) -> float:
        """Share of plain scoring's tokens that context reuse and prefix sharing did not feed."""
        return 1 - self.tokens_fed / self.plain_tokens if self.plain_tokens else 0.0

    @property
    def tokens_per_second(self) -> float:
        """Path tokens scored per wall-clock second."""
        return self.scored_tokens / self.seconds if self.seconds else 0.0


def count_call(stats: ScoreStats, paths: list[Path], context: list[int], started: float) -> None:
    """Add one call's paths, path tokens, plain-equivalent tokens and wall time to stats."""
    lengths = sum(map(len, paths))
    stats.paths += len(paths)
    stats.scored_tokens += lengths
    stats.plain_tokens += lengths + len(context) * len(paths)
    stats.seconds += time.perf_counter() - started


def pass_pairs(lm: LM) -> int:
    """The most (query, key) pairs one pass may attend over on the model's device."""
    return CUDA_MAX_PASS_PAIRS if lm.device.type == "cuda" else DEFAULT_MAX_PASS_PAIRS


def pass_tokens(lm: LM, asked: int | None = None) -> int:
    """Tokens per forward pass: the ones asked for, else the device's default."""
    if asked is not None:
        return asked
    return CUDA_MAX_BATCH_TOKENS if lm.device.type == "cuda" else DEFAULT_MAX_BATCH_TOKENS


def pass_bytes(lm: LM, asked: int | None = None) -> int:
    """Estimated activation bytes per forward pass: the ones asked for, else on CUDA a share of
    the device memory the model's weights leave (a 27B model's passes would not fit a fixed GiB,
    a small model's could take more), elsewhere DEFAULT_MAX_BATCH_BYTES. It depends on the device
    and the model only, so every run of a model plans alike (shared passes key on it); an
    out-of-memory error still halves the pass."""
    if asked is not None:
        return asked
    if lm.device.type != "cuda":
        return DEFAULT_MAX_BATCH_BYTES
    total = torch.cuda.get_device_properties(lm.device).total_memory
    return max(DEFAULT_MAX_BATCH_BYTES, int((total - lm.weight_bytes) * CUDA_PASS_SHARE))


def context_state(
    lm: LM, context: Sequence[int] | ContextState, stats: ScoreStats, chunk_tokens: int
) -> ContextState:
    """The context's KV cache: the one given, or a fresh prefill counted in stats."""
    state = lm.state_of(context, chunk_tokens)
    if state is context:
        return state
    stats.forward_passes += state.passes
    stats.tokens_fed += len(state)
    stats.padded_tokens += len(state)
    return state


def check_paths(lm: LM, paths: list[Path], context: Sequence[int] | ContextState) -> list[int]:
    """The context ids; refuse an empty context and token ids outside the vocabulary."""
    ids = list(context.ids) if isinstance(context, ContextState) else [int(t) for t in context]
    if not ids:
        raise ValueError("the context is empty: condition on at least a BOS token (see context_ids)")
    lm.check_ids([*ids, *(t for p in paths for t in p)])
    return ids


# ---------------------------------------------------------------- one scoring run


@dataclass(frozen=True)
class _Children:
    """The trie's nodes sorted by the hidden-state row that predicts their token."""

    order: torch.Tensor
    rows: torch.Tensor
    tokens: torch.Tensor
    bounds: list[int]

    @classmethod
    def of(cls, trie: Trie, device: torch.device) -> _Children:
        order = np.argsort(trie.parent_row, kind="stable")
        rows = trie.parent_row[order]
        bounds = np.searchsorted(rows, np.arange(len(trie.fed) + 2)).tolist()
        return cls(*(torch.from_numpy(a).to(device) for a in (order, rows, trie.token[order])), bounds)

    def score(
        self,
        lm: LM,
        hidden: torch.Tensor,
        blocks: list[tuple[int, int]],
        max_rows: int,
        out: torch.Tensor,
        scratch: dict[str, torch.Tensor],
    ) -> None:
        """Write into out the log-probs of the tokens that hidden predicts.

        hidden holds the rows [first, first + count) of each (first, count) block in turn.
        """
        sel, local, tokens, offset = [], [], [], 0
        for first, count in blocks:
            lo, hi = self.bounds[first], self.bounds[first + count]
            sel.append(self.order[lo:hi])
            local.append(self.rows[lo:hi] - first + offset)
            tokens.append(self.tokens[lo:hi])
            offset += count
        out[torch.cat(sel)] = lm.token_logprobs(hidden, torch.cat(local), torch.cat(tokens), max_rows, scratch)


@dataclass
class _Row:
    """One batch row's piece: fed indices [start, stop), and the ancestors it carries.

    ``chain`` maps the ancestors of ``fed[start]`` whose KV states the row holds to their index
    in ``keys`` and ``values`` (one [kv_heads, len(chain), head_dim] tensor per layer).
    """

    start: int
    stop: int
    chain: dict[int, int] = field(default_factory=dict)
    keys: list[torch.Tensor] = field(default_factory=list)
    values: list[torch.Tensor] = field(default_factory=list)


def _additive(lm: LM, allowed: np.ndarray) -> torch.Tensor:
    """A boolean [rows, queries, keys] mask as the decoder's additive [rows, 1, queries, keys]
    one: 0 where allowed, the dtype's minimum elsewhere."""
    blocked = torch.from_numpy(~allowed)[:, None]
    mask = torch.zeros(blocked.shape, dtype=lm.dtype).masked_fill_(blocked, torch.finfo(lm.dtype).min)
    return mask.to(lm.device)


def _mask_argument(lm: LM, masks: dict[str, torch.Tensor]) -> torch.Tensor | dict[str, torch.Tensor]:
    """What the decoder takes: a mask per layer type where it has several, else one mask."""
    if lm.layer_types is not None:
        return {kind: masks[kind] for kind in lm.layer_types}
    return masks["sliding_attention" if lm.window is not None else "full_attention"]


def _with_carried(ctx_part: torch.Tensor, carried: list[torch.Tensor | None], width: int) -> torch.Tensor:
    """[rows, kv_heads, context + width, head_dim]: the context's states, then each row's
    carried ones, zero-padded."""
    batch, heads, ctx_len, dim = len(carried), *ctx_part.shape[1:]
    out = ctx_part.new_zeros(batch, heads, ctx_len + width, dim)
    out[:, :, :ctx_len] = ctx_part
    for r, held in enumerate(carried):
        if held is not None:
            out[r, :, ctx_len : ctx_len + held.shape[1]] = held
    return out


def _past(ctx: DynamicCache, rows: list[_Row], width: int) -> DynamicCache:
    """A cache holding, per row, the context's KV states and then the row's carried ones."""
    return DynamicCache(
        (
            _with_carried(layer.keys, [row.keys[i] if row.chain else None for row in rows], width),
            _with_carried(layer.values, [row.values[i] if row.chain else None for row in rows], width),
        )
        for i, layer in enumerate(ctx.layers)
    )


def _run_pass(
    lm: LM, trie: Trie, rows: list[_Row], plan: Pass, ctx: DynamicCache
) -> tuple[torch.Tensor, DynamicCache]:
    """One forward pass of the planned rows: hidden states [rows, queries, hidden] and the cache."""
    width_c, width_q = plan.widths
    ids = torch.zeros(len(rows), width_q, dtype=torch.long)
    pos = torch.full((len(rows), width_q), plan.ctx_len, dtype=torch.long)
    for r, queries in enumerate(plan.queries):
        ids[r, : len(queries)] = torch.from_numpy(trie.token[queries])
        pos[r, : len(queries)] = torch.from_numpy(plan.ctx_len - 1 + trie.depth[queries])
    cache = _past(ctx, rows, width_c)
    masks = {kind: _additive(lm, allowed) for kind, allowed in tree_allowed(trie, plan, lm.window).items()}
    with lm.masked_attention():
        out = lm.decoder(
            input_ids=ids.to(lm.device),
            attention_mask=_mask_argument(lm, masks),
            position_ids=pos.to(lm.device),
            cache=cache,
            use_cache=True,
        )
    return out.last_hidden_state, cache


def _advance(trie: Trie, rows: list[_Row], plan: Pass, cache: DynamicCache) -> None:
    """Move each row past its segment, keeping the KV states its next segment's ancestors need."""
    for r, row in enumerate(rows):
        row.start += plan.owned[r]
        if row.start >= row.stop:
            continue
        col, chain = plan.columns(r), trie.ancestors(int(trie.fed[row.start]))
        index = torch.tensor([col[n] for n in chain], dtype=torch.long, device=cache.layers[0].keys.device)
        row.chain = {n: i for i, n in enumerate(chain)}
        row.keys = [layer.keys[r].index_select(1, index) for layer in cache.layers]
        row.values = [layer.values[r].index_select(1, index) for layer in cache.layers]


@dataclass
class TrieRun:
    """One call of score_paths: the trie, the budgets, and the log-prob of every node.

    Hidden states wait in ``pending`` until they fill a chunk of the LM head, which for Gemma
    costs a pass over 168M weights however few rows it gets.
    """

    lm: LM
    trie: Trie
    context: ContextState
    budget: int
    row_tokens: int
    max_bytes: int
    stats: ScoreStats
    progress: Progress | None

    def __post_init__(self) -> None:
        self.children = _Children.of(self.trie, self.lm.device)
        self.node_lp = torch.zeros(len(self.trie.token), dtype=self.lm.logit_dtype, device=self.lm.device)
        self.total, self.done = len(self.context) + len(self.trie.fed), len(self.context)
        # the paths' first tokens come from the context's last hidden state (row 0)
        self.pending: list[tuple[torch.Tensor, list[tuple[int, int]]]] = [(self.context.last_hidden, [(0, 1)])]
        self.scratch: dict[str, torch.Tensor] = {}

    def _halve(self, err: BaseException) -> None:
        """Halve the token budget after an allocation failure (see marginal_core.lm.oom)."""
        self.budget = halved(self.budget, err, self.lm.device.type)
        self.stats.oom_retries += 1

    def _flush(self, min_rows: int) -> None:
        """Score the pending hidden states if there are at least min_rows of them."""
        if sum(len(hidden) for hidden, _ in self.pending) < max(min_rows, 1):
            return
        hidden = torch.cat([hidden for hidden, _ in self.pending])
        blocks = [block for _, group in self.pending for block in group]
        self.children.score(self.lm, hidden, blocks, self.budget, self.node_lp, self.scratch)
        self.stats.head_rows += len(hidden)
        self.pending = []

    def finish(self) -> None:
        """Score whatever hidden states are still pending."""
        while self.pending:
            try:
                with turns.unit():
                    self._flush(1)
            except (RuntimeError, MemoryError) as err:
                self._halve(err)

    def _counted(self, fed: int, padded: int, done: int) -> None:
        """Record forward passes and report progress."""
        self.stats.forward_passes += 1
        self.stats.tokens_fed += fed
        self.stats.padded_tokens += padded
        self.done += done
        if self.progress:
            self.progress(self.done, self.total)

    def _plan(self, spans: list[tuple[int, int]]) -> tuple[Shape, list[tuple[int, int]]]:
        """The shape for the nodes in spans, and the spans cut into pieces for its rows."""
        size = sum(b - a for a, b in spans)
        extra_keys = len(self.context) + int(self.trie.depth.max(initial=0))
        shape = plan_shape(size, self.budget, self.row_tokens, extra_keys, self.max_bytes, self.lm.activation_bytes,
                           pass_pairs(self.lm))
        return shape, cut(self.trie, spans, shape.per_row * shape.passes, shape.per_row // 16)

    def run_trie(self) -> None:
        """Feed every internal node once, in passes of rows that carry their ancestors' KV."""
        queue = [(0, len(self.trie.fed))] if len(self.trie.fed) else []
        active: list[_Row] = []
        while queue or active:
            if not active:
                shape, queue = self._plan(queue)
                passes_left = shape.passes
            while len(active) < shape.rows and queue:
                active.append(_Row(*queue.pop(0)))
            plan = plan_pass(self.trie, active, passes_left, shape.per_row, len(self.context))
            try:
                with turns.unit():
                    hidden, cache = _run_pass(self.lm, self.trie, active, plan, self.context.cache)
                    owned = [h[len(q) - k : len(q)] for h, q, k in zip(hidden, plan.queries, plan.owned)]
                    blocks = [(1 + row.start, k) for row, k in zip(active, plan.owned)]
                    self.pending.append((torch.cat(owned), blocks))
                    self._flush(self.lm.head_rows(self.budget))
            except (RuntimeError, MemoryError) as err:
                self._halve(err)
                queue = [(row.start, row.stop) for row in active] + queue
                active = []
                continue
            self._counted(sum(map(len, plan.queries)), len(active) * plan.widths[1], sum(plan.owned))
            _advance(self.trie, active, plan, cache)
            del hidden, cache  # the pass's states: a run that waits for its next turn holds only what it carries
            active = [row for row in active if row.start < row.stop]
            passes_left -= 1


def score_paths(
    lm: LM | LoadedModel,
    paths: PathBatch | Sequence[Path],
    context: Sequence[int] | ContextState,
    *,
    max_batch_tokens: int | None = None,
    row_tokens: int = DEFAULT_ROW_TOKENS,
    max_batch_bytes: int | None = None,
    progress: Progress | None = None,
    stats: ScoreStats | None = None,
) -> np.ndarray:
    """log p(path | context) of every path (float64), each distinct prefix computed once.

    context is token ids (prefilled here) or a ContextState to share. The paths' prefix trie
    runs in passes of about max_batch_tokens tokens (default: pass_tokens) in rows of up to row_tokens, shrunk to fit
    max_batch_bytes of estimated activations (default: pass_bytes) and halved on out-of-memory errors. progress gets
    (tokens fed, tokens to feed), the context counted as fed. In a run whose Turns shares
    passes (marginal_core.batching), paths of at most one pass's worth of tokens (the device's
    pass_tokens, so that a pass's leader hears Stop as soon as a run alone) go in one trie with
    other runs' paths after the same context.
    """
    stats = stats if stats is not None else ScoreStats()
    started = time.perf_counter()
    lm, path_list = LM.of(lm), as_paths(paths)
    if not path_list:
        return np.zeros(0, dtype=np.float64)
    max_batch_tokens = pass_tokens(lm, max_batch_tokens)
    ctx = check_paths(lm, path_list, context)
    lm.require_tree_masks()
    state = context_state(lm, context, stats, max_batch_tokens)
    budgets = (max_batch_tokens, row_tokens, pass_bytes(lm, max_batch_bytes))
    size, limit, batcher = sum(map(len, path_list)), pass_tokens(lm), current_batcher()
    if batcher is not None and size <= limit:
        log_p, share = batcher.submit((lm, state.ids, budgets), (path_list, state), size, limit,
                                      partial(_score_together, lm, budgets))
        stats.add(share)
        if progress:
            progress(len(state) + size, len(state) + size)
    else:
        log_p = _score_trie(lm, path_list, state, budgets, stats, progress)
    count_call(stats, path_list, ctx, started)
    return log_p


def _score_trie(lm: LM, paths: list[Path], state: ContextState, budgets: tuple[int, int, int],
                stats: ScoreStats, progress: Progress | None) -> np.ndarray:
    """The paths' log-probabilities after the state, from one run of their prefix trie."""
    trie = build_trie(paths)
    run = TrieRun(lm, trie, state, *budgets, stats, progress)
    with torch.inference_mode():
        run.run_trie()
        run.finish()
    return path_sums(trie, run.node_lp.cpu().numpy())


def _score_together(lm: LM, budgets: tuple[int, int, int],
                    requests: list[tuple[list[Path], ContextState]]) -> list[tuple[np.ndarray, ScoreStats]]:
    """Several runs' paths after one context in one trie: each request's log-probabilities and
    its share of the work (by path tokens)."""
    joint = ScoreStats()
    paths = [path for group, _ in requests for path in group]
    log_p = _score_trie(lm, paths, requests[0][1], budgets, joint, None)
    total, out, start = max(sum(map(len, paths)), 1), [], 0
    for group, _ in requests:
        out.append((log_p[start : start + len(group)], joint.share(sum(map(len, group)) / total)))
        start += len(group)
    return out

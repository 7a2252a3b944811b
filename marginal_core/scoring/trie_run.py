"""One run of a prefix trie through the decoder (``marginal_core.scoring.trie_scoring``'s passes): rows that
carry their ancestors' KV states from pass to pass under tree attention masks, and the LM head
on their hidden states, pooled across passes into chunks of rows (docs/design.md, "Where the
time goes"). The trie and the plan of each pass come from ``marginal_core.scoring.trie`` (numpy).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from transformers import DynamicCache

from marginal_core.ground import hooks as serving_hooks
from marginal_core.ground.progress import Progress
from marginal_core.lm.adapter import LM
from marginal_core.lm.contexts import ContextState
from marginal_core.lm.oom import halved
from marginal_core.scoring.pass_budget import pass_pairs
from marginal_core.scoring.score_stats import ScoreStats
from marginal_core.scoring.trie import Pass, Shape, TreeLayout, Trie, cut, plan_pass, plan_shape, sees, tree_allowed, tree_layout

Head = Callable[[torch.Tensor, list[tuple[int, int]], int], None]
"""What a run does with its hidden states: called with hidden, which holds the rows [first,
first + count) of each (first, count) block in turn (row 0 is the context's last token, 1 + i
the trie's ``fed[i]``), and the most rows the LM head may take at a time."""


@dataclass(frozen=True)
class _Children:
    """The trie's nodes sorted by the hidden-state row that predicts their token (numpy: a chunk's
    indices are cut and offset here and reach the device in one copy each, not a kernel per block)."""

    order: np.ndarray
    rows: np.ndarray
    tokens: np.ndarray
    bounds: np.ndarray

    @classmethod
    def of(cls, trie: Trie) -> _Children:
        order = np.argsort(trie.parent_row, kind="stable")
        rows = trie.parent_row[order]
        return cls(order, rows, trie.token[order], np.searchsorted(rows, np.arange(len(trie.fed) + 2)))

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
        sel, local, offset = [], [], 0
        for first, count in blocks:
            lo, hi = self.bounds[first], self.bounds[first + count]
            sel.append(np.arange(lo, hi))
            local.append(self.rows[lo:hi] - first + offset)
            offset += count
        at = np.concatenate(sel)
        node, row, token = (torch.from_numpy(a).to(lm.device) for a in (self.order[at], np.concatenate(local),
                                                                         self.tokens[at]))
        out[node] = lm.token_logprobs(hidden, row, token, max_rows, scratch)


@dataclass
class _Row:
    """One batch row's piece: fed indices [start, stop), and the ancestors it carries.

    ``chain`` holds the ancestors of ``fed[start]`` whose KV states the row carries: row ``slot``
    of the run's ``Carried`` states, root side first.
    """

    start: int
    stop: int
    chain: frozenset[int] = frozenset()
    slot: int = 0


@dataclass(frozen=True)
class Carried:
    """The KV states rows carry from one pass to the next, gathered in one kernel per layer:
    keys and values [pass rows, kv_heads, longest chain, head_dim] per layer (a shorter chain's
    columns past its end are padding, which no query sees)."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]


def _additive(lm: LM, allowed: np.ndarray) -> torch.Tensor:
    """A boolean [rows, queries, keys] mask as the decoder's additive [rows, 1, queries, keys]
    one: 0 where allowed, the dtype's minimum elsewhere."""
    blocked = torch.from_numpy(~allowed)[:, None]
    dtype = lm.activation_dtype
    mask = torch.zeros(blocked.shape, dtype=dtype).masked_fill_(blocked, torch.finfo(dtype).min)
    return mask.to(lm.device)


def _block_masks(lm: LM, layout: TreeLayout) -> dict[str, Any]:
    """The tree rule as FlexAttention ``BlockMask``s, one per attention type: the mask function
    reads the layout's columns on the device, so no [rows, queries, keys] tensor is kept."""
    from torch.nn.attention.flex_attention import create_block_mask

    qn, qp, kn, kl, kp = (torch.from_numpy(a).to(lm.device) for a in (layout.query_node, layout.query_pos,
                                                                         layout.key_node, layout.key_last,
                                                                         layout.key_pos))
    rows, (queries, keys) = len(qn), (qn.shape[1], kn.shape[1])

    def rule(window: int | None) -> Any:
        """The mask_mod: FlexAttention calls it with index tensors (batch, head, query, key)."""
        return lambda b, h, q, k: sees(qn[b, q], qp[b, q], kn[b, k], kl[b, k], kp[b, k], window)

    full = create_block_mask(rule(None), rows, None, queries, keys, device=lm.device)
    return {"full_attention": full,
            "sliding_attention": full if lm.window is None else create_block_mask(
                rule(lm.window), rows, None, queries, keys, device=lm.device)}


def _mask_argument(lm: LM, masks: dict[str, Any]) -> Any:
    """What the decoder takes: a mask per layer type where it has several, else one mask."""
    if lm.layer_types is not None:
        return {kind: masks[kind] for kind in lm.layer_types}
    return masks["sliding_attention" if lm.window is not None else "full_attention"]


def _with_carried(ctx_part: torch.Tensor, carried: torch.Tensor | None, slots: torch.Tensor,
                  width: int) -> torch.Tensor:
    """[rows, kv_heads, context + width, head_dim]: the context's states, then each row's carried
    ones (row slots[r] of carried; a row that carries none gets padding)."""
    batch, heads, ctx_len, dim = len(slots), *ctx_part.shape[1:]
    context = ctx_part.expand(batch, heads, ctx_len, dim)
    if carried is None or width == 0:
        return context  # a view: the cache's update concatenates the pass's own states to it
    return torch.cat([context, carried.index_select(0, slots)[:, :, :width]], dim=2)


def _states(cache: DynamicCache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each layer's keys and values (a cache built from tuples has plain layers, never None)."""
    return [(layer.keys, layer.values) for layer in cache.layers]  # type: ignore[union-attr, misc]


def _past(ctx: DynamicCache, rows: list[_Row], carried: Carried | None, width: int) -> DynamicCache:
    """A cache holding, per row, the context's KV states and then the row's carried ones."""
    states = _states(ctx)
    slots = torch.tensor([row.slot if row.chain else 0 for row in rows], dtype=torch.long, device=states[0][0].device)
    return DynamicCache(
        (
            _with_carried(keys, carried.keys[i] if carried else None, slots, width),
            _with_carried(values, carried.values[i] if carried else None, slots, width),
        )
        for i, (keys, values) in enumerate(states)
    )


def _run_pass(
    lm: LM, trie: Trie, rows: list[_Row], plan: Pass, ctx: DynamicCache, carried: Carried | None
) -> tuple[torch.Tensor, DynamicCache]:
    """One forward pass of the planned rows: hidden states [rows, queries, hidden] and the cache."""
    width_c, width_q = plan.widths
    ids = torch.zeros(len(rows), width_q, dtype=torch.long)
    pos = torch.full((len(rows), width_q), plan.ctx_len, dtype=torch.long)
    for r, queries in enumerate(plan.queries):
        ids[r, : len(queries)] = torch.from_numpy(trie.token[queries])
        pos[r, : len(queries)] = torch.from_numpy(plan.ctx_len - 1 + trie.depth[queries])
    cache = _past(ctx, rows, carried, width_c)
    if lm.tree_kernel == "flex":
        masks = _block_masks(lm, tree_layout(trie, plan))
    else:
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


def run_carried(lm: LM, trie: Trie, context: ContextState, carried: list[list[int]], queries: list[list[int]],
                states: Carried | None) -> tuple[torch.Tensor, DynamicCache, Pass]:
    """One pass whose row r carries the KV states of the trie nodes ``carried[r]`` (kept from
    earlier runs: ``states``, row r's at slot r, padded to the widest row) and feeds the nodes
    ``queries[r]``, each of which sees the context, its ancestors among them, and itself: the
    trie's own layout and masks. Returns the hidden states [rows, queries, hidden], the cache
    (the queries' states in the columns after the context and the widest row's carried) and the plan."""
    plan = Pass(carried, queries, [len(q) for q in queries], len(context))
    rows = [_Row(0, 0, frozenset(c), r) for r, c in enumerate(carried)]
    hidden, cache = _run_pass(lm, trie, rows, plan, context.cache, states)
    return hidden, cache, plan


def pass_states(cache: DynamicCache, rows: np.ndarray, columns: np.ndarray) -> Carried:
    """The keys and values of a pass's (row, key column) pairs, per layer [pairs, kv_heads, head_dim]."""
    states = _states(cache)
    r, c = (torch.as_tensor(a, device=states[0][0].device) for a in (rows, columns))
    return Carried([keys[r, :, c] for keys, _ in states], [values[r, :, c] for _, values in states])


def _advance(trie: Trie, rows: list[_Row], plan: Pass, cache: DynamicCache) -> Carried | None:
    """Move each row past its segment; gather, for all rows at once, the KV states of the
    ancestors its next segment needs (row r's at slot r)."""
    chains = []
    for r, row in enumerate(rows):
        row.start += plan.owned[r]
        chain = trie.ancestors(int(trie.fed[row.start])) if row.start < row.stop else []
        row.chain, row.slot = frozenset(chain), r
        col = plan.columns(r) if chain else {}
        chains.append([col[n] for n in chain])
    width = max(map(len, chains))
    if width == 0:
        return None
    index = np.zeros((len(rows), width), dtype=np.int64)
    for r, cols in enumerate(chains):
        index[r, : len(cols)] = cols
    states = _states(cache)
    first = states[0][0]
    at = torch.from_numpy(index).to(first.device)[:, None, :, None].expand(-1, first.shape[1], -1, first.shape[3])
    return Carried([keys.gather(2, at) for keys, _ in states], [values.gather(2, at) for _, values in states])


@dataclass
class TrieRun:
    """One run of a trie: the budgets, and what the head makes of the hidden states (by default,
    as score_paths wants, the log-prob of every node's token in ``node_lp``).

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
    head: Head | None = None
    keep: Callable[[Pass, DynamicCache], None] | None = None  # hears every pass's plan and cache (KV kept by a caller)

    def __post_init__(self) -> None:
        self.node_lp = torch.zeros(len(self.trie.token), dtype=self.lm.logit_dtype, device=self.lm.device)
        self.apply_head: Head = self.head or self._node_logprobs(_Children.of(self.trie))
        self.total, self.done = len(self.context) + len(self.trie.fed), len(self.context)
        # the paths' first tokens come from the context's last hidden state (row 0)
        self.pending: list[tuple[torch.Tensor, list[tuple[int, int]]]] = [(self.context.last_hidden, [(0, 1)])]
        self.scratch: dict[str, torch.Tensor] = {}

    def _node_logprobs(self, children: _Children) -> Head:
        """The default head: each node's token log-prob, from its parent's hidden state."""
        return lambda hidden, blocks, max_rows: children.score(self.lm, hidden, blocks, max_rows, self.node_lp,
                                                               self.scratch)

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
        self.apply_head(hidden, blocks, self.budget)
        self.stats.head_rows += len(hidden)
        self.pending = []

    def finish(self) -> None:
        """Score whatever hidden states are still pending."""
        while self.pending:
            try:
                with serving_hooks.unit():
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
        carried: Carried | None = None
        while queue or active:
            if not active:
                shape, queue = self._plan(queue)
                passes_left = shape.passes
            while len(active) < shape.rows and queue:
                active.append(_Row(*queue.pop(0)))
            plan = plan_pass(self.trie, active, passes_left, shape.per_row, len(self.context))
            try:
                with serving_hooks.unit():
                    hidden, cache = _run_pass(self.lm, self.trie, active, plan, self.context.cache, carried)
                    if self.keep is not None:
                        self.keep(plan, cache)
                    owned = [h[len(q) - k : len(q)] for h, q, k in zip(hidden, plan.queries, plan.owned)]
                    blocks = [(1 + row.start, k) for row, k in zip(active, plan.owned)]
                    self.pending.append((torch.cat(owned), blocks))
                    self._flush(self.lm.head_rows(self.budget))
            except (RuntimeError, MemoryError) as err:
                self._halve(err)
                queue = [(row.start, row.stop) for row in active] + queue
                active, carried = [], None
                continue
            self._counted(sum(map(len, plan.queries)), len(active) * plan.widths[1], sum(plan.owned))
            carried = _advance(self.trie, active, plan, cache)
            del hidden, cache  # the pass's states: a run that waits for its next turn holds only what it carries
            active = [row for row in active if row.start < row.stop]
            passes_left -= 1

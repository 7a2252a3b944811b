"""Log-probabilities of tokenizations under a causal LM (DESIGN.md point 8, "Where the time goes").

``score_paths`` runs the context once and keeps its KV cache. The tokenizations form a prefix
trie whose nodes are numbered in depth-first order. A token's log-probability comes from its
parent's hidden state, so only internal nodes (those with a child) go through the model, each
once. They are cut into a few contiguous pieces, one per batch row; a row feeds its piece over
several passes, a segment at a time, after the KV states of the context and of the segment's
ancestors outside it, under a tree attention mask: each node sees the context, its ancestors and
itself, at the position its depth gives (as speculative decoding verifies token trees). In
depth-first order the outside ancestors of a segment are exactly those of its first node, so a
row carries their KV states from one pass to the next; only the first segment of a piece feeds
its ancestors once more, and pieces are cut at shallow nodes to keep that small.

The LM head and the log-softmax run on the hidden states in chunks of rows (pooled across passes,
since each chunk reads the whole output layer), in fp32, reading only the needed tokens: no
[batch, length, vocab] tensor is built (Gemma 3 has 262,144 outputs).
``score_paths_plain`` is the reference: padded batches of context + path, no reuse, no sharing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch
from transformers import DynamicCache

from marginal_core.errors import MarginalError
from marginal_core.lattice import Path, PathBatch

if TYPE_CHECKING:
    from marginal_core.models import LoadedModel

DEFAULT_MAX_BATCH_TOKENS = 1024
DEFAULT_ROW_TOKENS = 256
DEFAULT_MAX_BATCH_BYTES = 1 << 30
LOGIT_CHUNK_BYTES = 1 << 28
MASKABLE_LAYERS = {"full_attention", "sliding_attention"}

Progress = Callable[[int, int], None]


class ScoringMemoryError(MarginalError):
    """Even one token at a time does not fit in memory."""


@dataclass
class ScoreStats:
    """Work done by scoring calls, summed over every call that is given this object.

    plain_tokens is what plain scoring feeds for the same paths (context + path each, without
    padding); tokens_fed counts what was fed here (padding excluded, padded_tokens includes it).
    """

    paths: int = 0
    scored_tokens: int = 0
    plain_tokens: int = 0
    tokens_fed: int = 0
    padded_tokens: int = 0
    forward_passes: int = 0
    oom_retries: int = 0
    seconds: float = 0.0

    @property
    def saved_share(self) -> float:
        """Share of plain scoring's tokens that context reuse and prefix sharing did not feed."""
        return 1 - self.tokens_fed / self.plain_tokens if self.plain_tokens else 0.0

    @property
    def tokens_per_second(self) -> float:
        """Path tokens scored per wall-clock second."""
        return self.scored_tokens / self.seconds if self.seconds else 0.0


# ---------------------------------------------------------------- the model


@dataclass(frozen=True)
class _Net:
    """The parts of a causal LM that scoring drives directly, and its sizes."""

    decoder: torch.nn.Module
    head: torch.nn.Module
    softcap: float | None
    window: int | None
    layer_types: tuple[str, ...] | None
    vocab: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    device: torch.device
    dtype: torch.dtype
    # One call's reusable logits block (see head_logits); the dataclass is made per call.
    scratch: dict[str, torch.Tensor] = field(default_factory=dict, compare=False, repr=False)

    @property
    def logit_dtype(self) -> torch.dtype:
        """The log-softmax's dtype: fp32, or the model's own if wider."""
        return torch.promote_types(self.dtype, torch.float32)

    def head_rows(self, max_rows: int) -> int:
        """Hidden states the LM head takes at a time: max_rows, within LOGIT_CHUNK_BYTES."""
        return max(1, min(max_rows, LOGIT_CHUNK_BYTES // (self.logit_dtype.itemsize * self.vocab)))

    def head_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """head(hidden) in logit_dtype. A bias-free linear head in that dtype writes into one
        reused block: a fresh 256 MB tensor per chunk costs about a quarter of the head's time
        in page faults on a CPU."""
        head = self.head
        if not (isinstance(head, torch.nn.Linear) and head.bias is None and self.dtype == self.logit_dtype):
            return head(hidden).to(self.logit_dtype)
        block = self.scratch.get("logits")
        if block is None or len(block) < len(hidden):
            block = self.scratch["logits"] = hidden.new_empty(len(hidden), self.vocab)
        return torch.matmul(hidden, head.weight.T, out=block[: len(hidden)])

    def activation_bytes(self, rows: int, queries: int, keys: int) -> int:
        """Rough peak memory of one forward pass: KV cache, attention scores, MLP, masks."""
        item = torch.finfo(self.dtype).bits // 8
        cache = 2 * self.layers * rows * self.kv_heads * keys * self.head_dim * item
        scores = 2 * rows * self.heads * queries * keys * 4
        mlp = 3 * rows * queries * self.intermediate * item
        masks = 2 * rows * queries * keys * item
        return cache + scores + mlp + masks


def _net(lm: LoadedModel) -> _Net:
    """Read what scoring needs from a loaded model; refuse attention it cannot mask."""
    model = lm.model
    cfg = model.config.get_text_config()
    if cfg._attn_implementation not in ("eager", "sdpa"):
        raise MarginalError(
            f"scoring passes tree attention masks, which {cfg._attn_implementation!r} attention "
            "does not take; load the model with attn_implementation='sdpa'"
        )
    layer_types = getattr(cfg, "layer_types", None)
    if layer_types is not None and not set(layer_types) <= MASKABLE_LAYERS:
        raise MarginalError(f"scoring cannot mask attention layers of types {sorted(set(layer_types))}")
    heads, head = cfg.num_attention_heads, model.get_output_embeddings()
    param = next(model.parameters())
    return _Net(
        decoder=model.get_decoder(),
        head=head,
        softcap=getattr(cfg, "final_logit_softcapping", None),
        window=getattr(cfg, "sliding_window", None),
        layer_types=tuple(sorted(set(layer_types))) if layer_types is not None else None,
        vocab=head.weight.shape[0],
        layers=cfg.num_hidden_layers,
        heads=heads,
        kv_heads=getattr(cfg, "num_key_value_heads", None) or heads,
        head_dim=getattr(cfg, "head_dim", None) or cfg.hidden_size // heads,
        intermediate=getattr(cfg, "intermediate_size", None) or 4 * cfg.hidden_size,
        device=param.device,
        dtype=param.dtype,
    )


def _is_oom(err: BaseException) -> bool:
    """Whether an exception is an allocation failure (CUDA or CPU)."""
    if isinstance(err, (torch.OutOfMemoryError, MemoryError)):
        return True
    text = str(err).lower()
    return isinstance(err, RuntimeError) and ("out of memory" in text or "can't allocate" in text)


def _halved(budget: int, err: BaseException, stats: ScoreStats) -> int:
    """The token budget after an allocation failure; re-raise anything else."""
    if not _is_oom(err):
        raise err
    if budget <= 1:
        raise ScoringMemoryError("out of memory scoring even one token at a time") from err
    stats.oom_retries += 1
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return budget // 2


def _token_logprobs(
    net: _Net, hidden: torch.Tensor, rows: torch.Tensor, tokens: torch.Tensor, max_rows: int
) -> torch.Tensor:
    """log-softmax(head(hidden[row]))[token] for (row, token) pairs sorted by row.

    In fp32 at least (fp64 for an fp64 model). The head runs on at most max_rows hidden states
    at a time, within LOGIT_CHUNK_BYTES of logits; each row's logsumexp, computed in place,
    serves all of its pairs.
    """
    out = torch.empty(len(rows), dtype=net.logit_dtype, device=hidden.device)
    step = net.head_rows(max_rows)
    starts = torch.arange(0, len(hidden) + step, step, device=rows.device)
    bounds = torch.searchsorted(rows, starts).tolist()
    for i, first in enumerate(range(0, len(hidden), step)):
        lo, hi = bounds[i], bounds[i + 1]
        if lo == hi:
            continue
        logits = net.head_logits(hidden[first : first + step])
        if net.softcap:
            logits.div_(net.softcap).tanh_().mul_(net.softcap)
        local = rows[lo:hi] - first
        picked = logits[local, tokens[lo:hi]]
        top = logits.amax(dim=-1, keepdim=True)
        lse = top.squeeze(-1) + logits.sub_(top).exp_().sum(dim=-1).log()
        out[lo:hi] = picked - lse[local]
    return out


def _as_paths(paths: PathBatch | Sequence[Path]) -> list[Path]:
    """Paths as tuples of ints, whatever container they came in."""
    return paths.tolist() if isinstance(paths, PathBatch) else [tuple(map(int, p)) for p in paths]


def _check_ids(net: _Net, paths: list[Path], context: list[int]) -> None:
    """Refuse an empty context and token ids outside the model's vocabulary."""
    if not context:
        raise ValueError("the context is empty: condition on at least a BOS token (see context_ids)")
    ids = [*context, *(t for p in paths for t in p)]
    if min(ids) < 0 or max(ids) >= net.vocab:
        raise ValueError(f"token ids must lie in [0, {net.vocab}), the model's vocabulary")


def _count_call(stats: ScoreStats, paths: list[Path], context: list[int], started: float) -> None:
    """Add one call's paths, path tokens, plain-equivalent tokens and wall time to stats."""
    lengths = sum(map(len, paths))
    stats.paths += len(paths)
    stats.scored_tokens += lengths
    stats.plain_tokens += lengths + len(context) * len(paths)
    stats.seconds += time.perf_counter() - started


# ---------------------------------------------------------------- the prefix trie


@dataclass(frozen=True, eq=False)
class _Trie:
    """The distinct prefixes of some paths; node ids are in depth-first (preorder) order.

    ``fed`` lists the nodes with a child, the only ones the model must see. The hidden state that
    predicts node n's token is row ``parent_row[n]``: 0 for the context's last token, 1 + i for
    ``fed[i]``. ``end[i]`` is path i's last node (-1 for an empty path).
    """

    token: np.ndarray
    parent: np.ndarray
    depth: np.ndarray
    end: np.ndarray
    fed: np.ndarray
    parent_row: np.ndarray

    def ancestors(self, node: int) -> list[int]:
        """The proper ancestors of a node, root side first."""
        chain = []
        node = int(self.parent[node])
        while node >= 0:
            chain.append(node)
            node = int(self.parent[node])
        return chain[::-1]


def _build_trie(paths: list[Path]) -> _Trie:
    """The prefix trie of the paths; inserting them in sorted order numbers nodes in preorder."""
    token: list[int] = []
    parent: list[int] = []
    end = np.full(len(paths), -1, dtype=np.int64)
    prev: Path = ()
    stack: list[int] = []
    for i in sorted(range(len(paths)), key=paths.__getitem__):
        path = paths[i]
        shared = next((j for j, (a, b) in enumerate(zip(path, prev)) if a != b), min(len(path), len(prev)))
        del stack[shared:]
        for t in path[shared:]:
            parent.append(stack[-1] if stack else -1)
            stack.append(len(token))
            token.append(t)
        end[i] = stack[-1] if stack else -1
        prev = path
    parents = np.array(parent, dtype=np.int64)
    depth = np.ones(len(token), dtype=np.int64)
    for n, p in enumerate(parent):
        if p >= 0:
            depth[n] = depth[p] + 1
    has_child = np.zeros(len(token), dtype=bool)
    has_child[parents[parents >= 0]] = True
    fed = np.flatnonzero(has_child)
    row_of = np.zeros(len(token), dtype=np.int64)
    row_of[fed] = np.arange(1, len(fed) + 1)
    parent_row = np.where(parents >= 0, row_of[np.maximum(parents, 0)], 0)
    return _Trie(np.array(token, dtype=np.int64), parents, depth, end, fed, parent_row)


def _path_sums(trie: _Trie, node_lp: np.ndarray) -> np.ndarray:
    """Each path's summed log-probability, accumulated root to leaf in float64."""
    cum = node_lp.astype(np.float64)
    for d in range(2, int(trie.depth.max(initial=0)) + 1):
        at = np.flatnonzero(trie.depth == d)
        cum[at] += cum[trie.parent[at]]
    total = np.zeros(len(trie.end), dtype=np.float64)
    total[trie.end >= 0] = cum[trie.end[trie.end >= 0]]
    return total


@dataclass(frozen=True)
class _Children:
    """The trie's nodes sorted by the hidden-state row that predicts their token."""

    order: torch.Tensor
    rows: torch.Tensor
    tokens: torch.Tensor
    bounds: list[int]

    @classmethod
    def of(cls, trie: _Trie, device: torch.device) -> _Children:
        order = np.argsort(trie.parent_row, kind="stable")
        rows = trie.parent_row[order]
        bounds = np.searchsorted(rows, np.arange(len(trie.fed) + 2)).tolist()
        return cls(*(torch.from_numpy(a).to(device) for a in (order, rows, trie.token[order])), bounds)

    def score(
        self, net: _Net, hidden: torch.Tensor, blocks: list[tuple[int, int]], max_rows: int, out: torch.Tensor
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
        out[torch.cat(sel)] = _token_logprobs(net, hidden, torch.cat(local), torch.cat(tokens), max_rows)


# ---------------------------------------------------------------- passes over the trie


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


@dataclass(frozen=True)
class _Pass:
    """One forward pass: per row, the ancestors whose KV states it carries, and what it feeds.

    The key columns of row r are the context, then ``carried[r]`` padded to the widest row,
    then ``queries[r]`` padded likewise; the last ``owned[r]`` queries are the row's segment.
    """

    carried: list[list[int]]
    queries: list[list[int]]
    owned: list[int]
    ctx_len: int

    @property
    def widths(self) -> tuple[int, int]:
        """(padded carried length, padded query length)."""
        return max(map(len, self.carried)), max(map(len, self.queries))

    def columns(self, r: int) -> dict[int, int]:
        """Trie node -> key column, for row r."""
        col = {n: self.ctx_len + i for i, n in enumerate(self.carried[r])}
        first_query = self.ctx_len + self.widths[0]
        col.update({n: first_query + i for i, n in enumerate(self.queries[r])})
        return col


def _plan_pass(trie: _Trie, rows: list[_Row], passes_left: int, row_tokens: int, ctx_len: int) -> _Pass:
    """Each row's next segment (its share of what is left, or row_tokens after the planned
    passes), after any ancestors whose KV states it does not hold."""
    carried, queries, owned = [], [], []
    for row in rows:
        left = row.stop - row.start
        count = -(-left // passes_left) if passes_left > 0 else min(left, row_tokens)
        ancestors = trie.ancestors(int(trie.fed[row.start]))
        carried.append([a for a in ancestors if a in row.chain])
        missing = [a for a in ancestors if a not in row.chain]
        queries.append(missing + trie.fed[row.start : row.start + count].tolist())
        owned.append(count)
    return _Pass(carried, queries, owned, ctx_len)


def _tree_masks(net: _Net, trie: _Trie, plan: _Pass) -> dict[str, torch.Tensor]:
    """Additive masks [rows, 1, queries, keys] (0 or the dtype's minimum) per attention type.

    A query sees the context, its ancestors and itself; sliding-window layers also hide keys
    ``window`` or more positions back. Padding queries see the context only.
    """
    ctx_len, (width_c, width_q) = plan.ctx_len, plan.widths
    n_rows, n_keys = len(plan.queries), ctx_len + width_c + width_q
    allowed = np.zeros((n_rows, width_q, n_keys), dtype=bool)
    allowed[:, :, :ctx_len] = True
    key_pos = np.full((n_rows, n_keys), -(1 << 40), dtype=np.int64)
    key_pos[:, :ctx_len] = np.arange(ctx_len)
    query_pos = np.full((n_rows, width_q), ctx_len, dtype=np.int64)
    for r, queries in enumerate(plan.queries):
        col = plan.columns(r)
        key_pos[r, list(col.values())] = ctx_len - 1 + trie.depth[list(col)]
        query_pos[r, : len(queries)] = ctx_len - 1 + trie.depth[queries]
        for i, node in enumerate(queries):
            while node >= 0:
                allowed[r, i, col[node]] = True
                node = int(trie.parent[node])
    masks = {"full_attention": allowed, "sliding_attention": allowed}
    if net.window is not None:
        masks["sliding_attention"] = allowed & (query_pos[:, :, None] - key_pos[:, None, :] < net.window)
    return {kind: _additive(net, m) for kind, m in masks.items()}


def _additive(net: _Net, allowed: np.ndarray) -> torch.Tensor:
    """A boolean [rows, queries, keys] mask as the decoder's additive [rows, 1, queries, keys]
    one: 0 where allowed, the dtype's minimum elsewhere."""
    blocked = torch.from_numpy(~allowed)[:, None]
    mask = torch.zeros(blocked.shape, dtype=net.dtype).masked_fill_(blocked, torch.finfo(net.dtype).min)
    return mask.to(net.device)


def _mask_argument(net: _Net, masks: dict[str, torch.Tensor]) -> torch.Tensor | dict[str, torch.Tensor]:
    """What the decoder takes: a mask per layer type where it has several, else one mask."""
    if net.layer_types is not None:
        return {kind: masks[kind] for kind in net.layer_types}
    return masks["sliding_attention" if net.window is not None else "full_attention"]


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
    net: _Net, trie: _Trie, rows: list[_Row], plan: _Pass, ctx: DynamicCache
) -> tuple[torch.Tensor, DynamicCache]:
    """One forward pass of the planned rows: hidden states [rows, queries, hidden] and the cache."""
    width_c, width_q = plan.widths
    ids = torch.zeros(len(rows), width_q, dtype=torch.long)
    pos = torch.full((len(rows), width_q), plan.ctx_len, dtype=torch.long)
    for r, queries in enumerate(plan.queries):
        ids[r, : len(queries)] = torch.from_numpy(trie.token[queries])
        pos[r, : len(queries)] = torch.from_numpy(plan.ctx_len - 1 + trie.depth[queries])
    cache = _past(ctx, rows, width_c)
    out = net.decoder(
        input_ids=ids.to(net.device),
        attention_mask=_mask_argument(net, _tree_masks(net, trie, plan)),
        position_ids=pos.to(net.device),
        past_key_values=cache,
        use_cache=True,
    )
    return out.last_hidden_state, cache


def _advance(trie: _Trie, rows: list[_Row], plan: _Pass, cache: DynamicCache) -> None:
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


@dataclass(frozen=True)
class _Shape:
    """How to feed some trie nodes: rows per pass, nodes per row per pass, and passes."""

    rows: int
    per_row: int
    passes: int


def _shape(net: _Net, size: int, budget: int, row_tokens: int, extra_keys: int, max_bytes: int) -> _Shape:
    """The shape for size nodes under a token budget and the memory estimate, evened out so
    that rows are about equally long and no pass is padded much."""
    while True:
        per_row = max(1, min(row_tokens, budget))
        rows = max(1, budget // per_row)
        if budget <= 1 or net.activation_bytes(rows, per_row, extra_keys + per_row) <= max_bytes:
            break
        budget //= 2
    passes = -(-size // (rows * per_row))
    per_row = -(-size // (rows * passes))
    return _Shape(-(-size // (per_row * passes)), per_row, passes)


def _cut(trie: _Trie, spans: list[tuple[int, int]], piece: int, slack: int) -> list[tuple[int, int]]:
    """Cut spans of fed indices into pieces of about piece nodes, each cut moved (by at most
    slack) to the shallowest node nearby, whose ancestors a row must feed again."""
    pieces = []
    for start, stop in spans:
        count, prev = -(-(stop - start) // piece), start
        for j in range(1, count):
            ideal = start + round(j * (stop - start) / count)
            lo, hi = max(ideal - slack, prev + 1), min(ideal + slack + 1, stop)
            cut = lo + int(np.argmin(trie.depth[trie.fed[lo:hi]]))
            pieces.append((prev, cut))
            prev = cut
        pieces.append((prev, stop))
    return pieces


@dataclass
class _TrieRun:
    """One call of score_paths: the trie, the budgets, and the log-prob of every node.

    Hidden states wait in ``pending`` until they fill a chunk of the LM head, which for Gemma
    costs a pass over 168M weights however few rows it gets.
    """

    net: _Net
    trie: _Trie
    context: list[int]
    budget: int
    row_tokens: int
    max_bytes: int
    stats: ScoreStats
    progress: Progress | None

    def __post_init__(self) -> None:
        self.children = _Children.of(self.trie, self.net.device)
        self.node_lp = torch.zeros(len(self.trie.token), dtype=self.net.logit_dtype, device=self.net.device)
        self.total, self.done = len(self.context) + len(self.trie.fed), 0
        self.pending: list[tuple[torch.Tensor, list[tuple[int, int]]]] = []

    def _flush(self, min_rows: int) -> None:
        """Score the pending hidden states if there are at least min_rows of them."""
        if sum(len(hidden) for hidden, _ in self.pending) < max(min_rows, 1):
            return
        hidden = torch.cat([hidden for hidden, _ in self.pending])
        blocks = [block for _, group in self.pending for block in group]
        self.children.score(self.net, hidden, blocks, self.budget, self.node_lp)
        self.pending = []

    def finish(self) -> None:
        """Score whatever hidden states are still pending."""
        while self.pending:
            try:
                self._flush(1)
            except (RuntimeError, MemoryError) as err:
                self.budget = _halved(self.budget, err, self.stats)

    def _counted(self, fed: int, padded: int, done: int, passes: int = 1) -> None:
        """Record forward passes and report progress."""
        self.stats.forward_passes += passes
        self.stats.tokens_fed += fed
        self.stats.padded_tokens += padded
        self.done += done
        if self.progress:
            self.progress(self.done, self.total)

    def run_context(self) -> DynamicCache:
        """Feed the context once (in chunks of the budget, into one cache that keeps every layer
        whole); score the paths' first tokens from its last hidden state."""
        ids = torch.tensor([self.context], device=self.net.device)
        while True:
            try:
                cache = DynamicCache()
                for start in range(0, len(self.context), self.budget):
                    chunk = ids[:, start : start + self.budget]
                    out = self.net.decoder(input_ids=chunk, past_key_values=cache, use_cache=True)
                break
            except (RuntimeError, MemoryError) as err:
                self.budget = _halved(self.budget, err, self.stats)
        size = len(self.context)
        self._counted(size, size, size, passes=-(-size // self.budget))
        self.pending.append((out.last_hidden_state[0, -1:], [(0, 1)]))
        return cache

    def _plan(self, spans: list[tuple[int, int]]) -> tuple[_Shape, list[tuple[int, int]]]:
        """The shape for the nodes in spans, and the spans cut into pieces for its rows."""
        size = sum(b - a for a, b in spans)
        extra_keys = len(self.context) + int(self.trie.depth.max(initial=0))
        shape = _shape(self.net, size, self.budget, self.row_tokens, extra_keys, self.max_bytes)
        return shape, _cut(self.trie, spans, shape.per_row * shape.passes, shape.per_row // 16)

    def run_trie(self, ctx: DynamicCache) -> None:
        """Feed every internal node once, in passes of rows that carry their ancestors' KV."""
        queue = [(0, len(self.trie.fed))] if len(self.trie.fed) else []
        active: list[_Row] = []
        while queue or active:
            if not active:
                shape, queue = self._plan(queue)
                passes_left = shape.passes
            while len(active) < shape.rows and queue:
                active.append(_Row(*queue.pop(0)))
            plan = _plan_pass(self.trie, active, passes_left, shape.per_row, len(self.context))
            try:
                hidden, cache = _run_pass(self.net, self.trie, active, plan, ctx)
                owned = [h[len(q) - k : len(q)] for h, q, k in zip(hidden, plan.queries, plan.owned)]
                blocks = [(1 + row.start, k) for row, k in zip(active, plan.owned)]
                self.pending.append((torch.cat(owned), blocks))
                self._flush(self.net.head_rows(self.budget))
            except (RuntimeError, MemoryError) as err:
                self.budget = _halved(self.budget, err, self.stats)
                queue = [(row.start, row.stop) for row in active] + queue
                active = []
                continue
            self._counted(sum(map(len, plan.queries)), len(active) * plan.widths[1], sum(plan.owned))
            _advance(self.trie, active, plan, cache)
            active = [row for row in active if row.start < row.stop]
            passes_left -= 1


def distinct_prefixes(paths: PathBatch | Sequence[Path]) -> int:
    """How many path tokens score_paths feeds to the model for these paths (without the model):
    the distinct prefixes that some path extends. Pieces cut mid-trie may feed a few again."""
    return len(_build_trie(_as_paths(paths)).fed)


def score_paths(
    lm: LoadedModel,
    paths: PathBatch | Sequence[Path],
    context: Sequence[int],
    *,
    max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
    row_tokens: int = DEFAULT_ROW_TOKENS,
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
    progress: Progress | None = None,
    stats: ScoreStats | None = None,
) -> np.ndarray:
    """log p(path | context) of every path (float64), each distinct prefix computed once.

    The context runs once; the paths' prefix trie runs in passes of about max_batch_tokens
    tokens in rows of up to row_tokens, shrunk to fit max_batch_bytes of estimated activations
    and halved on out-of-memory errors. progress gets (tokens fed, tokens to feed).
    """
    stats = stats if stats is not None else ScoreStats()
    started = time.perf_counter()
    net, path_list, ctx = _net(lm), _as_paths(paths), [int(t) for t in context]
    if not path_list:
        return np.zeros(0, dtype=np.float64)
    _check_ids(net, path_list, ctx)
    trie = _build_trie(path_list)
    run = _TrieRun(net, trie, ctx, max_batch_tokens, row_tokens, max_batch_bytes, stats, progress)
    with torch.inference_mode():
        run.run_trie(run.run_context())
        run.finish()
    _count_call(stats, path_list, ctx, started)
    return _path_sums(trie, run.node_lp.cpu().numpy())


# ---------------------------------------------------------------- the plain reference


def _next_batch(
    lengths: np.ndarray, pending: np.ndarray, budget: int, net: _Net, max_bytes: int
) -> np.ndarray:
    """The longest head of the length-sorted pending sequences whose padded batch fits."""
    stop = 1
    while stop < len(pending):
        width = int(lengths[pending[stop]])
        if (stop + 1) * width > budget or net.activation_bytes(stop + 1, width, width) > max_bytes:
            break
        stop += 1
    return pending[:stop]


def _plain_batch(net: _Net, seqs: list[list[int]], ctx_len: int, budget: int) -> list[np.ndarray]:
    """Token log-probs of each sequence's part after the context, from one right-padded pass.

    Right padding needs no attention mask: causal attention never lets a real token see a pad.
    """
    width = max(map(len, seqs))
    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    rows, tokens = [], []
    for b, seq in enumerate(seqs):
        ids[b, : len(seq)] = torch.tensor(seq)
        rows.extend(range(b * width + ctx_len - 1, b * width + len(seq) - 1))
        tokens.extend(seq[ctx_len:])
    hidden = net.decoder(input_ids=ids.to(net.device), use_cache=False).last_hidden_state
    picked = hidden.reshape(len(seqs) * width, -1)[torch.tensor(rows, dtype=torch.long, device=net.device)]
    order = torch.arange(len(rows), device=net.device)
    targets = torch.tensor(tokens, dtype=torch.long, device=net.device)
    lp = _token_logprobs(net, picked, order, targets, budget)
    return np.split(lp.double().cpu().numpy(), np.cumsum([len(s) - ctx_len for s in seqs])[:-1])


def score_paths_plain(
    lm: LoadedModel,
    paths: PathBatch | Sequence[Path],
    context: Sequence[int],
    *,
    max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
    progress: Progress | None = None,
    stats: ScoreStats | None = None,
) -> np.ndarray:
    """log p(path | context) from padded batches of context + path: the reference to check against.

    No KV reuse and no prefix sharing; the same chunked LM head as score_paths. Sequences are
    batched by length under max_batch_tokens padded tokens; progress gets (tokens, total).
    """
    stats = stats if stats is not None else ScoreStats()
    started = time.perf_counter()
    net, path_list, ctx = _net(lm), _as_paths(paths), [int(t) for t in context]
    if not path_list:
        return np.zeros(0, dtype=np.float64)
    _check_ids(net, path_list, ctx)
    seqs = [ctx + list(p) for p in path_list]
    lengths = np.array([len(s) for s in seqs])
    pending = np.argsort(lengths, kind="stable")
    scores = np.zeros(len(seqs), dtype=np.float64)
    budget, done = max_batch_tokens, 0
    with torch.inference_mode():
        while len(pending):
            batch = _next_batch(lengths, pending, budget, net, max_batch_bytes)
            try:
                token_lps = _plain_batch(net, [seqs[i] for i in batch], len(ctx), budget)
            except (RuntimeError, MemoryError) as err:
                budget = _halved(budget, err, stats)
                continue
            scores[batch] = [lp.sum() for lp in token_lps]
            pending = pending[len(batch) :]
            stats.forward_passes += 1
            stats.tokens_fed += int(lengths[batch].sum())
            stats.padded_tokens += len(batch) * int(lengths[batch].max())
            done += int(lengths[batch].sum())
            if progress:
                progress(done, int(lengths.sum()))
    _count_call(stats, path_list, ctx, started)
    return scores

"""Log-probabilities of tokenizations under a causal LM (DESIGN.md point 8, "Where the time goes").

``score_paths`` runs the context once and keeps its KV cache. The tokenizations form a prefix
trie; only its internal nodes go through the model (a token's log-probability comes from its
parent's hidden state, so leaves are never fed), each once, in depth-first order. A forward pass
holds a few rows; a row is a run of consecutive internal nodes (a segment) after the KV states of
the context and of the segment's outside ancestors, under a tree attention mask: each node sees
the context, its ancestors and itself, at the position its depth gives, as speculative decoding
verifies token trees. In depth-first order the outside ancestors of a segment are exactly the
ancestors of its first node, so a row carries their KV states over from its previous pass; only
a row opening a new span of the trie feeds them again.

The LM head and the log-softmax run on hidden states in chunks of rows, in fp32, reading only the
needed tokens: no [batch, length, vocab] tensor is ever built (Gemma 3 has 262,144 outputs).
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
LOGIT_CHUNK_BYTES = 1 << 27
MASK_TYPES = ("full_attention", "sliding_attention")

Progress = Callable[[int, int], None]


class ScoringMemoryError(MarginalError):
    """Even the smallest batch does not fit in memory."""


@dataclass
class ScoreStats:
    """Work done by scoring calls, summed over every call that is given this object."""

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
        """Share of the tokens plain scoring feeds (context + path, unpadded) not fed here."""
        return 1 - self.tokens_fed / self.plain_tokens if self.plain_tokens else 0.0

    @property
    def tokens_per_second(self) -> float:
        """Path tokens scored per wall-clock second."""
        return self.scored_tokens / self.seconds if self.seconds else 0.0


@dataclass(frozen=True)
class _Net:
    """The parts of a causal LM that scoring drives directly."""

    decoder: torch.nn.Module
    head: torch.nn.Module
    softcap: float | None
    window: int | None
    mask_types: tuple[str, ...] | None
    vocab: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    device: torch.device
    dtype: torch.dtype

    def activation_bytes(self, rows: int, queries: int, keys: int) -> int:
        """Rough peak memory of one forward pass: KV cache, attention scores, MLP, masks."""
        item = torch.finfo(self.dtype).bits // 8
        cache = 2 * self.layers * rows * self.kv_heads * keys * self.head_dim * item
        scores = 2 * rows * self.heads * queries * keys * 4
        mlp = 3 * rows * queries * self.intermediate * item
        masks = 2 * rows * queries * keys * item
        return cache + scores + mlp + masks


def _net(lm: LoadedModel) -> _Net:
    """Read what scoring needs from a loaded model, refusing attention it cannot mask."""
    model = lm.model
    cfg = model.config.get_text_config()
    if cfg._attn_implementation not in ("eager", "sdpa"):
        raise MarginalError(
            f"scoring needs custom attention masks, which {cfg._attn_implementation!r} attention "
            "does not take; load the model with attn_implementation='sdpa'"
        )
    layer_types = getattr(cfg, "layer_types", None)
    if layer_types is not None and not set(layer_types) <= set(MASK_TYPES):
        raise MarginalError(f"unsupported attention layer types {sorted(set(layer_types))}")
    heads = cfg.num_attention_heads
    param = next(model.parameters())
    return _Net(
        decoder=model.get_decoder(),
        head=model.get_output_embeddings(),
        softcap=getattr(cfg, "final_logit_softcapping", None),
        window=getattr(cfg, "sliding_window", None),
        mask_types=tuple(sorted(set(layer_types))) if layer_types is not None else None,
        vocab=model.get_output_embeddings().weight.shape[0],
        layers=cfg.num_hidden_layers,
        heads=heads,
        kv_heads=getattr(cfg, "num_key_value_heads", None) or heads,
        head_dim=getattr(cfg, "head_dim", None) or cfg.hidden_size // heads,
        intermediate=getattr(cfg, "intermediate_size", 4 * cfg.hidden_size),
        device=param.device,
        dtype=param.dtype,
    )


def _is_oom(err: BaseException) -> bool:
    """Whether an exception is an allocation failure (CUDA or CPU)."""
    if isinstance(err, (torch.OutOfMemoryError, MemoryError)):
        return True
    text = str(err).lower()
    return isinstance(err, RuntimeError) and ("out of memory" in text or "can't allocate" in text)


def _halve(budget: int, err: BaseException, stats: ScoreStats) -> int:
    """The token budget after an out-of-memory error; give up when it is already one token."""
    if budget <= 1:
        raise ScoringMemoryError("out of memory scoring even one token at a time") from err
    stats.oom_retries += 1
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return budget // 2


def _as_paths(paths: PathBatch | Sequence[Path]) -> list[Path]:
    """Paths as tuples of ints, whatever container they came in."""
    return paths.tolist() if isinstance(paths, PathBatch) else [tuple(map(int, p)) for p in paths]


def _check_ids(net: _Net, paths: list[Path], context: list[int]) -> None:
    """Refuse an empty context or token ids outside the model's vocabulary."""
    if not context:
        raise ValueError("the context is empty: condition on at least a BOS token (context_ids)")
    top = max([max(context), *(max(p) for p in paths if p)])
    if top >= net.vocab or min([min(context), *(min(p) for p in paths if p)]) < 0:
        raise ValueError(f"token id {top} is outside the model's vocabulary of {net.vocab}")


def _token_logprobs(
    net: _Net, hidden: torch.Tensor, rows: torch.Tensor, tokens: torch.Tensor, max_rows: int
) -> torch.Tensor:
    """log-softmax(head(hidden[row]))[token] for (row, token) pairs sorted by row, in fp32.

    The head runs on at most max_rows hidden states at a time (and on a LOGIT_CHUNK_BYTES
    budget of fp32 logits), and each row's logsumexp serves all of its pairs.
    """
    out = torch.empty(len(rows), dtype=torch.float32, device=hidden.device)
    step = max(1, min(max_rows, LOGIT_CHUNK_BYTES // (4 * net.vocab)))
    starts = torch.arange(0, len(hidden) + step, step, device=rows.device)
    bounds = torch.searchsorted(rows, starts).tolist()
    for i, first in enumerate(range(0, len(hidden), step)):
        lo, hi = bounds[i], bounds[i + 1]
        if lo == hi:
            continue
        logits = net.head(hidden[first : first + step]).float()
        if net.softcap:
            logits.div_(net.softcap).tanh_().mul_(net.softcap)
        local = rows[lo:hi] - first
        picked = logits[local, tokens[lo:hi]]
        top = logits.amax(dim=-1, keepdim=True)
        lse = top.squeeze(-1) + logits.sub_(top).exp_().sum(dim=-1).log()
        out[lo:hi] = picked - lse[local]
    return out


# ---------------------------------------------------------------- the prefix trie


@dataclass(frozen=True, eq=False)
class _Trie:
    """The distinct prefixes of some paths; node ids are in depth-first (preorder) order.

    ``fed`` lists the nodes with a child (the only ones the model must see). The hidden state
    that predicts node n's token is row ``parent_row[n]``: 0 for the context's last token,
    1 + i for ``fed[i]``.
    """

    token: np.ndarray
    parent: np.ndarray
    depth: np.ndarray
    end: np.ndarray
    fed: np.ndarray
    parent_row: np.ndarray

    def ancestors(self, node: int) -> list[int]:
        """The proper ancestors of a node, root first."""
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
    nodes: list[int] = []
    for i in sorted(range(len(paths)), key=paths.__getitem__):
        path = paths[i]
        shared = next((j for j, (a, b) in enumerate(zip(path, prev)) if a != b), min(len(path), len(prev)))
        del nodes[shared:]
        for t in path[shared:]:
            parent.append(nodes[-1] if nodes else -1)
            nodes.append(len(token))
            token.append(t)
        end[i] = nodes[-1] if nodes else -1
        prev = path
    parent_arr = np.array(parent, dtype=np.int64)
    depth = np.zeros(len(token), dtype=np.int64)
    for n, p in enumerate(parent):
        depth[n] = depth[p] + 1 if p >= 0 else 1
    has_child = np.zeros(len(token), dtype=bool)
    has_child[parent_arr[parent_arr >= 0]] = True
    fed = np.flatnonzero(has_child)
    row_of = np.zeros(len(token), dtype=np.int64)
    row_of[fed] = np.arange(1, len(fed) + 1)
    parent_row = np.where(parent_arr >= 0, row_of[np.maximum(parent_arr, 0)], 0)
    return _Trie(np.array(token, dtype=np.int64), parent_arr, depth, end, fed, parent_row)


def _path_sums(trie: _Trie, node_lp: np.ndarray) -> np.ndarray:
    """Each path's summed log-probability, accumulated root to leaf in float64."""
    cum = node_lp.astype(np.float64)
    for d in range(2, int(trie.depth.max(initial=0)) + 1):
        at = np.flatnonzero(trie.depth == d)
        cum[at] += cum[trie.parent[at]]
    return np.where(trie.end >= 0, cum[np.maximum(trie.end, 0)] if len(cum) else 0.0, 0.0)


@dataclass
class _Row:
    """One batch row's work: fed indices [start, stop), and the ancestors it carries.

    ``chain`` maps the ancestors of ``fed[start]`` whose KV states the row holds to their index
    in ``keys``/``values`` (one [kv_heads, len(chain), head_dim] tensor per layer).
    """

    start: int
    stop: int
    chain: dict[int, int] = field(default_factory=dict)
    keys: list[torch.Tensor] = field(default_factory=list)
    values: list[torch.Tensor] = field(default_factory=list)


@dataclass
class _Pass:
    """The layout of one forward pass: per row, carried ancestors, then queries."""

    carried: list[list[int]]
    queries: list[list[int]]
    owned: list[int]

    @property
    def width(self) -> tuple[int, int]:
        """(padded carried length, padded query length)."""
        return max(map(len, self.carried)), max(map(len, self.queries))


def _plan_pass(trie: _Trie, rows: list[_Row], row_tokens: int) -> _Pass:
    """Which nodes each row carries and feeds; a row feeds missing ancestors before its segment."""
    carried, queries, owned = [], [], []
    for row in rows:
        ancestors = trie.ancestors(int(trie.fed[row.start]))
        missing = [a for a in ancestors if a not in row.chain]
        count = max(1, min(row.stop - row.start, row_tokens - len(missing)))
        carried.append([a for a in ancestors if a in row.chain])
        queries.append(missing + trie.fed[row.start : row.start + count].tolist())
        owned.append(count)
    return _Pass(carried, queries, owned)


def _tree_masks(net: _Net, trie: _Trie, plan: _Pass, ctx_len: int) -> dict[str, torch.Tensor]:
    """Additive masks [rows, 1, queries, context + carried + queries] per attention type.

    A query sees the context and its ancestors and itself; sliding layers also drop keys
    ``window`` or more positions back. Padding queries see the context only.
    """
    width_c, width_q = plan.width
    cols = ctx_len + width_c + width_q
    allowed = np.zeros((len(plan.queries), width_q, cols), dtype=bool)
    key_pos = np.full((len(plan.queries), cols), -(1 << 40), dtype=np.int64)
    query_pos = np.full((len(plan.queries), width_q), ctx_len, dtype=np.int64)
    key_pos[:, :ctx_len] = np.arange(ctx_len)
    allowed[:, :, :ctx_len] = True
    for r, (carried, queries) in enumerate(zip(plan.carried, plan.queries)):
        col = {n: ctx_len + i for i, n in enumerate(carried)}
        col.update({n: ctx_len + width_c + i for i, n in enumerate(queries)})
        nodes = np.array(list(col), dtype=np.int64)
        key_pos[r, list(col.values())] = ctx_len - 1 + trie.depth[nodes]
        query_pos[r, : len(queries)] = ctx_len - 1 + trie.depth[queries]
        for i, n in enumerate(queries):
            while n >= 0:
                allowed[r, i, col[n]] = True
                n = int(trie.parent[n])
    masks = {"full_attention": allowed}
    if net.window is not None:
        near = query_pos[:, :, None] - key_pos[:, None, :] < net.window
        masks["sliding_attention"] = allowed & near
    low = torch.finfo(net.dtype).min
    out = {
        kind: torch.where(torch.from_numpy(m).to(net.device)[:, None], 0.0, low).to(net.dtype)
        for kind, m in masks.items()
    }
    return out


def _mask_argument(net: _Net, masks: dict[str, torch.Tensor]) -> torch.Tensor | dict[str, torch.Tensor]:
    """What the decoder takes: one mask per layer type, or a single one."""
    if net.mask_types is not None:
        return {kind: masks[kind] for kind in net.mask_types}
    return masks["sliding_attention" if net.window is not None else "full_attention"]


def _pad_chain(net: _Net, rows: list[_Row], width: int, layer: int, values: bool) -> torch.Tensor:
    """The carried KV states of every row for one layer, padded to width: [rows, kv, width, d]."""
    out = torch.zeros(len(rows), net.kv_heads, width, net.head_dim, dtype=net.dtype, device=net.device)
    for r, row in enumerate(rows):
        held = (row.values if values else row.keys)
        if row.chain:
            out[r, :, : len(row.chain)] = held[layer]
    return out


def _run_pass(
    net: _Net, trie: _Trie, rows: list[_Row], plan: _Pass, ctx: DynamicCache, ctx_len: int
) -> tuple[torch.Tensor, DynamicCache]:
    """One forward pass of the planned rows; returns hidden states [rows, queries, hidden]."""
    width_c, width_q = plan.width
    ids = torch.zeros(len(rows), width_q, dtype=torch.long)
    pos = torch.full((len(rows), width_q), ctx_len, dtype=torch.long)
    for r, queries in enumerate(plan.queries):
        ids[r, : len(queries)] = torch.from_numpy(trie.token[queries])
        pos[r, : len(queries)] = torch.from_numpy(ctx_len - 1 + trie.depth[queries])
    past = []
    for layer, ctx_layer in enumerate(ctx.layers):
        keys = [ctx_layer.keys.expand(len(rows), -1, -1, -1), _pad_chain(net, rows, width_c, layer, False)]
        vals = [ctx_layer.values.expand(len(rows), -1, -1, -1), _pad_chain(net, rows, width_c, layer, True)]
        past.append((torch.cat(keys, dim=2), torch.cat(vals, dim=2)))
    cache = DynamicCache(past)
    masks = _mask_argument(net, _tree_masks(net, trie, plan, ctx_len))
    out = net.decoder(
        input_ids=ids.to(net.device),
        attention_mask=masks,
        position_ids=pos.to(net.device),
        past_key_values=cache,
        use_cache=True,
    )
    return out.last_hidden_state, cache


def _advance(trie: _Trie, rows: list[_Row], plan: _Pass, cache: DynamicCache, ctx_len: int) -> None:
    """Move each row past its segment, keeping the KV states its next segment's ancestors need."""
    width_c = plan.width[0]
    for r, row in enumerate(rows):
        row.start += plan.owned[r]
        if row.start >= row.stop:
            row.chain, row.keys, row.values = {}, [], []
            continue
        col = {n: ctx_len + i for i, n in enumerate(plan.carried[r])}
        col.update({n: ctx_len + width_c + i for i, n in enumerate(plan.queries[r])})
        chain = trie.ancestors(int(trie.fed[row.start]))
        index = torch.tensor([col[n] for n in chain], dtype=torch.long, device=cache.layers[0].keys.device)
        row.chain = {n: i for i, n in enumerate(chain)}
        row.keys = [layer.keys[r].index_select(1, index) for layer in cache.layers]
        row.values = [layer.values[r].index_select(1, index) for layer in cache.layers]


def _trie_shape(net: _Net, budget: int, row_tokens: int, keys_extra: int, max_bytes: int) -> tuple[int, int]:
    """(rows per pass, tokens per row) for a token budget, shrunk until the memory estimate fits."""
    while True:
        per_row = max(1, min(row_tokens, budget))
        rows = max(1, budget // per_row)
        if budget <= 1 or net.activation_bytes(rows, per_row, keys_extra + per_row) <= max_bytes:
            return rows, per_row
        budget //= 2


def _context_cache(net: _Net, context: list[int]) -> tuple[DynamicCache, torch.Tensor]:
    """Run the context once: its KV cache (full layers) and its last hidden state."""
    cache = DynamicCache()
    out = net.decoder(
        input_ids=torch.tensor([context], device=net.device), past_key_values=cache, use_cache=True
    )
    return cache, out.last_hidden_state[0, -1:]


@dataclass(frozen=True)
class _Children:
    """The trie's nodes sorted by the hidden-state row that predicts them."""

    order: torch.Tensor
    rows: torch.Tensor
    tokens: torch.Tensor
    bounds: list[int]

    @classmethod
    def of(cls, trie: _Trie, device: torch.device) -> _Children:
        order = np.argsort(trie.parent_row, kind="stable")
        rows = trie.parent_row[order]
        bounds = np.searchsorted(rows, np.arange(len(trie.fed) + 2)).tolist()
        as_tensor = lambda a: torch.from_numpy(a).to(device)  # noqa: E731
        return cls(as_tensor(order), as_tensor(rows), as_tensor(trie.token[order]), bounds)

    def score(
        self, net: _Net, hidden: torch.Tensor, blocks: list[tuple[int, int]], max_rows: int, out: torch.Tensor
    ) -> None:
        """Write into out the log-probs of the nodes that hidden predicts.

        hidden holds the rows [first, first + count) of each block in turn.
        """
        sel, local, tokens, offset = [], [], [], 0
        for first, count in blocks:
            lo, hi = self.bounds[first], self.bounds[first + count]
            sel.append(self.order[lo:hi])
            local.append(self.rows[lo:hi] - first + offset)
            tokens.append(self.tokens[lo:hi])
            offset += count
        out[torch.cat(sel)] = _token_logprobs(net, hidden, torch.cat(local), torch.cat(tokens), max_rows)


@dataclass
class _Run:
    """One trie scoring: the model, the trie, the context cache and the running budget."""

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
        self.node_lp = torch.zeros(len(self.trie.token), dtype=torch.float32, device=self.net.device)
        self.total, self.done = len(self.context) + len(self.trie.fed), 0

    def _oom(self, err: BaseException) -> None:
        """Re-raise anything but an allocation failure; otherwise halve the budget."""
        if not _is_oom(err):
            raise err
        self.budget = _halve(self.budget, err, self.stats)

    def _count(self, fed: int, padded: int, done: int) -> None:
        self.stats.forward_passes += 1
        self.stats.tokens_fed += fed
        self.stats.padded_tokens += padded
        self.done += done
        if self.progress:
            self.progress(self.done, self.total)

    def run_context(self) -> DynamicCache:
        """Feed the context once; score the paths' first tokens from its last hidden state."""
        while True:
            try:
                ctx, last = _context_cache(self.net, self.context)
                self.children.score(self.net, last, [(0, 1)], self.budget, self.node_lp)
                break
            except (RuntimeError, MemoryError) as err:
                self._oom(err)
        self._count(len(self.context), len(self.context), len(self.context))
        return ctx

    def run_trie(self, ctx: DynamicCache) -> None:
        """Feed every internal node once, in passes of rows that carry their ancestors' KV."""
        trie, ctx_len = self.trie, len(self.context)
        keys_extra = ctx_len + int(trie.depth.max(initial=0))
        queue = [(0, len(trie.fed))] if len(trie.fed) else []
        active: list[_Row] = []
        while queue or active:
            n_rows, per_row = _trie_shape(self.net, self.budget, self.row_tokens, keys_extra, self.max_bytes)
            if not active:
                queue = _split_spans(trie, queue, n_rows, per_row)
            while len(active) < n_rows and queue:
                active.append(_Row(*queue.pop(0)))
            plan = _plan_pass(trie, active, per_row)
            try:
                hidden, cache = _run_pass(self.net, trie, active, plan, ctx, ctx_len)
                owned = [h[len(q) - k : len(q)] for h, q, k in zip(hidden, plan.queries, plan.owned)]
                blocks = [(1 + row.start, k) for row, k in zip(active, plan.owned)]
                self.children.score(self.net, torch.cat(owned), blocks, self.budget, self.node_lp)
            except (RuntimeError, MemoryError) as err:
                self._oom(err)
                queue = [(row.start, row.stop) for row in active] + queue
                active = []
                continue
            self._count(sum(map(len, plan.queries)), len(active) * plan.width[1], sum(plan.owned))
            _advance(trie, active, plan, cache, ctx_len)
            active = [row for row in active if row.start < row.stop]


def _split_spans(trie: _Trie, spans: list[tuple[int, int]], n_rows: int, per_row: int) -> list[tuple[int, int]]:
    """Cut the spans into pieces of about equal size for n_rows rows side by side.

    Each cut moves, by at most an eighth of a row, to the shallowest node nearby, so that the
    row starting there has few ancestors to feed again.
    """
    size = sum(b - a for a, b in spans)
    target = max(per_row, -(-size // n_rows))
    slack = per_row // 8
    pieces = []
    for start, stop in spans:
        while stop - start > target + slack:
            low = start + target - slack
            cut = low + int(np.argmin(trie.depth[trie.fed[low : start + target + slack + 1]]))
            pieces.append((start, cut))
            start = cut
        pieces.append((start, stop))
    return pieces


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
    """log p(path | context) for every path (float64), each distinct prefix computed once.

    The context runs once; the paths' prefix trie runs in passes of at most about
    max_batch_tokens tokens (rows of row_tokens), shrunk to fit max_batch_bytes of estimated
    activations and halved again on out-of-memory errors. progress gets (tokens fed, total).
    """
    stats = stats if stats is not None else ScoreStats()
    started = time.perf_counter()
    net, path_list, ctx = _net(lm), _as_paths(paths), [int(t) for t in context]
    if not path_list:
        return np.zeros(0, dtype=np.float64)
    _check_ids(net, path_list, ctx)
    trie = _build_trie(path_list)
    run = _Run(net, trie, ctx, max_batch_tokens, row_tokens, max_batch_bytes, stats, progress)
    with torch.inference_mode():
        run.run_trie(run.run_context())
    _count_paths(stats, path_list, ctx, started)
    return _path_sums(trie, run.node_lp.cpu().numpy())


def _count_paths(stats: ScoreStats, paths: list[Path], context: list[int], started: float) -> None:
    """Add one call's paths, scored tokens, plain-equivalent tokens and time to stats."""
    lengths = sum(map(len, paths))
    stats.paths += len(paths)
    stats.scored_tokens += lengths
    stats.plain_tokens += lengths + len(context) * len(paths)
    stats.seconds += time.perf_counter() - started


# ---------------------------------------------------------------- the plain reference


def _next_batch(lengths: np.ndarray, pending: np.ndarray, budget: int, net: _Net, max_bytes: int) -> np.ndarray:
    """The longest run at the head of the length-sorted pending sequences whose padded batch fits."""
    stop = 1
    while stop < len(pending):
        width = int(lengths[pending[stop]])
        if (stop + 1) * width > budget or net.activation_bytes(stop + 1, width, width) > max_bytes:
            break
        stop += 1
    return pending[:stop]


def _plain_batch(net: _Net, seqs: list[list[int]], ctx_len: int, budget: int) -> list[torch.Tensor]:
    """Token log-probs of each sequence's path part, from one right-padded forward pass."""
    width = max(map(len, seqs))
    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    rows, tokens = [], []
    for b, seq in enumerate(seqs):
        ids[b, : len(seq)] = torch.tensor(seq)
        rows.extend(b * width + np.arange(ctx_len - 1, len(seq) - 1))
        tokens.extend(seq[ctx_len:])
    hidden = net.decoder(input_ids=ids.to(net.device), use_cache=False).last_hidden_state
    hidden = hidden.reshape(len(seqs) * width, -1)
    rows_t = torch.tensor(rows, dtype=torch.long, device=net.device)
    lp = _token_logprobs(net, hidden[rows_t], torch.arange(len(rows), device=net.device),
                         torch.tensor(tokens, dtype=torch.long, device=net.device), budget)
    return list(lp.split([len(s) - ctx_len for s in seqs]))


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

    No KV reuse and no prefix sharing; same chunked LM head as score_paths.
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
    budget, done, total = max_batch_tokens, 0, int(lengths.sum())
    with torch.inference_mode():
        while len(pending):
            batch = _next_batch(lengths, pending, budget, net, max_batch_bytes)
            try:
                lps = _plain_batch(net, [seqs[i] for i in batch], len(ctx), budget)
            except (RuntimeError, MemoryError) as err:
                if not _is_oom(err):
                    raise
                budget = _halve(budget, err, stats)
                continue
            for i, lp in zip(batch.tolist(), lps):
                scores[i] = float(np.sum(lp.double().cpu().numpy()))
            pending = pending[len(batch):]
            stats.forward_passes += 1
            stats.tokens_fed += int(lengths[batch].sum())
            stats.padded_tokens += len(batch) * int(lengths[batch].max())
            done += int(lengths[batch].sum())
            if progress:
                progress(done, total)
    _count_paths(stats, path_list, ctx, started)
    return scores

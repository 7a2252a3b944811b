"""The prefix search's KV kept across rounds (docs/design.md, "Surprisal: where in the text"): each
scored prefix's last token's keys and values at every layer, within a byte budget, so that a
later round feeds only the new tokens: a round's new prefixes are children of scored ones, and
the trie scorer's own layout and masks (``trie_run.run_carried``) let each new token see its
kept ancestors. A prefix not kept (the budget spent) is scored as before, its ancestors fed again.
Prefixes are kept by their token path, which fixes their KV after one context whatever the text:
a continuation's searches share one store (``prefix_memory``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import NamedTuple

import numpy as np
import torch
from transformers import DynamicCache

from marginal_core.ground import hooks as serving_hooks
from marginal_core.ground.progress import Progress
from marginal_core.lm.adapter import LM
from marginal_core.lm.contexts import ContextState
from marginal_core.scoring.pass_budget import DEFAULT_ROW_TOKENS, pass_bytes, pass_pairs, pass_tokens
from marginal_core.scoring.score_stats import ScoreStats
from marginal_core.scoring.trie import Pass, Trie
from marginal_core.scoring.trie_run import Carried, pass_states, run_carried
from marginal_core.search.settings import KV_BYTES


class KeptKV:
    """Per kept prefix (its token path), its last token's keys and values at every layer ([kv_heads, head_dim]
    each), in per-layer tensors that double as they fill, never past ``max_bytes``."""

    def __init__(self, max_bytes: int = KV_BYTES) -> None:
        self.max_bytes = max_bytes
        self.slot: dict[Hashable, int] = {}
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.peak_bytes = 0

    def __contains__(self, key: Hashable) -> bool:
        return key in self.slot

    def held_bytes(self) -> int:
        """Bytes of the tensors held (their capacity, filled or not)."""
        return sum(t.nbytes for t in self.keys + self.values)

    def add(self, pids: list[Hashable], states: Carried) -> None:
        """Keep the prefixes' states (``states``: per layer [len(pids), kv_heads, head_dim]), as
        many as the budget holds, in order; prefixes kept already, or twice in pids (an ancestor
        a pass fed again), are kept once."""
        first_at = {p: i for i, p in reversed(list(enumerate(pids)))}
        new = [i for i, p in enumerate(pids) if p not in self.slot and first_at[p] == i]
        if not new:
            return
        first = states.keys[0]
        each = 2 * sum(k[0].nbytes for k in states.keys)  # one prefix's keys and values, every layer
        room = self.max_bytes // each - len(self.slot)
        new = new[: max(0, room)]
        if not new:
            return
        need = len(self.slot) + len(new)
        if not self.keys or self.keys[0].shape[0] < need:
            self._grow(min(max(need, 2 * (self.keys[0].shape[0] if self.keys else 64)), self.max_bytes // each), states)
        at = torch.arange(len(self.slot), need, device=first.device)
        pick = torch.as_tensor(new, device=first.device)
        for kept, given in zip(self.keys + self.values, states.keys + states.values, strict=True):
            kept[at] = given[pick]
        for i, slot in zip(new, range(len(self.slot), need), strict=True):
            self.slot[pids[i]] = slot
        self.peak_bytes = max(self.peak_bytes, self.held_bytes())

    def _grow(self, capacity: int, like: Carried) -> None:
        """Room for ``capacity`` prefixes, what is kept copied over."""
        used = len(self.slot)

        def grown(old: torch.Tensor | None, model: torch.Tensor) -> torch.Tensor:
            t = torch.empty((capacity, *model.shape[1:]), dtype=model.dtype, device=model.device)
            if old is not None:
                t[:used] = old[:used]
            return t

        olds: list[torch.Tensor | None] = [*self.keys, *self.values] or [None] * (2 * len(like.keys))
        fresh = [grown(o, m) for o, m in zip(olds, like.keys + like.values, strict=True)]
        self.keys, self.values = fresh[: len(like.keys)], fresh[len(like.keys) :]

    def gather(self, chains: list[list[Hashable]]) -> Carried | None:
        """The kept states of each row's prefixes (row r's chain, padded to the longest), per layer
        [rows, kv_heads, longest chain, head_dim]: what a pass's rows carry (None: no row carries any)."""
        width = max(map(len, chains))
        if width == 0:
            return None
        index = torch.zeros((len(chains), width), dtype=torch.long, device=self.keys[0].device)
        for r, chain in enumerate(chains):
            index[r, : len(chain)] = torch.as_tensor([self.slot[p] for p in chain])
        flat = index.reshape(-1)

        def rows(kept: torch.Tensor) -> torch.Tensor:
            return kept[flat].reshape(len(chains), width, *kept.shape[1:]).transpose(1, 2)

        return Carried([rows(k) for k in self.keys], [rows(v) for v in self.values])


def node_paths(trie: Trie) -> list[tuple[int, ...]]:
    """Each trie node's token path (preorder: parents first)."""
    paths: list[tuple[int, ...]] = []
    for parent, token in zip(trie.parent.tolist(), trie.token.tolist(), strict=True):
        paths.append((paths[parent] if parent >= 0 else ()) + (token,))
    return paths


def keeper(kv: KeptKV, node_key: Sequence[Hashable]) -> Callable[[Pass, DynamicCache], None]:
    """A trie run's hook that keeps the KV of every node each pass fed (``node_key``: each trie
    node's path), ancestors first."""
    def keep(plan: Pass, cache: DynamicCache) -> None:
        first = plan.ctx_len + plan.widths[0]
        rows = np.concatenate([np.full(len(q), r) for r, q in enumerate(plan.queries)])
        cols = np.concatenate([first + np.arange(len(q)) for q in plan.queries])
        nodes = np.concatenate([np.asarray(q, dtype=np.int64) for q in plan.queries])
        kv.add([node_key[n] for n in nodes.tolist()], pass_states(cache, rows, cols))
    return keep


class FeedPlan(NamedTuple):
    """How ``feed_kept`` feeds a trie: each node's path (``key``), the rows of nodes to feed and,
    for each row, the kept ancestors it carries (``chains``)."""

    key: Sequence[Hashable]
    rows: list[list[int]]
    chains: list[list[int]]


def kept_rows(trie: Trie, key: Sequence[Hashable], kv: KeptKV, again: frozenset[int] = frozenset()) -> FeedPlan | None:
    """How to feed a trie's nodes whose KV is not kept (``key``: each node's path), and the nodes
    ``again`` whose KV is kept but whose hidden state is wanted, on the kept ones: rows of whole
    subtrees of them (a node sees its ancestors among its row's), neighbouring in preorder up to
    DEFAULT_ROW_TOKENS nodes a row, each row with the kept ancestors it carries (a node its row
    feeds again is seen there, not carried). None where one subtree passes a row: the trie is
    better fed from the context (``TrieRun``)."""
    todo = [n for n in range(len(key)) if key[n] not in kv or n in again]  # the kept set holds every ancestor of a kept node
    rows: list[list[int]] = []
    for n in todo:
        parent = int(trie.parent[n])
        starts = parent < 0 or key[parent] in kv
        if starts and (not rows or len(rows[-1]) + int(trie.last[n]) - n + 1 > DEFAULT_ROW_TOKENS):
            rows.append([])
        rows[-1].append(n)
    if any(len(r) > DEFAULT_ROW_TOKENS for r in rows):
        return None
    chains = [sorted({a for n in row for a in trie.ancestors(n) if key[a] in kv} - set(row)) for row in rows]
    return FeedPlan(key, rows, chains)


def feed_kept(lm: LM, ctx: ContextState, kv: KeptKV, trie: Trie, plan: FeedPlan, stats: ScoreStats,
              progress: Progress | None, head: Callable[[torch.Tensor, list[Hashable]], None]) -> None:
    """Feed the rows of ``kept_rows``' plan in passes whose rows carry their kept ancestors' KV
    (``trie_run.run_carried``), as many rows a pass as the trie scorer's budgets allow; ``head``
    hears each pass's hidden states with their nodes' paths, and their KV is kept in turn."""
    key, rows, chains = plan
    tokens, pairs, max_bytes = pass_tokens(lm, None), pass_pairs(lm), pass_bytes(lm, None)
    keep, done, at, total = keeper(kv, key), 0, 0, sum(map(len, rows))
    while at < len(rows):
        take = 1
        while at + take < len(rows):
            q = max(len(r) for r in rows[at : at + take + 1])
            k = len(ctx) + max(len(c) for c in chains[at : at + take + 1]) + q
            if (take + 1) * q > tokens or (take + 1) * q * k > pairs or lm.activation_bytes(take + 1, q, k) > max_bytes:
                break
            take += 1
        queries = rows[at : at + take]
        with serving_hooks.unit(), torch.inference_mode():
            states = kv.gather([[key[n] for n in c] for c in chains[at : at + take]])
            hidden, cache, passed = run_carried(lm, trie, ctx, chains[at : at + take], queries, states)
            keep(passed, cache)
            fed = torch.cat([h[: len(q)] for h, q in zip(hidden, queries, strict=True)])
            head(fed, [key[n] for q in queries for n in q])
        stats.forward_passes += 1
        stats.tokens_fed += len(fed)
        done, at = done + len(fed), at + take
        if progress:
            progress(done, total)

"""The heads of a round's prefixes (docs/design.md, "Surprisal"): from what the memory kept, the
head alone on a kept hidden state, or the model fed only the tokens whose KV is not kept
(``kv.feed_kept``; round 0 of a search from nothing: one trie run from the context). Light
prefixes go through a bounding head over a few columns (``heads``)."""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import torch

from marginal_core.ground.progress import Progress
from marginal_core.lattice.graph import Lattice
from marginal_core.lm.adapter import LM
from marginal_core.lm.contexts import ContextState
from marginal_core.scoring.pass_budget import DEFAULT_ROW_TOKENS, pass_bytes, pass_tokens
from marginal_core.scoring.score_stats import ScoreStats
from marginal_core.scoring.tables import Tables
from marginal_core.scoring.trie import build_trie
from marginal_core.scoring.trie_run import TrieRun
from marginal_core.search.heads import Columns, HeadBuffers, bound_chunk, covers, score_chunk
from marginal_core.search.kv import KeptKV, feed_kept, keeper, kept_rows, node_paths
from marginal_core.search.memory import HeadOut, PrefixMemory
from marginal_core.search.tree import ScoredTree


class HeadFeeder:
    """Scores prefixes of one tree through the model: ``heads(pids)`` gives each its arcs' log p,
    covering masses and next-byte masses (none for a bounded one), and keeps what the memory
    wants. ``kv`` holds the prefixes' keys and values across rounds (the memory's where it has one)."""

    def __init__(self, lm: LM, ctx: ContextState, tables: Tables, tree: ScoredTree, memory: PrefixMemory | None,
                 kv: KeptKV) -> None:
        self.lm, self.ctx, self.tables, self.tree, self.memory, self.kv = lm, ctx, tables, tree, memory, kv
        lattice: Lattice = tree.lattice
        self.cover = covers(lattice, lm.vocab, lm.device)
        a = tree.a
        self.text_ids = np.unique(np.concatenate([a.tokens[s, : a.width[s]] for s in range(len(a.node))]
                                                 + [self.cover.tokens.cpu().numpy()]))
        self.probable: set[int] = set()  # ids full heads found among their most probable
        self.columns: tuple[int, Columns] | None = None  # the bounding head's columns, and len(probable) then
        self.stats = ScoreStats()

    def heads(self, pids: range, progress: Progress | None) -> dict[int, HeadOut]:
        """The heads of the opened prefixes ``pids``: remembered, else fed."""
        if any(self.tree.bound[p] for p in pids) and (self.columns is None or self.columns[0] < len(self.probable)):
            ids = np.concatenate([self.text_ids, np.fromiter(self.probable, np.int64, len(self.probable))])
            self.columns = (len(self.probable), Columns.of(self.lm, ids))
        out = self._remembered(pids)
        new = [p for p in pids if p not in out]
        if new:
            out.update(self._fed(new, progress))
        return out

    def _remembered(self, pids: range) -> dict[int, HeadOut]:
        """The heads the memory has for these prefixes: closed ones' as kept, the others' by the
        head on their kept hidden states (no next-byte masses for a bounded prefix: its log p
        is an upper bound)."""
        out: dict[int, HeadOut] = {}
        if self.memory is None:
            return out
        tree, again = self.tree, list[int]()
        for p in pids:
            state = tree.state[p]
            head = self.memory.head(tree.path[p], tree.lattice.data, tree.a.tokens[state, : tree.a.width[state]])
            if head is not None:
                out[p] = head if not tree.bound[p] else (head[0], head[1], None)
            elif tree.path[p] in self.memory.hidden:
                again.append(p)
        if again:
            hidden = torch.stack([self.memory.hidden[tree.path[p]] for p in again])
            with torch.inference_mode():
                self._head_rows(hidden, np.asarray(again, dtype=np.int64), out)
        return out

    def _fed(self, pids: list[int], progress: Progress | None) -> dict[int, HeadOut]:
        """The prefixes' heads, feeding only the tokens whose KV is not kept, on the kept KV of
        their ancestors, or where that would make a row too long (round 0 of a search from
        nothing), by a trie run from the context (``_trie_heads``)."""
        paths = [self.tree.path[p] for p in pids]
        trie = build_trie(paths, every_node=True)
        key = node_paths(trie)
        again = frozenset(int(trie.end[i]) for i, path in enumerate(paths) if path in self.kv)  # KV kept, head not
        plan = kept_rows(trie, key, self.kv, again) if all(paths) else None
        if plan is None:
            return self._trie_heads(pids, progress)
        out: dict[int, HeadOut] = {}
        pid_of: dict[Hashable, int] = {path: p for path, p in zip(paths, pids, strict=True)}

        def head(hidden: torch.Tensor, fed: list[Hashable]) -> None:
            asked = [i for i, path in enumerate(fed) if path in pid_of]  # not an ancestor fed again
            self._head_rows(hidden[asked], np.array([pid_of[fed[i]] for i in asked], dtype=np.int64), out)

        feed_kept(self.lm, self.ctx, self.kv, trie, plan, self.stats, progress, head)
        return out

    def _head_rows(self, hidden: torch.Tensor, pids: np.ndarray, out: dict[int, HeadOut]) -> None:
        """Rows of hidden (prefixes pids) through the full head or a bounding head, in chunks."""
        self._chunks(hidden, np.arange(len(pids)), pids, pass_tokens(self.lm, None), out)

    def _chunks(self, hidden: torch.Tensor, at: np.ndarray, pids: np.ndarray, max_rows: int,
                out: dict[int, HeadOut]) -> None:
        """Rows ``at`` of hidden (prefixes pids) through the full head in chunks the head allows,
        the bounded ones through a bounding head in chunks of ``max_rows``."""
        bound = np.array([self.tree.bound[p] for p in pids.tolist()], dtype=bool)
        for kind, step in ((False, self.lm.head_rows(max_rows)), (True, max(1, max_rows))):
            chosen = np.flatnonzero(bound == kind)
            for lo in range(0, len(chosen), step):
                part = chosen[lo : lo + step]
                self._score(hidden, at[part], pids[part], kind, out)

    def _trie_heads(self, pids: list[int], progress: Progress | None) -> dict[int, HeadOut]:
        """The prefixes' heads from one trie run over their paths: the decoder feeds every node
        (scored ancestors again), the head only the prefixes asked for."""
        out: dict[int, HeadOut] = {}
        path = self.tree.path
        trie = build_trie([path[p] for p in pids if path[p]], every_node=True)
        want = np.full(1 + len(trie.token), -1, dtype=np.int64)
        want[1 + trie.end[trie.end >= 0]] = [p for p in pids if path[p]]
        if pids and not path[pids[0]]:
            want[0] = pids[0]  # the empty prefix: the context's last hidden state

        def head(hidden: torch.Tensor, blocks: list[tuple[int, int]], max_rows: int) -> None:
            rows = np.concatenate([np.arange(first, first + count) for first, count in blocks])
            take = np.flatnonzero(want[rows] >= 0)
            self._chunks(hidden, take, want[rows[take]], max_rows, out)

        budgets = (pass_tokens(self.lm, None), DEFAULT_ROW_TOKENS, pass_bytes(self.lm, None))
        run = TrieRun(self.lm, trie, self.ctx, *budgets, self.stats, progress, head, keeper(self.kv, node_paths(trie)))
        with torch.inference_mode():
            if len(trie.fed):
                run.run_trie()
            run.finish()
        return out

    def _score(self, hidden: torch.Tensor, at: np.ndarray, pids: np.ndarray, bound: bool,
               out: dict[int, HeadOut]) -> None:
        """Rows ``at`` of hidden (prefixes ``pids``) through the full head, or a bounding head."""
        tree, device = self.tree, self.lm.device
        state = torch.as_tensor([tree.state[p] for p in pids], device=device)
        tok = self.tables.tokens[state]
        allowed = torch.empty(tok.shape, dtype=torch.float64, device=device)
        cover = torch.full((len(at), self.cover.depth), -np.inf, dtype=torch.float64, device=device)
        rows = hidden[torch.as_tensor(at, device=hidden.device)]
        if bound:
            assert self.columns is not None  # made in heads() before any bounded prefix is scored
            bound_chunk(self.lm, rows, state, tok, self.cover, self.columns[1], allowed, cover)
            levels: list[np.ndarray | None] = [None] * len(pids)
        else:
            found = torch.empty((len(at), self.cover.depth + 1, 257), dtype=torch.float64, device=device)
            wanted = self.memory.wanted if self.memory is not None else set()
            whole = [i for i, p in enumerate(pids.tolist()) if tree.path[p] in wanted]
            top, distributions = score_chunk(self.lm, rows, state, tok, self.cover, HeadBuffers(allowed, cover, found), whole)
            self.probable.update(top.unique().tolist())
            if self.memory is not None:
                self.memory.take_whole({tree.path[int(pids[i])]: d for i, d in distributions.items()})
            reach = np.isfinite(cover.cpu().numpy()).sum(axis=1) + 1  # the levels a row's tokens reach
            levels = [f[:r, :256] for f, r in zip(found.cpu().numpy(), reach.tolist(), strict=True)]
        for i, (p, a, c, v) in enumerate(zip(pids.tolist(), allowed.cpu().numpy(), cover.cpu().numpy(), levels,
                                             strict=True)):
            s = tree.state[p]
            out[p] = (a[: tree.a.width[s]], c, v)
            if self.memory is not None and v is not None:
                self.memory.keep(tree.path[p], tree.lattice.data, int(tree.a.node[s]),
                                 tree.a.tokens[s, : tree.a.width[s]], out[p], rows[i])

"""Prefix probabilities of a text at every byte, summed over tokenizations, by a best-first search
in rounds (docs/design.md, "Surprisal"): each round one batched trie pass over a set of prefixes
(token paths ending at lattice nodes), chosen without running the model on them.

A scored prefix adds, for each byte j ahead of its node, its log p plus the log mass of the
tokens that cover the bytes to j (``prefix_heads``), and its next-byte masses; it leaves
**exits**, the arcs from its node whose extension is not scored, each with its mass. The prefixes
below an exit add at most its mass to any P(s<j) past the exit's node, so ``upper(j) = lower(j)
+`` the mass of the exits ending before j, after every round and after a Stop.

Round 0 is every prefix of the canonical tokenization and each one-token split's prefixes up to
where it rejoins the canonical path, as one trie (the canonical tokens' log p and canonical prefix
row come from its heads). Each later round scores the heaviest exits, up to a number of rows that
doubles each round, within a server's cap (``prefix_choice``: ways on, bounding heads). The search
stops when every region's interval is within the tolerance, a round narrowed none enough, the
budget or the time budget ran out, or Stop; exact scores every exit. A round feeds only the tokens
whose KV is not kept (``prefix_kv``), and a ``PrefixMemory`` brings what searches of texts this
one extends scored (``prefix_memory``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace

import numpy as np
import torch

from marginal_core.estimators.prefix_bounds import PrefixMasses, end_probabilities
from marginal_core.estimators.prefix_choice import Step, Ways, bounding_pays, check_exact, with_ways
from marginal_core.estimators.prefix_heads import Columns, bound_chunk, covers, node_tables, score_chunk
from marginal_core.estimators.prefix_kv import KV_BYTES, KeptKV, feed_kept, keeper, kept_rows, node_paths
from marginal_core.estimators.prefix_memory import HeadOut, PrefixMemory
from marginal_core.estimators.search_stop import SearchClock, TimeBudget, why_ended
from marginal_core.estimators.surprisal_result import interval_widths
from marginal_core.ground.progress import Progress, StopCheck
from marginal_core.lattice.graph import DEFAULT_ENUMERATION_BUDGET, Lattice
from marginal_core.lm.adapter import LM
from marginal_core.lm.contexts import ContextState
from marginal_core.scoring.pass_budget import DEFAULT_ROW_TOKENS, pass_bytes, pass_tokens
from marginal_core.scoring.score_stats import ScoreStats
from marginal_core.scoring.trie import build_trie
from marginal_core.scoring.trie_run import TrieRun

FIRST_ROWS = 64  # the most exits the first round after round 0 scores; each round doubles it
MAX_ROWS = 1024  # the most a round scores unless a caller (a server's cap) says otherwise
# An exit lighter than this beside the prefix probability at its node (or below a bounded prefix)
# gets a bounding head: its share of any P(s<j) is too small to count but for the certificate.
BOUND_BELOW = 1e-7


class _Search:
    """What the rounds over one text have scored: each prefix's parent, arc, node state and log p
    (an upper bound where the prefix is ``bound``: a bounding head scored it or one of its
    ancestors); the lower bounds the exact prefixes' covering masses add up to, and the bounded
    prefixes' covering bounds (``bounded``, per byte); its exits; the complete paths' log p."""

    def __init__(self, lm: LM, lattice: Lattice, ctx: ContextState, bound_below: float, kv_bytes: int = KV_BYTES,
                 past_end: bool = False, memory: PrefixMemory | None = None) -> None:
        self.lm, self.lattice, self.ctx, self.past_end, self.memory = lm, lattice, ctx, past_end, memory
        self.bound_below = math.log(bound_below) if bound_below > 0 else -math.inf
        self.tables, self.cover = node_tables(lattice, lm.device), covers(lattice, lm.vocab, lm.device)
        self.tokens = self.tables.tokens.cpu().numpy()
        self.next = self.tables.next_state.cpu().numpy()
        self.width = self.tables.width.cpu().numpy()
        self.final = self.tables.final.cpu().numpy()
        self.node = np.asarray(lattice.nodes, dtype=np.int64)
        self.col = {(s, int(t)): c for s in range(len(self.node)) for c, t in enumerate(self.tokens[s, : self.width[s]])}
        self.state: list[int] = []
        self.parent: list[int] = []
        self.log_p: list[float] = []
        self.path: list[tuple[int, ...]] = []
        self.allowed: list[np.ndarray] = []
        self.scored: dict[Step, int] = {}  # (parent, column) -> prefix id, scored or in the round under way
        self.exits: dict[Step, float] = {}  # (parent, column) -> log mass, for exits not at the end
        self.bound: list[bool] = []
        self.lower = np.full(lattice.end + 1, -math.inf)
        self.lower[0] = 0.0
        self.bounded = np.full(lattice.end + 1, -math.inf)
        self.next_lower = np.full((lattice.end + past_end, 256), -math.inf)
        # the canonical tokenization's prefixes' ids, shortest first, and their covering masses once scored
        self.canonical_covers: dict[int, np.ndarray | None] = {}
        self.complete: list[float] = []
        self.end_lower = -math.inf  # past the end: what the scored complete paths give no byte
        self.complete_bound: list[float] = []
        self.text_ids = np.unique(np.concatenate([self.tokens[s, : self.width[s]] for s in range(len(self.node))]
                                                 + [self.cover.tokens.cpu().numpy()]))
        self.probable: set[int] = set()  # ids full heads found among their most probable
        self.columns: tuple[int, Columns] | None = None  # the bounding head's columns, and len(probable) then
        self.rounds = 0
        self.ways = Ways(lattice, lm.text_tokenizer, self.node, self.next, self.width, self.final, self.col)
        self.first_splits: list[int] = []  # round 0's splits of the first canonical token (prefix ids)
        self.stats = ScoreStats()
        self.kv = memory.kv if memory is not None else KeptKV(kv_bytes)

    def seed(self) -> list[Step]:
        """Round 0: the empty prefix, the prefixes the memory kept, every prefix of the canonical
        tokenization, and each one-token split's two prefixes that leave it (the split's first
        token, and both where the second does not end the text), parents first (prefix ids count
        on from the ones scored). A split's way on along the canonical tokens is left to the
        rounds after, by mass: it would make round 0 quadratic in the text's length; only the
        first token's heavy splits go on, in round 1 (``first_ways``)."""
        lattice, steps = self.lattice, [(-1, -1)]
        ids: dict[tuple[int, ...], tuple[int, int]] = {(): (0, 0)}  # a path -> its prefix id and node state

        def add(path: list[int]) -> None:
            """Every prefix of path that ends before the end of the text (or at it, past the end)."""
            for i in range(1, len(path) + 1):
                if tuple(path[:i]) in ids:
                    continue
                parent, state = ids[tuple(path[: i - 1])]
                col = self.col.get((state, path[i - 1]))
                if col is None or self.final[self.next[state, col]] and not self.past_end:
                    return  # a kept path this lattice trimmed, or one that ends the text
                ids[tuple(path[:i])] = (len(steps), int(self.next[state, col]))
                steps.append((parent, col))

        for path in self.memory.paths() if self.memory is not None else ():
            add(list(path))
        canonical, nodes = list(lattice.canonical), list(lattice.canonical_nodes)
        add(canonical)
        self.canonical_covers = dict.fromkeys(len(self.state) + ids[tuple(canonical[:i])][0]
                                              for i in range(len(canonical)))
        for i, (u, v) in enumerate(zip(nodes[:-1], nodes[1:], strict=True)):
            for a in lattice.out_arcs(u):
                m = int(lattice.arc_end[a])
                second = lattice.out_arcs(m) if m < v else range(0)
                for b in (b for b in second if int(lattice.arc_end[b]) == v):
                    add([*canonical[:i], int(lattice.arc_token[a]), int(lattice.arc_token[b])])
                    if i == 0 and (split := ids.get((int(lattice.arc_token[a]), int(lattice.arc_token[b])))):
                        self.first_splits.append(split[0])
        return steps

    def run(self, steps: Sequence[Step], progress: Progress | None) -> None:
        """Score the prefixes ``steps`` (parents before children; prefix ids count on from the ones
        scored) in one trie run: their heads, then their log p, covering masses and exits. An exit
        below a bounded prefix, or lighter than bound_below beside P(s<its node), gets a
        bounding head."""
        first = len(self.state)
        for i, (parent, col) in enumerate(steps):
            self.parent.append(parent)
            if parent < 0:
                self.state.append(0)
                self.path.append(())
                self.bound.append(False)
                continue
            state = int(self.next[self.state[parent], col])
            mass = self.exits.pop((parent, col), None)
            self.state.append(state)
            self.path.append(self.path[parent] + (int(self.tokens[self.state[parent], col]),))
            self.bound.append(self.bound[parent] or (mass is not None
                                                     and mass - self.lower[self.node[state]] < self.bound_below))
            self.scored[parent, col] = first + i
        if any(self.bound[first:]) and (self.columns is None or self.columns[0] < len(self.probable)):
            ids = np.concatenate([self.text_ids, np.fromiter(self.probable, np.int64, len(self.probable))])
            self.columns = (len(self.probable), Columns.of(self.lm, ids))
        heads = self._remembered(range(first, len(self.state)))
        new = [p for p in range(first, len(self.state)) if p not in heads]
        if new:
            heads.update(self._fed(new, progress))
        for pid in range(first, len(self.state)):
            parent, col = steps[pid - first]
            self.log_p.append(0.0 if parent < 0 else self.log_p[parent] + float(self.allowed[parent][col]))
            allowed, cover, levels = heads[pid]
            self.allowed.append(allowed)
            self._add(pid, cover, levels)
        self.rounds += 1

    def _add(self, pid: int, cover: np.ndarray, levels: np.ndarray | None) -> None:
        """A scored prefix's covering masses to the bytes ahead of it (bounds, for a bounded one),
        its next-byte masses (an exact one) and its exits."""
        state, log_p, bound = self.state[pid], self.log_p[pid], self.bound[pid]
        node = int(self.node[state])
        at = node + 1 + np.arange(len(cover))
        keep = (at <= self.lattice.end) & np.isfinite(cover)
        np.logaddexp.at(self.bounded if bound else self.lower, at[keep], log_p + cover[keep])
        if levels is not None:
            ahead = self.next_lower[node : node + len(levels)]
            np.logaddexp(ahead, log_p + levels[: len(ahead)], out=ahead)
        if pid in self.canonical_covers:
            self.canonical_covers[pid] = cover
        if node == self.lattice.end and not bound:  # its covering mass at the end: the tokens of no byte
            self.end_lower = float(np.logaddexp(self.end_lower, log_p + cover[0]))
        for c in range(int(self.width[state])):
            mass = log_p + float(self.allowed[pid][c])
            final = self.final[self.next[state, c]]
            if final:
                (self.complete_bound if bound else self.complete).append(mass)
            if (not final or self.past_end) and (pid, c) not in self.scored and mass > -math.inf:
                self.exits[pid, c] = mass

    def _remembered(self, pids: range) -> dict[int, HeadOut]:
        """The heads the memory has for these prefixes: closed ones' as kept, the others' by the
        head on their kept hidden states (no next-byte masses for a bounded prefix: its log p
        is an upper bound)."""
        out: dict[int, HeadOut] = {}
        if self.memory is None:
            return out
        again: list[int] = []
        for p in pids:
            state = self.state[p]
            head = self.memory.head(self.path[p], self.lattice.data, self.tokens[state, : self.width[state]])
            if head is not None:
                out[p] = head if not self.bound[p] else (head[0], head[1], None)
            elif self.path[p] in self.memory.hidden:
                again.append(p)
        if again:
            hidden = torch.stack([self.memory.hidden[self.path[p]] for p in again])
            with torch.inference_mode():
                self._head_rows(hidden, np.asarray(again, dtype=np.int64), out)
        return out

    def _fed(self, pids: list[int], progress: Progress | None) -> dict[int, HeadOut]:
        """The prefixes' heads, feeding only the tokens whose KV is not kept, on the kept KV of
        their ancestors (``prefix_kv.feed_kept``), or where that would make a row too long (round
        0 of a search from nothing), by a trie run from the context (``_heads``)."""
        paths = [self.path[p] for p in pids]
        trie = build_trie(paths, every_node=True)
        key = node_paths(trie)
        again = frozenset(int(trie.end[i]) for i, path in enumerate(paths) if path in self.kv)  # KV kept, head not
        plan = kept_rows(trie, key, self.kv, again) if all(paths) else None
        if plan is None:
            return self._heads(pids, progress)
        out: dict[int, HeadOut] = {}
        pid_of = {path: p for path, p in zip(paths, pids, strict=True)}

        def head(hidden: torch.Tensor, fed: list[tuple[int, ...]]) -> None:
            asked = [i for i, path in enumerate(fed) if path in pid_of]  # not an ancestor fed again
            self._head_rows(hidden[asked], np.array([pid_of[fed[i]] for i in asked], dtype=np.int64), out)

        feed_kept(self.lm, self.ctx, self.kv, trie, key, *plan, self.stats, progress, head)
        return out

    def _head_rows(self, hidden: torch.Tensor, pids: np.ndarray, out: dict[int, HeadOut]) -> None:
        """Rows of hidden (prefixes pids) through the full head or a bounding head, in chunks."""
        bound = np.array([self.bound[p] for p in pids.tolist()], dtype=bool)
        budget = pass_tokens(self.lm, None)
        for kind, step in ((False, self.lm.head_rows(budget)), (True, max(1, budget))):
            chosen = np.flatnonzero(bound == kind)
            for lo in range(0, len(chosen), step):
                self._score(hidden, chosen[lo : lo + step], pids[chosen[lo : lo + step]], kind, out)

    def _heads(self, pids: list[int], progress: Progress | None) -> dict[int, HeadOut]:
        """Each prefix's arc log p, covering masses and next-byte masses (float64, on the CPU;
        bounds and no next bytes for a bounded prefix), from one trie run over their paths: the
        decoder feeds every node (scored ancestors again), the head only the prefixes asked for."""
        out: dict[int, HeadOut] = {}
        paths = [self.path[p] for p in pids if self.path[p]]
        trie = build_trie(paths, every_node=True)
        want = np.full(1 + len(trie.token), -1, dtype=np.int64)
        want[1 + trie.end[trie.end >= 0]] = [p for p in pids if self.path[p]]
        if pids and not self.path[pids[0]]:
            want[0] = pids[0]  # the empty prefix: the context's last hidden state

        def head(hidden: torch.Tensor, blocks: list[tuple[int, int]], max_rows: int) -> None:
            rows = np.concatenate([np.arange(first, first + count) for first, count in blocks])
            take = np.flatnonzero(want[rows] >= 0)
            bound = np.array([self.bound[p] for p in want[rows[take]]], dtype=bool)
            for kind, step in ((False, self.lm.head_rows(max_rows)), (True, max(1, max_rows))):
                chosen = take[bound == kind]
                for lo in range(0, len(chosen), step):
                    self._score(hidden, chosen[lo : lo + step], want[rows[chosen[lo : lo + step]]], kind, out)

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
        device = self.lm.device
        state = torch.as_tensor([self.state[p] for p in pids], device=device)
        tok = self.tables.tokens[state]
        allowed = torch.empty(tok.shape, dtype=torch.float64, device=device)
        cover = torch.full((len(at), self.cover.depth), -math.inf, dtype=torch.float64, device=device)
        rows = hidden[torch.as_tensor(at, device=hidden.device)]
        if bound:
            assert self.columns is not None  # made in run() before any bounded prefix is scored
            bound_chunk(self.lm, rows, state, tok, self.cover, self.columns[1], allowed, cover)
            levels: list[np.ndarray | None] = [None] * len(pids)
        else:
            found = torch.empty((len(at), self.cover.depth + 1, 257), dtype=torch.float64, device=device)
            wanted = self.memory.wanted if self.memory is not None else set()
            whole = [i for i, p in enumerate(pids.tolist()) if self.path[p] in wanted]
            top, distributions = score_chunk(self.lm, rows, state, tok, self.cover, allowed, cover, found, whole)
            self.probable.update(top.unique().tolist())
            for i, distribution in distributions.items():
                self.memory.whole[self.path[int(pids[i])]] = distribution  # type: ignore[union-attr]  # wanted: a memory
            reach = np.isfinite(cover.cpu().numpy()).sum(axis=1) + 1  # the levels a row's tokens reach
            levels = [f[:r, :256] for f, r in zip(found.cpu().numpy(), reach.tolist(), strict=True)]
        for i, (p, a, c, v) in enumerate(zip(pids.tolist(), allowed.cpu().numpy(), cover.cpu().numpy(), levels,
                                             strict=True)):
            state = self.state[p]
            out[p] = (a[: self.width[state]], c, v)
            if self.memory is not None and v is not None:
                self.memory.keep(self.path[p], self.lattice.data, int(self.node[state]), self.tokens[state, : self.width[state]],
                                 out[p], rows[i])

    def choose(self, rows: int | None, slack: float) -> list[Step]:
        """The heaviest exits, as many as it takes for the rest to hold at most ``slack`` (log
        mass) together, and at most ``rows`` of them (None: all)."""
        if not self.exits:
            return []
        steps = np.array(list(self.exits), dtype=np.int64)
        mass = np.fromiter(self.exits.values(), float, len(self.exits))
        order = np.argsort(-mass, kind="stable")
        rest = np.logaddexp.accumulate(mass[order][::-1])[::-1]  # rest[k]: the mass of exits k, k + 1, ...
        needed = int(np.count_nonzero(rest > slack))
        picked = order[: needed if rows is None else min(needed, rows)]
        return sorted(map(tuple, steps[picked].tolist()))  # parents (lower ids) first

    def ways_on(self, steps: list[Step], room: int) -> list[Step]:
        """Past the end: the chosen exits, then, heaviest first while ``room`` lasts, each one's way
        on to the end (docs/design.md, "Ways on")."""
        order = sorted(range(len(steps)), key=lambda i: -self.exits[steps[i]])
        starts = [(len(self.state) + i, int(self.next[self.state[steps[i][0]], steps[i][1]])) for i in order]
        return with_ways(steps, starts, len(self.state), self.scored, self.ways, room, self.past_end)

    def first_ways(self, steps: list[Step], room: int) -> list[Step]:
        """After round 0, the chosen exits, then the first token's splits on to the end while
        ``room`` lasts (docs/design.md, "The search": after the context their mass runs on)."""
        starts = [(p, self.state[p]) for p in self.first_splits]
        return with_ways(steps, starts, len(self.state), self.scored, self.ways, room, self.past_end)

    def masses(self, started: float, done: bool, cancelled: bool = False) -> PrefixMasses:
        """The bounds now: the upper adds the mass of the exits ending before each byte and the
        bounded prefixes' covering bounds."""
        end = self.lattice.end
        by_node = np.full(end + 1, -math.inf)
        if self.exits:
            steps = np.array(list(self.exits), dtype=np.int64)
            states = self.next[np.asarray(self.state)[steps[:, 0]], steps[:, 1]]
            np.logaddexp.at(by_node, self.node[states], np.fromiter(self.exits.values(), float, len(self.exits)))
        reach = np.concatenate([[-math.inf], np.logaddexp.accumulate(by_node)[:-1]])
        upper = np.logaddexp(np.logaddexp(self.lower, reach), self.bounded)
        text = float(np.logaddexp.reduce(self.complete)) if self.complete else -math.inf
        text_upper = float(np.logaddexp.reduce([text, reach[-1], *self.complete_bound]))
        return PrefixMasses(self.lower.copy(), upper, text, text_upper, self.rounds, len(self.state), len(self.exits),
                            time.perf_counter() - started, done, *self.canonical(), self.next_lower.copy(),
                            self.open_mass(), cancelled, self.end_lower)

    def open_mass(self) -> np.ndarray:
        """Per byte j < len, the log mass that may still add to P(s<j, next byte c): the exits of
        exact prefixes and the bounded prefixes below exact ones (what lies below them is inside
        their mass), at nodes up to j."""
        by_node = np.full(self.lattice.end + self.past_end, -math.inf)
        bound = np.asarray(self.bound, dtype=bool)
        if self.exits:
            steps = np.array(list(self.exits), dtype=np.int64)
            mass = np.fromiter(self.exits.values(), float, len(self.exits))
            nodes = self.node[self.next[np.asarray(self.state)[steps[:, 0]], steps[:, 1]]]
            keep = ~bound[steps[:, 0]] & (nodes < len(by_node))
            np.logaddexp.at(by_node, nodes[keep], mass[keep])
        parents = np.asarray(self.parent)
        roots = np.flatnonzero(bound & ~bound[np.maximum(parents, 0)])
        np.logaddexp.at(by_node, self.node[np.asarray(self.state)[roots]], np.asarray(self.log_p)[roots])
        return np.logaddexp.accumulate(by_node)

    def canonical(self) -> tuple[np.ndarray, np.ndarray]:
        """Each canonical token's log p, and the canonical prefix row: at byte j, the canonical
        path's share of log P(s<j), log p of the canonical tokens that end before j plus the log
        mass of the tokens that begin with the bytes from the last of them to j (Pimentel &
        Meister's word probability, cut anywhere)."""
        canonical, nodes = self.lattice.canonical, self.lattice.canonical_nodes
        ids = list(self.canonical_covers)
        token = np.array([self.allowed[p][self.col[self.state[p], t]] for p, t in zip(ids, canonical, strict=True)])
        row = np.zeros(self.lattice.end + 1)
        before = np.concatenate([[0.0], np.cumsum(token)])
        for i, cover in enumerate(self.canonical_covers.values()):
            assert cover is not None  # round 0 scored every canonical prefix
            u, v = nodes[i], nodes[i + 1]
            row[u + 1 : v + 1] = before[i] + cover[: v - u]
        return token, row


def prefix_masses(lm: LM, lattice: Lattice, context: Sequence[int] | ContextState, *,
                  boundaries: Sequence[int] | np.ndarray | None = None, exact: bool = False, max_rows: int = MAX_ROWS,
                  tolerance: float = 0.01, time_budget: TimeBudget = None, progress: Progress | None = None,
                  should_stop: StopCheck | None = None, budget: int = DEFAULT_ENUMERATION_BUDGET,
                  bound_below: float | None = None, kv_bytes: int = KV_BYTES, past_end: bool = False,
                  memory: PrefixMemory | None = None) -> Iterator[PrefixMasses]:
    """The bounds after every round of the search; the last is final. ``boundaries``: the region
    boundaries (lattice bytes, 0 and the end included; default every byte) whose intervals the
    tolerance is about. The search scores at most ``budget`` prefixes; ``exact`` scores every
    prefix (TooManyPathsError past ``budget``). ``bound_below``: the relative mass below which an
    exit gets a bounding head (0: never; default BOUND_BELOW where bounding_pays, but past the
    end). ``kv_bytes``: what the search keeps of its prefixes' keys and values across rounds (0:
    nothing, every round feeds its prefixes' ancestors again). ``past_end``: the complete paths are prefixes too, so
    ``next_lower`` has a row for the byte after the text, and the tolerance and the clock are on
    its next-byte probabilities (:func:`end_probabilities`) instead of the regions. ``memory``:
    what searches of texts this one begins with kept, under this model and context (their
    prefixes are this search's round 0 too); it keeps this search's (its KV store replaces
    ``kv_bytes``). progress hears each round's passes (tokens fed, of the round's)."""
    if exact:
        check_exact(lattice, budget)
    started = time.perf_counter()
    clock = SearchClock(tolerance, time_budget)
    if bound_below is None:  # past the end a bounded prefix's mass stays open at the last byte: none there
        bound_below = BOUND_BELOW if bounding_pays(lm) and not past_end else 0.0
    search = _Search(lm, lattice, lm.state_of(context), 0.0 if exact else bound_below, kv_bytes, past_end, memory)
    cuts = np.asarray(boundaries if boundaries is not None else range(lattice.end + 1), dtype=np.int64)

    def user_stop() -> bool:
        return should_stop is not None and bool(should_stop())

    steps, rows, per_row = search.seed(), FIRST_ROWS, None
    widths: np.ndarray | None = None
    while True:
        began = time.perf_counter()
        search.run(steps, progress)
        if search.rounds > 1:  # round 0 scores the whole canonical tokenization: not a later round's rate
            per_row = (time.perf_counter() - began) / max(len(steps), 1)
        now = search.masses(started, False)
        if past_end:
            point, low, high = end_probabilities(now)
            before, widths = widths, high - low
            clock.round(now.seconds, point, widths)
        else:
            before, widths = widths, interval_widths(now.lower, now.upper, cuts)
            clock.round(now.seconds, now.lower[cuts[:-1]] - now.lower[cuts[1:]], widths)
        # every exit can widen the last region's bottom end against the text's end (the mass below
        # an exit may run through every byte after it): the rest must be small beside P(s<end)
        slack = math.log(math.expm1(tolerance) / 4) + float(now.lower[-1]) if not exact else -math.inf
        room = budget - len(search.state)
        cap = None if exact else clock.rows(now.seconds, max(0, min(rows, max_rows, room)), per_row)
        steps = search.choose(cap, slack)
        if past_end and cap is not None:
            steps = search.ways_on(steps, cap - len(steps))
        if search.rounds == 1 and cap is not None and not past_end:  # within a server's cap (past the end: ways_on)
            steps = search.first_ways(steps, min(max_rows, room) - len(steps))
        rows *= 2
        # past the end, a round may leave a heavy exit's interval as wide as before: only the widths count
        ended = why_ended(exact, bool(steps), room > 0, widths, None if past_end else before, clock, user_stop)
        if ended:
            yield _timed(search.masses(started, True, ended == "stopped"), clock, ended, search.kv.peak_bytes)
            return
        yield _timed(now, clock, "", search.kv.peak_bytes)


def _timed(masses: PrefixMasses, clock: SearchClock, ended: str, kv_peak: int) -> PrefixMasses:
    """The bounds with the clock's measures, why the search ended and its KV store's peak."""
    return replace(masses, settled_at=clock.settled_at, ends_at=clock.ends_at, ended=ended, kv_peak_bytes=kv_peak)

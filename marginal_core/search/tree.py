"""The prefixes one search has scored over a lattice, and what they add up to (docs/design.md,
"Surprisal"): each prefix's parent, arc, node state and log p (an upper bound where it is
``bound``: a bounding head scored it or an ancestor), the lower bounds the exact prefixes'
covering masses add up to and the bounded prefixes' covering bounds, per byte; the exits (arcs
whose extension is not scored) with their mass; the complete paths' log p. No model: the heads
come from ``feeding``."""

from __future__ import annotations

import math
import time

import numpy as np

from marginal_core.lattice.graph import Lattice
from marginal_core.search.masses import PrefixMasses
from marginal_core.search.memory import HeadOut
from marginal_core.search.ways import Step


class NodeArrays:
    """A lattice's node automaton as numpy arrays: per state its arcs' tokens, next states, width,
    whether it is final, its node, and each (state, token)'s column."""

    def __init__(self, lattice: Lattice, tokens: np.ndarray, nxt: np.ndarray, width: np.ndarray,
                 final: np.ndarray) -> None:
        self.tokens, self.next, self.width, self.final = tokens, nxt, width, final
        self.node = np.asarray(lattice.nodes, dtype=np.int64)
        self.col = {(s, int(t)): c for s in range(len(self.node)) for c, t in enumerate(tokens[s, : width[s]])}


class ScoredTree:
    """The scored prefixes (ids in the order scored, parents first) and their sums. ``past_end``:
    the complete paths are prefixes too (the byte after the text is asked for), so the next-byte
    sums have a row for it and the arcs that end the text are exits."""

    def __init__(self, lattice: Lattice, arrays: NodeArrays, past_end: bool, bound_below: float) -> None:
        self.lattice, self.a, self.past_end = lattice, arrays, past_end
        self.bound_below = math.log(bound_below) if bound_below > 0 else -math.inf
        self.state: list[int] = []
        self.parent: list[int] = []
        self.log_p: list[float] = []
        self.path: list[tuple[int, ...]] = []
        self.allowed: list[np.ndarray] = []
        self.bound: list[bool] = []
        self.scored: dict[Step, int] = {}  # (parent, column) -> prefix id, scored or in the round under way
        self.exits: dict[Step, float] = {}  # (parent, column) -> log mass, for exits not at the end
        self.lower = np.full(lattice.end + 1, -math.inf)
        self.lower[0] = 0.0
        self.bounded = np.full(lattice.end + 1, -math.inf)
        self.next_lower = np.full((lattice.end + past_end, 256), -math.inf)
        # the canonical tokenization's prefixes' ids, shortest first, and their covering masses once scored
        self.canonical_covers: dict[int, np.ndarray | None] = {}
        self.complete: list[float] = []
        self.complete_bound: list[float] = []
        self.end_lower = -math.inf  # past the end: what the scored complete paths give no byte
        self.rounds = 0

    def __len__(self) -> int:
        return len(self.state)

    def open(self, steps: list[Step]) -> range:
        """Take the prefixes ``steps`` (parents first; ids count on from the ones scored) into the
        tree before their heads are scored: their node states, paths and whether they are bound
        (below a bounded prefix, or lighter than bound_below beside P(s<their node))."""
        first = len(self.state)
        for i, (parent, col) in enumerate(steps):
            self.parent.append(parent)
            if parent < 0:
                self.state.append(0)
                self.path.append(())
                self.bound.append(False)
                continue
            state = int(self.a.next[self.state[parent], col])
            mass = self.exits.pop((parent, col), None)
            self.state.append(state)
            self.path.append(self.path[parent] + (int(self.a.tokens[self.state[parent], col]),))
            self.bound.append(self.bound[parent] or (mass is not None
                                                     and mass - self.lower[self.a.node[state]] < self.bound_below))
            self.scored[parent, col] = first + i
        return range(first, len(self.state))

    def close(self, pids: range, steps: list[Step], heads: dict[int, HeadOut]) -> None:
        """The opened prefixes' heads: their log p, covering masses, next-byte masses and exits."""
        for pid, (parent, col) in zip(pids, steps, strict=True):
            self.log_p.append(0.0 if parent < 0 else self.log_p[parent] + float(self.allowed[parent][col]))
            allowed, cover, levels = heads[pid]
            self.allowed.append(allowed)
            self._add(pid, cover, levels)
        self.rounds += 1

    def _add(self, pid: int, cover: np.ndarray, levels: np.ndarray | None) -> None:
        """A scored prefix's covering masses to the bytes ahead of it (bounds, for a bounded one),
        its next-byte masses (an exact one) and its exits."""
        a, state, log_p, bound = self.a, self.state[pid], self.log_p[pid], self.bound[pid]
        node = int(a.node[state])
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
        for c in range(int(a.width[state])):
            mass = log_p + float(self.allowed[pid][c])
            final = a.final[a.next[state, c]]
            if final:
                (self.complete_bound if bound else self.complete).append(mass)
            if (not final or self.past_end) and (pid, c) not in self.scored and mass > -math.inf:
                self.exits[pid, c] = mass

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

    def masses(self, started: float, done: bool) -> PrefixMasses:
        """The bounds now: the upper adds the mass of the exits ending before each byte and the
        bounded prefixes' covering bounds."""
        by_node = np.full(self.lattice.end + 1, -math.inf)
        if self.exits:
            np.logaddexp.at(by_node, self._exit_nodes(), np.fromiter(self.exits.values(), float, len(self.exits)))
        reach = np.concatenate([[-math.inf], np.logaddexp.accumulate(by_node)[:-1]])
        upper = np.logaddexp(np.logaddexp(self.lower, reach), self.bounded)
        text = float(np.logaddexp.reduce(self.complete)) if self.complete else -math.inf
        text_upper = float(np.logaddexp.reduce([text, reach[-1], *self.complete_bound]))
        return PrefixMasses(self.lower.copy(), upper, text, text_upper, self.rounds, len(self.state), len(self.exits),
                            time.perf_counter() - started, done, *self.canonical(), self.next_lower.copy(),
                            self.open_mass(), next_end=self.end_lower)

    def _exit_nodes(self) -> np.ndarray:
        """The node each exit ends at, in the exits' order."""
        steps = np.array(list(self.exits), dtype=np.int64)
        return self.a.node[self.a.next[np.asarray(self.state)[steps[:, 0]], steps[:, 1]]]

    def open_mass(self) -> np.ndarray:
        """Per byte j < len, the log mass that may still add to P(s<j, next byte c): the exits of
        exact prefixes and the bounded prefixes below exact ones (what lies below them is inside
        their mass), at nodes up to j."""
        by_node = np.full(self.lattice.end + self.past_end, -math.inf)
        bound = np.asarray(self.bound, dtype=bool)
        if self.exits:
            parents = np.array([p for p, _ in self.exits], dtype=np.int64)
            mass = np.fromiter(self.exits.values(), float, len(self.exits))
            nodes = self._exit_nodes()
            keep = ~bound[parents] & (nodes < len(by_node))
            np.logaddexp.at(by_node, nodes[keep], mass[keep])
        parents = np.asarray(self.parent)
        roots = np.flatnonzero(bound & ~bound[np.maximum(parents, 0)])
        np.logaddexp.at(by_node, self.a.node[np.asarray(self.state)[roots]], np.asarray(self.log_p)[roots])
        return np.logaddexp.accumulate(by_node)

    def canonical(self) -> tuple[np.ndarray, np.ndarray]:
        """Each canonical token's log p, and the canonical prefix row: at byte j, the canonical
        path's share of log P(s<j), log p of the canonical tokens that end before j plus the log
        mass of the tokens that begin with the bytes from the last of them to j (Pimentel &
        Meister's word probability, cut anywhere)."""
        canonical, nodes = self.lattice.canonical, self.lattice.canonical_nodes
        ids = list(self.canonical_covers)
        token = np.array([self.allowed[p][self.a.col[self.state[p], t]] for p, t in zip(ids, canonical, strict=True)])
        row = np.zeros(self.lattice.end + 1)
        before = np.concatenate([[0.0], np.cumsum(token)])
        for i, cover in enumerate(self.canonical_covers.values()):
            assert cover is not None  # round 0 scored every canonical prefix
            u, v = nodes[i], nodes[i + 1]
            row[u + 1 : v + 1] = before[i] + cover[: v - u]
        return token, row

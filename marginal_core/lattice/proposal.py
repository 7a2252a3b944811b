"""The proxy's proposal automaton (docs/design.md, point 11): the lattice crossed with "still on
the canonical path", trimmed to the states from which an allowed path goes on. Pure numpy, built
once per lattice and kept with it, like its counting tables."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from marginal_core.lattice.graph import Lattice
from marginal_core.lattice.paths import Path


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


def proposal_of(lattice: Lattice, include_canonical: bool = False) -> Proposal:
    """The lattice's proposal automaton, built once per lattice and setting."""
    return lattice.memo(("proposal", include_canonical), lambda: build_proposal(lattice, include_canonical))

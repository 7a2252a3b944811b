"""Which prefixes the prefix search scores (docs/design.md, "Surprisal" and "What comes next"):
how many an exact search has, whether bounding heads pay on a model, and past the end each chosen
exit's way on to the end of the text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from marginal_core.ground.errors import TooManyPathsError
from marginal_core.lattice.graph import DEFAULT_ENUMERATION_BUDGET, Lattice, canonical_ids
from marginal_core.lattice.tokenizer import TokenizerLike

if TYPE_CHECKING:
    from marginal_core.lm.adapter import LM

Step = tuple[int, int]  # a prefix as (its parent prefix, the column of its arc in the parent's node)


def prefix_counts(lattice: Lattice) -> dict[int, int]:
    """The number of paths from byte 0 to each node (exact integers)."""
    counts = dict.fromkeys(lattice.nodes.tolist(), 0)
    counts[0] = 1
    for node in lattice.nodes.tolist():
        arcs = lattice.out_arcs(node)
        for end in lattice.arc_end[arcs.start : arcs.stop].tolist():
            counts[end] += counts[node]
    return counts


def bounding_pays(lm: LM) -> bool:
    """Whether bounding heads save time on this model: its head holds more weights than the rest
    (Gemma 3 270M: 168M against 100M), so a prefix's full head costs more than its decoder pass.
    Where the decoder dominates (SmolLM2: 28M against 107M) their looser bounds cost more
    prefixes than the heads they save."""
    head = sum(p.numel() for p in lm.head.parameters())
    return head > sum(p.numel() for p in lm.model.parameters()) - head


def check_exact(lattice: Lattice, budget: int = DEFAULT_ENUMERATION_BUDGET) -> int:
    """The prefixes an exact search scores (every path to a node before the end);
    TooManyPathsError past the budget."""
    counts = prefix_counts(lattice)
    prefixes = sum(c for n, c in counts.items() if n < lattice.end)
    if prefixes > budget:
        raise TooManyPathsError(f"the text has {prefixes:,} prefixes to score, over the budget of {budget:,}; "
                                "use the search's bounds (method='search')")
    return prefixes


class Ways:
    """Each node state's way on to the end, found once (the node automaton's tables)."""

    def __init__(self, lattice: Lattice, tokenizer: TokenizerLike, node: np.ndarray, nxt: np.ndarray,
                 width: np.ndarray, final: np.ndarray, col: dict[tuple[int, int], int]) -> None:
        self.lattice, self.tokenizer, self.node, self.next, self.width, self.final, self.col = (
            lattice, tokenizer, node, nxt, width, final, col)
        self.found: dict[int, list[int]] = {}

    def way_on(self, state: int) -> list[int]:
        """The columns from a node state to the end along the tokenizer's own tokenization of
        the rest of the text (the way the model most likely goes on), or where that is not a
        path from here (the rest not whole characters), the longest arc at every node."""
        if state not in self.found:
            rest, cols = self.lattice.data[int(self.node[state]) :], []
            try:
                ids = canonical_ids(self.tokenizer, rest.decode("utf-8"))
            except UnicodeDecodeError:
                ids = []
            at = state
            for t in ids:
                c = self.col.get((at, t))
                if c is None:
                    break
                cols.append(c)
                at = int(self.next[at, c])
            while not self.final[at]:
                arcs = self.next[at, : self.width[at]]
                cols.append(int(np.argmax(self.node[arcs])))
                at = int(arcs[cols[-1]])
            self.found[state] = cols
        return self.found[state]


def with_ways(steps: list[Step], starts: list[tuple[int, int]], first: int, scored: dict[Step, int], ways: Ways,
              room: int, past_end: bool) -> list[Step]:
    """``steps`` (their prefix ids count on from ``first``), then each start's way on to the end
    while ``room`` lasts: a start is a prefix id (scored, or among ``steps``) and the node state
    it ends at. What is scored or in steps already is not taken twice; the complete paths only
    past the end (before it they are no prefixes). Parents first."""
    out = list(steps)
    at = {step: first + i for i, step in enumerate(steps)}
    for pid, state in starts:
        for c in ways.way_on(state):
            state = int(ways.next[state, c])
            if room <= 0 or (ways.final[state] and not past_end):
                break
            if (pid, c) in scored or (pid, c) in at:
                pid = scored.get((pid, c), at.get((pid, c), -1))
                continue
            out.append((pid, c))
            at[pid, c] = first + len(out) - 1
            pid = at[pid, c]
            room -= 1
    return out

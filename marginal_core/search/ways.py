"""Past a text's end, each chosen exit's way on to the end of the text (docs/design.md, "Ways on"):
the prefixes the search scores after an exit, along the tokenizer's own tokenization of the rest."""

from __future__ import annotations

import numpy as np

from marginal_core.lattice.graph import Lattice, canonical_ids
from marginal_core.lattice.tokenizer import TokenizerLike

Step = tuple[int, int]  # a prefix as (its parent prefix, the column of its arc in the parent's node)


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

"""How many prefixes a text has, and what an exact search scores (docs/design.md, "Surprisal"):
exact counts and the budget check; whether bounding heads pay on a model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from marginal_core.ground.errors import TooManyPathsError
from marginal_core.lattice.graph import DEFAULT_ENUMERATION_BUDGET, Lattice

if TYPE_CHECKING:
    from marginal_core.lm.adapter import LM


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

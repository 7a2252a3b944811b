"""Which arcs a drawing shows: their roles (canonical, off-by-one, other), whether they fit in
the length bound L, and windows of canonical tokens over a long text."""

from __future__ import annotations

import numpy as np

from marginal_core.lattice.graph import Lattice

# Beyond this many arcs a drawing is an unreadable wall: callers draw a window instead.
MAX_DRAW_ARCS = 250

# Wider than this many nodes, a drawing scaled to a page's width has unreadable labels: the app
# draws a window of the text by default.
READABLE_NODES = 16



def arc_roles(lattice: Lattice) -> np.ndarray:
    """Per arc: "canonical", "off_by_one" (an arc of a one-token split) or "other"."""
    roles = np.full(lattice.num_arcs, "other", dtype=object)
    for _, first, second in lattice.splits:
        roles[first] = roles[second] = "off_by_one"
    node = 0
    for token in lattice.canonical:
        for arc in lattice.out_arcs(node):
            if int(lattice.arc_token[arc]) == token:
                roles[arc] = "canonical"
                node = int(lattice.arc_end[arc])
                break
    return roles



def arcs_in_bound(lattice: Lattice, max_len: int | None) -> np.ndarray:
    """Per arc: whether it lies on some path of at most max_len tokens (all True for None).

    An arc i→j is on such a path iff the fewest tokens to reach i, plus one, plus the fewest
    tokens from j to the end is at most max_len.
    """
    if max_len is None:
        return np.ones(lattice.num_arcs, dtype=bool)
    prefix, suffix = lattice.shortest
    return prefix[lattice.arc_start] + 1 + suffix[lattice.arc_end] <= max_len



def token_window(lattice: Lattice, first: int, count: int) -> tuple[int, int]:
    """The byte span of canonical tokens first .. first + count - 1 (clamped to the text)."""
    nodes = lattice.canonical_nodes
    first = max(0, min(first, len(nodes) - 2))
    last = max(first + 1, min(first + count, len(nodes) - 1))
    return nodes[first], nodes[last]



def window_arcs(lattice: Lattice, window: tuple[int, int] | None) -> np.ndarray:
    """Per arc: whether it lies inside the byte window [start, end] (all True for None)."""
    if window is None:
        return np.ones(lattice.num_arcs, dtype=bool)
    lo, hi = window
    return (lattice.arc_start >= lo) & (lattice.arc_end <= hi)



def window_nodes(lattice: Lattice, window: tuple[int, int] | None) -> int:
    """How many lattice nodes lie inside the byte window (all of them for None)."""
    if window is None:
        return lattice.num_nodes
    nodes = lattice.nodes
    return int(((nodes >= window[0]) & (nodes <= window[1])).sum())



def fit_window(
    lattice: Lattice, max_arcs: int = MAX_DRAW_ARCS, first: int = 0, max_nodes: int | None = None
) -> int:
    """How many canonical tokens from token ``first`` on fit in one drawing.

    A drawing fits when it has at most max_arcs arcs and (if given) at most max_nodes nodes.
    Always at least one token (a single token can still be drawn when its span holds more arcs;
    the caller then gets TooLargeToDrawError from lattice_graph).
    """
    total = len(lattice.canonical)
    count = 1
    while first + count < total:
        window = token_window(lattice, first, count + 1)
        if int(window_arcs(lattice, window).sum()) > max_arcs:
            break
        if max_nodes is not None and window_nodes(lattice, window) > max_nodes:
            break
        count += 1
    return count



def default_window(lattice: Lattice, first: int = 0) -> tuple[int, int] | None:
    """The window a drawing shows unless told otherwise, as the app's lattice page picks it: None
    (the whole lattice) while it is readable, else the canonical tokens from ``first`` that fit."""
    if lattice.num_arcs <= MAX_DRAW_ARCS and lattice.num_nodes <= READABLE_NODES:
        return None
    return token_window(lattice, first, fit_window(lattice, first=first, max_nodes=READABLE_NODES))

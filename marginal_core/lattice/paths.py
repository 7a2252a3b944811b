"""Paths of a lattice: many paths in one array, and the tables that count, rank and unrank them.

A :class:`PathIndex` holds, for one length bound, the number of paths from every node to the
end and the cumulative counts over each node's arcs, so that paths are ranked and unranked in
the lattice's fixed arc order (docs/design.md, points 3 and 10).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

import numpy as np

from marginal_core.ground.errors import TooManyPathsError
from marginal_core.lattice import bigint


class Graph(Protocol):
    """What the path tables read of a lattice (``marginal_core.lattice.graph.Lattice`` is one): byte
    offsets as nodes, arcs as (start, end, token), the canonical path and its splits."""

    @property
    def arc_start(self) -> np.ndarray: ...

    @property
    def arc_end(self) -> np.ndarray: ...

    @property
    def arc_token(self) -> np.ndarray: ...

    @property
    def out_ptr(self) -> np.ndarray: ...

    @property
    def canonical(self) -> tuple[int, ...]: ...

    @property
    def end(self) -> int: ...

    @property
    def nodes(self) -> np.ndarray: ...

    @property
    def canonical_nodes(self) -> tuple[int, ...]: ...

    @property
    def shortest(self) -> tuple[np.ndarray, np.ndarray]: ...

    @property
    def splits(self) -> tuple[tuple[int, int, int], ...]: ...

    def out_arcs(self, node: int) -> range: ...


__all__ = ["MAX_TABLE_CELLS", "Path", "PathBatch", "PathIndex"]

Path = tuple[int, ...]
MAX_TABLE_CELLS = 20_000_000


class PathIndex:
    """Path counts and cumulative arc tables of a lattice for one length bound.

    A state is (node, budget): the paths from the node to the end with at most ``budget``
    tokens. Only budgets that some path can reach with some path left are stored (a band per
    node), which keeps the table small for bounds near the canonical length. The unbounded index
    has one budget per node and never spends it.
    """

    def __init__(self, lattice: Graph, max_len: int | None) -> None:
        self.lattice, self.max_len = lattice, max_len
        self.bounded = max_len is not None
        self._dec = 1 if self.bounded else 0
        self.min_prefix, self.min_suffix = lattice.shortest
        self._build_tables()

    def _band(self, node: int) -> tuple[int, int]:
        if self.max_len is None:
            return 0, 0
        return int(self.min_suffix[node]), self.max_len - int(self.min_prefix[node])

    def _build_tables(self) -> None:
        lat = self.lattice
        cells = sum(
            max(0, hi - lo + 1) * len(lat.out_arcs(int(n)))
            for n in lat.nodes
            for lo, hi in [self._band(int(n))]
        )
        if cells > MAX_TABLE_CELLS:
            raise TooManyPathsError(
                f"counting paths of at most {self.max_len} tokens needs {cells:,} table cells "
                f"(limit {MAX_TABLE_CELLS:,}); use a shorter text or a bound nearer the canonical length"
            )
        self.lo: dict[int, int] = {}
        self.counts: dict[int, np.ndarray] = {}
        self.cum: dict[int, np.ndarray] = {}
        end_lo, end_hi = self._band(lat.end)
        self.lo[lat.end] = end_lo
        self.counts[lat.end] = np.array([1] * max(0, end_hi - end_lo + 1), dtype=object)
        for node in lat.nodes[::-1].tolist():
            if node == lat.end:
                continue
            lo, hi = self._band(node)
            arcs = lat.out_arcs(node)
            budgets = np.arange(lo, hi + 1)
            contrib = np.zeros((len(budgets), len(arcs)), dtype=object)
            for col, arc in enumerate(arcs):
                target = int(lat.arc_end[arc])
                rows = budgets - self._dec - self.lo[target]
                ok = rows >= 0
                contrib[ok, col] = self.counts[target][rows[ok]]
            cum = np.zeros_like(contrib)
            if len(arcs) > 1:
                cum[:, 1:] = np.cumsum(contrib[:, :-1], axis=1)
            self.lo[node] = lo
            self.cum[node] = cum
            self.counts[node] = cum[:, -1] + contrib[:, -1] if len(budgets) else contrib[:, 0]
        top = self.max_len if self.max_len is not None else 0
        row = top - self.lo[0]
        self.total = int(self.counts[0][row]) if 0 <= row < len(self.counts[0]) else 0
        self.limbs = bigint.width(max(self.total, 1))

    @cached_property
    def _plan(self) -> list[tuple[int, int, int, np.ndarray | None]]:
        """Per node with out arcs: (node, first arc, band start, cumulative limb table or None).

        Nodes with a single arc need no comparison: their table is None.
        """
        lat, plan = self.lattice, []
        for node in lat.nodes.tolist():
            if node == lat.end:
                continue
            arcs = lat.out_arcs(node)
            table = bigint.to_limbs(self.cum[node], self.limbs) if len(arcs) > 1 else None
            plan.append((node, arcs.start, self.lo[node], table))
        return plan

    @cached_property
    def _steps(self) -> dict[tuple[int, int], tuple[int, int]]:
        """(node, token id) -> (column in the node's table, next node), for ranking."""
        lat = self.lattice
        ptr = lat.out_ptr.tolist()
        return {
            (s, t): (a - ptr[s], e)
            for a, (s, e, t) in enumerate(
                zip(lat.arc_start.tolist(), lat.arc_end.tolist(), lat.arc_token.tolist())
            )
        }

    @cached_property
    def _cum_rows(self) -> dict[int, list[list[int]]]:
        """The cumulative tables as nested Python lists: fast scalar access for ranking."""
        return {node: table.tolist() for node, table in self.cum.items()}

    def rank(self, path: Path) -> int:
        """The rank of a path; ValueError if it is not a path within the bound."""
        lat, steps, rows = self.lattice, self._steps, self._cum_rows
        node, depth, rank = 0, 0, 0
        for token in path:
            step = steps.get((node, token))
            row = self._row(node, depth) if step is not None else -1
            if step is None or not 0 <= row < len(rows.get(node, ())):
                raise ValueError(f"{path} is not a path of this lattice within the bound")
            rank += rows[node][row][step[0]]
            node, depth = step[1], depth + 1
        if node != lat.end:
            raise ValueError(f"{path} stops at byte {node}, before the end {lat.end}")
        return rank

    def off_by_one_ranks(self) -> list[int]:
        """Ranks of ``lattice.off_by_one()`` paths, in order, in O(1) each.

        A split path shares the canonical prefix (at its own depth) and the canonical suffix
        (one token deeper), so prefix and suffix sums of the canonical arcs' table entries give
        every rank. Only valid when the bound admits the split paths (canonical length + 1).
        """
        lat, steps, rows = self.lattice, self._steps, self._cum_rows
        nodes, canon = lat.canonical_nodes, lat.canonical
        if self.max_len is not None and len(canon) + 1 > self.max_len:
            raise ValueError("off-by-one paths are longer than the length bound")

        def entry(node: int, depth: int, column: int) -> int:
            return rows[node][self._row(node, depth)][column]

        columns = [steps[(node, token)][0] for node, token in zip(nodes, canon)]
        before = [0]
        for q, (node, col) in enumerate(zip(nodes, columns)):
            before.append(before[-1] + entry(node, q, col))
        after = [0]
        for q in range(len(canon) - 1, -1, -1):
            after.append(after[-1] + entry(nodes[q], q + 1, columns[q]))
        after.reverse()
        ptr = lat.out_ptr.tolist()
        ranks = []
        for pos, first, second in lat.splits:
            middle = int(lat.arc_end[first])
            ranks.append(
                before[pos]
                + entry(nodes[pos], pos, first - ptr[nodes[pos]])
                + entry(middle, pos + 1, second - ptr[middle])
                + after[pos + 1]
            )
        return ranks

    def _row(self, node: int, depth: int) -> int:
        """The table row of a node for a path that has used depth tokens so far."""
        return self.max_len - depth - self.lo[node] if self.max_len is not None else 0

    def unrank(self, ranks: np.ndarray) -> PathBatch:
        """Paths for an array of ranks in limb form, all at once.

        One sweep over the nodes in byte order moves every sample sitting at a node along the
        arc its remaining rank selects, then the chosen arcs are scattered into place.
        """
        lat, k = self.lattice, len(ranks)
        at = np.zeros(k, dtype=np.int64)
        depth = np.zeros(k, dtype=np.int64)
        rest = ranks.copy()
        visits, steps, chosen = [], [], []
        for node, first, lo, table in self._plan:
            idx = np.flatnonzero(at == node)
            if not idx.size:
                continue
            step = depth[idx]
            if table is None:
                arcs = np.full(idx.size, first)
            else:
                rows = table[self.max_len - lo - step] if self.max_len is not None else table[np.zeros_like(step)]
                left = rest[idx]
                choice = np.zeros(idx.size, dtype=np.int64)
                for col in range(1, rows.shape[1]):
                    choice += bigint.less_equal(rows[:, col], left)
                rest[idx] = bigint.subtract(left, rows[np.arange(idx.size), choice])
                arcs = first + choice
            visits.append(idx)
            steps.append(step)
            chosen.append(arcs)
            depth[idx] = step + 1
            at[idx] = lat.arc_end[arcs]
        offsets = np.concatenate([[0], np.cumsum(depth)])
        ids = np.empty(int(offsets[-1]), dtype=np.int64)
        if visits:
            where = offsets[np.concatenate(visits)] + np.concatenate(steps)
            ids[where] = lat.arc_token[np.concatenate(chosen)]
        return PathBatch(ids, offsets)


@dataclass(frozen=True, eq=False)
class PathBatch:
    """Many paths in one flat array: path i is ``ids[offsets[i]:offsets[i + 1]]``."""

    ids: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def __getitem__(self, i: int) -> Path:
        return tuple(self.ids[self.offsets[i] : self.offsets[i + 1]].tolist())

    def distinct(self) -> int:
        """How many different paths the batch holds, counted in arrays (no Python tuple per path:
        a live page counts thousands of long paths after every chunk)."""
        lengths, count = self.lengths, 0
        for size in np.unique(lengths).tolist():  # paths of different lengths differ
            starts = self.offsets[:-1][lengths == size]
            if size == 0 or len(starts) == 1:
                count += 1
            else:
                count += len(np.unique(self.ids[starts[:, None] + np.arange(size)], axis=0))
        return count

    def tolist(self) -> list[Path]:
        """The paths as tuples of token ids."""
        flat, bounds = self.ids.tolist(), self.offsets.tolist()
        return [tuple(flat[a:b]) for a, b in zip(bounds, bounds[1:])]

    @classmethod
    def concat(cls, batches: list[PathBatch]) -> PathBatch:
        """One batch holding the paths of several, in order."""
        ids = np.concatenate([b.ids for b in batches])
        lengths = np.concatenate([b.lengths for b in batches])
        return cls(ids, np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]))

    @classmethod
    def from_paths(cls, paths: list[Path]) -> PathBatch:
        lengths = [len(p) for p in paths]
        ids = np.fromiter((t for p in paths for t in p), dtype=np.int64, count=sum(lengths))
        return cls(ids, np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]))

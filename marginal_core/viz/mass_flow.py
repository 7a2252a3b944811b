"""Where the mass flows through a lattice: each arc's share of the scored paths' probability and
the best scored path through it (numpy only; ``viz.lattice_graph(flow=...)`` draws it)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from marginal_core.lattice.graph import Lattice
from marginal_core.lattice.paths import Path, PathBatch

if TYPE_CHECKING:
    from marginal_core.estimators.estimate_result import Estimate

__all__ = ["MassFlow", "flow_of", "mass_flow"]


@dataclass(frozen=True, eq=False)
class MassFlow:
    """Per arc: the share of the scored paths' mass on paths through it, and the most probable
    scored path through it (None, share 0, where no scored path uses the arc).

    ``lower_bound`` marks scores of some paths only (a method's samples): the shares are of the
    mass found, whose total is a lower bound on the marginal; otherwise every path was scored.
    """

    share: np.ndarray
    best: tuple[Path | None, ...]
    best_log_p: np.ndarray
    log_total: float
    num_paths: int
    source: str
    lower_bound: bool


def _path_arcs(lattice: Lattice, paths: PathBatch) -> np.ndarray:
    """The lattice arc each token of each path takes (flat, aligned with ``paths.ids``)."""
    tokens, first = np.unique(lattice.arc_token, return_index=True)
    widths = (lattice.arc_end - lattice.arc_start)[first]
    ids = paths.ids.astype(np.int64)
    at = np.clip(np.searchsorted(tokens, ids), 0, max(len(tokens) - 1, 0))
    if len(ids) and not np.array_equal(tokens[at], ids):
        raise ValueError("a path holds a token that is on no arc of this lattice")
    bounds = np.concatenate([[0], np.cumsum(widths[at])])  # byte offsets, counted over the whole batch
    starts = bounds[:-1] - np.repeat(bounds[paths.offsets[:-1]], paths.lengths)
    radix = int(lattice.arc_token.max(initial=0)) + 1
    keys = lattice.arc_start.astype(np.int64) * radix + lattice.arc_token
    order = np.argsort(keys)
    found = np.searchsorted(keys[order], starts * radix + ids)
    arcs = order[np.clip(found, 0, max(len(order) - 1, 0))]
    if len(ids) and not np.array_equal(keys[arcs], starts * radix + ids):
        raise ValueError("a path is not a path of this lattice")
    return arcs


def mass_flow(
    lattice: Lattice, paths: Sequence[Path], log_p: Sequence[float], *, source: str = "exact",
    lower_bound: bool = False,
) -> MassFlow:
    """Each arc's share of the mass on the given scored paths (repeats counted once) and the
    best of them through it: share = sum of p over the paths using the arc / sum over all."""
    first: dict[Path, float] = {}
    for path, lp in zip(map(tuple, paths), log_p):
        first.setdefault(path, float(lp))
    unique = list(first)
    scores = np.fromiter(first.values(), dtype=np.float64, count=len(unique))
    batch = PathBatch.from_paths(unique)
    arcs = _path_arcs(lattice, batch)
    owner = np.repeat(np.arange(len(unique)), batch.lengths)
    log_total = float(np.logaddexp.reduce(scores)) if len(scores) else -math.inf
    weight = np.exp(scores - log_total) if len(scores) else scores
    # a share is at most 1 (an arc every path uses); the sum of the weights can round past it
    share = np.minimum(np.bincount(arcs, weights=weight[owner], minlength=lattice.num_arcs), 1.0)
    order = np.argsort(-scores[owner], kind="stable")  # each arc's best path comes first
    used, at = np.unique(arcs[order], return_index=True)
    best: list[Path | None] = [None] * lattice.num_arcs
    best_log_p = np.full(lattice.num_arcs, -math.inf)
    for arc, path in zip(used.tolist(), owner[order][at].tolist()):
        best[arc], best_log_p[arc] = unique[path], scores[path]
    return MassFlow(share, tuple(best), best_log_p, log_total, len(unique), source, lower_bound)


def flow_of(lattice: Lattice, estimate: Estimate) -> MassFlow:
    """The mass flow of an estimate's distinct scored paths plus the canonical one: of every
    path for exact, else of the paths the method found (a lower bound)."""
    paths = [lattice.canonical, *estimate.paths.tolist()]
    log_p = [estimate.log_p_canonical, *np.asarray(estimate.log_p, dtype=float).tolist()]
    return mass_flow(lattice, paths, log_p, source=estimate.method, lower_bound=estimate.method != "exact")

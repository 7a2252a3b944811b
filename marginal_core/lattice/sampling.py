"""Samplers that need no language model: uniform without replacement, and Algorithm 1.

Uniform sampling draws distinct ranks and unranks them (paper section 6.1). Excluded paths are
removed exactly: their ranks are skipped, so no draw is ever rejected. Draws come from a partial
Fisher-Yates shuffle of the rank range, which makes the first k samples of a seed the same
whatever k is asked for: sample sets are nested, so the lattice estimate only grows with k.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np

from marginal_core.ground.progress import StopCheck
from marginal_core.lattice import bigint
from marginal_core.lattice.graph import Lattice
from marginal_core.lattice.paths import Path, PathBatch, PathIndex

SampleKind = Literal["canonical", "off_by_one", "uniform", "proxy", "beam", "exact"]
# A block of lattice_sample_blocks: about this many token ids, and at most this many paths.
BLOCK_IDS = 2_000_000
BLOCK_PATHS = 1_024


@dataclass(frozen=True)
class Sample:
    """One tokenization and the sampler that produced it."""

    ids: Path
    kind: SampleKind


@dataclass(frozen=True, eq=False)
class SampleSet:
    """Tokenizations in sample order, each with the sampler that produced it."""

    paths: PathBatch
    kinds: np.ndarray

    def __len__(self) -> int:
        return len(self.paths)

    def __iter__(self):
        return (Sample(p, str(k)) for p, k in zip(self.paths.tolist(), self.kinds.tolist()))

    @classmethod
    def concat(cls, sets: list[SampleSet]) -> SampleSet:
        """One set holding the samples of several, in order."""
        if not sets:
            return cls(PathBatch(np.zeros(0, np.int64), np.zeros(1, np.int64)), np.zeros(0, "<U10"))
        return cls(PathBatch.concat([s.paths for s in sets]), np.concatenate([s.kinds for s in sets]))


def _shuffled_prefix(total: int, count: int, seed: int | None) -> list[int]:
    """The first count entries of a seeded uniform shuffle of range(total), without making it.

    A partial Fisher-Yates shuffle over a sparse "virtual array": exact for totals of any size,
    and the prefix for a seed does not depend on count.
    """
    if total < 1 << 62:
        rng = np.random.default_rng(seed)
        swaps = rng.integers(np.arange(count, dtype=np.int64), total, dtype=np.int64).tolist()
    else:
        rand = random.Random(seed)
        swaps = [j + rand.randrange(total - j) for j in range(count)]
    moved: dict[int, int] = {}
    out = []
    for j, r in enumerate(swaps):
        out.append(moved.get(r, r))
        moved[r] = moved.get(j, j)
    return out


def _skip_excluded(draws: list[int], excluded: list[int]) -> list[int]:
    """Map draws from [0, N - |E|) onto [0, N) minus the sorted excluded ranks E."""
    if not excluded:
        return draws
    shifted = [e - i for i, e in enumerate(excluded)]
    if excluded[-1] < 1 << 62:
        x = np.asarray(draws, dtype=np.int64)
        return (x + np.searchsorted(np.asarray(shifted, dtype=np.int64), x, side="right")).tolist()
    return [x + bisect.bisect_right(shifted, x) for x in draws]


def sample_uniform(
    lattice: Lattice,
    k: int,
    *,
    max_len: int | None = None,
    exclude: Iterable[Path] = (),
    seed: int | None = None,
) -> PathBatch:
    """Up to k distinct paths of at most max_len tokens, uniformly without replacement.

    Paths in ``exclude`` are never drawn (those longer than max_len are outside the space
    anyway). Where fewer than k paths remain, all of them are returned, in random order.
    """
    index = lattice.index(max_len)
    excluded = {index.rank(p) for p in exclude if max_len is None or len(p) <= max_len}
    return _draw(index, k, excluded, seed)


def _draw(index: PathIndex, k: int, excluded: set[int], seed: int | None) -> PathBatch:
    """Up to k distinct paths of an index, uniformly, never one whose rank is excluded."""
    return index.unrank(bigint.to_limbs(_ranks(index, k, excluded, seed), index.limbs))


def _ranks(index: PathIndex, k: int, excluded: set[int], seed: int | None) -> list[int]:
    """The ranks of up to k distinct paths of an index, drawn uniformly, none of them excluded."""
    skip = sorted(excluded)
    remaining = index.total - len(skip)
    return _skip_excluded(_shuffled_prefix(remaining, min(k, remaining), seed), skip)


def block_size(lattice: Lattice) -> int:
    """Paths per block of :func:`lattice_sample_blocks`: about BLOCK_IDS token ids, BLOCK_PATHS at
    most, one at least, so that a block's work does not grow with k."""
    return max(1, min(BLOCK_PATHS, BLOCK_IDS // (len(lattice.canonical) + 1)))


def lattice_sample_blocks(
    lattice: Lattice, k: int, *, max_len: int | None = None, seed: int | None = None
) -> Iterator[SampleSet]:
    """Algorithm 1's samples (as :func:`lattice_samples`), in order, in blocks of
    :func:`block_size` paths: a caller may stop between two, which a long text's k paths need."""
    size, splits = block_size(lattice), len(lattice.splits)
    for start in range(0, min(k, splits), size):
        block = lattice.off_by_one_batch(start, min(start + size, k, splits))
        yield SampleSet(block, np.full(len(block), "off_by_one"))
    if k <= splits:
        return
    bound = lattice.default_max_len() if max_len is None else max_len
    index = lattice.index(bound)
    excluded = set()
    if len(lattice.canonical) <= bound:
        excluded.add(index.rank(lattice.canonical))
    if len(lattice.canonical) + 1 <= bound:
        excluded.update(index.off_by_one_ranks())
    ranks = _ranks(index, k - splits, excluded, seed)
    for start in range(0, len(ranks), size):
        block = index.unrank(bigint.to_limbs(ranks[start : start + size], index.limbs))
        yield SampleSet(block, np.full(len(block), "uniform"))


def lattice_samples(
    lattice: Lattice, k: int, *, max_len: int | None = None, seed: int | None = None,
    should_stop: StopCheck | None = None,
) -> SampleSet:
    """Algorithm 1: the off-by-one set, then uniform paths of at most max_len tokens.

    Returns k distinct non-canonical paths (fewer where fewer exist). The off-by-one set comes
    first in canonical order; if k is smaller than it, its first k paths are returned. The
    uniform part is drawn from the length-bounded lattice minus the off-by-one set and the
    canonical path (docs/design.md, point 10). max_len defaults to ``lattice.default_max_len()``.
    should_stop is asked between two blocks (:func:`lattice_sample_blocks`): once it says so, the
    blocks drawn so far are returned.
    """
    blocks = []
    for block in lattice_sample_blocks(lattice, k, max_len=max_len, seed=seed):
        blocks.append(block)
        if should_stop is not None and should_stop():
            break
    return SampleSet.concat(blocks)


def num_candidates(lattice: Lattice, max_len: int | None = None) -> int:
    """How many distinct paths Algorithm 1 can return: off-by-one plus the bounded rest."""
    bound = lattice.default_max_len() if max_len is None else max_len
    splits, length = len(lattice.splits), len(lattice.canonical)
    in_bound = splits * (length + 1 <= bound) + (length <= bound)  # every off-by-one path has length + 1 tokens
    return splits + lattice.count(bound) - in_bound

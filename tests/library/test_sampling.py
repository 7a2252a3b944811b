"""Samplers (paper section 6, Algorithm 1; docs/design.md points 7 and 10) and the bigint limbs.

Uniformity is tested with chi-square goodness-of-fit tests on fixed seeds (deterministic: a
failure is a real defect, not bad luck). Sets are checked against full enumerations and the
brute-force reference of ``tests.tokenizer_cases``.
"""

from __future__ import annotations

from collections import Counter
from itertools import combinations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from scipy import stats

from marginal_core.lattice import bigint, sampling
from marginal_core.lattice.graph import lattice_of
from marginal_core.lattice.paths import PathBatch
from marginal_core.lattice.sampling import lattice_samples, num_candidates, sample_uniform
from tests.tokenizer_cases import EMBEDDED, GEMMA, SMOL, embedded, examples, reference, spells, texts

P_MIN = 1e-3  # reject uniformity below this p-value
PROPERTY = settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def lattice(name: str, text: str):
    return lattice_of(text, embedded(name))


def chisquare_uniform(observed: Counter, support: list) -> float:
    """p-value of 'every element of support is equally likely', given draws in observed."""
    assert set(observed) <= set(support), "a draw outside the support"
    return stats.chisquare([observed[p] for p in support]).pvalue


def brute_off_by_one(lat, paths) -> set:
    """Paths equal to the canonical one with one token replaced by two of the same bytes."""
    canon, surface = lat.canonical, lat.vocab.surface
    found = set()
    for p in paths:
        if len(p) != len(canon) + 1:
            continue
        for i in range(len(canon)):
            if (
                p[:i] == canon[:i]
                and p[i + 2 :] == canon[i + 1 :]
                and surface(p[i]) + surface(p[i + 1]) == surface(canon[i])
            ):
                found.add(p)
    return found


def canonical_offsets(lat) -> list[int]:
    offsets = [0]
    for token in lat.canonical:
        offsets.append(offsets[-1] + len(lat.vocab.surface(token)))
    return offsets


# --------------------------------------------------------------------------------------------
# Uniformity


def test_single_draws_are_uniform():
    lat = lattice(SMOL, "Hello world")
    support = lat.enumerate()
    assert 200 < len(support) < 400
    draws = Counter(sample_uniform(lat, 1, seed=seed)[0] for seed in range(8 * len(support)))
    assert len(draws) > 0.99 * len(support)
    assert chisquare_uniform(draws, support) > P_MIN


def test_inclusion_counts_without_replacement_are_uniform():
    """k of N without replacement, R times: each path is in a sample with probability k/N.

    The inclusion indicators of one sample are negatively correlated, so Pearson's statistic X
    is (1 - k/N) * N / (N - 1) times a chi-square with N - 1 degrees of freedom; rescaled.
    """
    lat = lattice(GEMMA, "Hello world")
    support = lat.enumerate()
    n, k, repeats = len(support), 48, 120
    counts = Counter()
    for seed in range(repeats):
        sample = sample_uniform(lat, k, seed=seed).tolist()
        assert len(sample) == len(set(sample)) == k
        counts.update(sample)
    expected = repeats * k / n
    x = sum((counts[p] - expected) ** 2 / expected for p in support)
    statistic = x * (n - 1) / (n * (1 - k / n))
    assert stats.chi2.sf(statistic, n - 1) > P_MIN


def test_every_subset_is_equally_likely():
    """Without replacement, every k-subset of the paths has probability 1 / C(N, k)."""
    lat = lattice(GEMMA, "dogs")
    support = lat.enumerate()
    k = 3
    subsets = [frozenset(c) for c in combinations(support, k)]
    assert len(subsets) == 56
    draws = [sample_uniform(lat, k, seed=seed).tolist() for seed in range(25 * len(subsets))]
    assert chisquare_uniform(Counter(frozenset(d) for d in draws), subsets) > P_MIN
    # ... and the order is random too: the first path drawn is uniform.
    assert chisquare_uniform(Counter(d[0] for d in draws), support) > P_MIN


def test_exclusion_and_length_bound_keep_draws_uniform():
    lat = lattice(SMOL, "hello world")
    bound = len(lat.canonical) + 2
    everything = lat.enumerate()
    bounded = lat.enumerate(max_len=bound)
    longer = [p for p in everything if len(p) > bound]
    excluded = [lat.canonical, bounded[3], bounded[-1], *longer[:5]]
    support = [p for p in bounded if p not in excluded]
    assert len(support) == len(bounded) - len(set(excluded) & set(bounded)) > 20
    draws = Counter(
        sample_uniform(lat, 1, max_len=bound, exclude=excluded, seed=seed)[0]
        for seed in range(40 * len(support))
    )
    assert set(draws) == set(support)
    assert chisquare_uniform(draws, support) > P_MIN


def test_algorithm1_uniform_part_is_uniform_over_the_rest():
    lat = lattice(GEMMA, "Hello world")
    bound = len(lat.canonical) + 2
    off = lat.off_by_one()
    support = [p for p in lat.enumerate(max_len=bound) if p not in off and p != lat.canonical]
    assert len(support) == lat.count(bound) - len(off) - 1 > 20
    draws = Counter()
    for seed in range(40 * len(support)):
        result = lattice_samples(lat, len(off) + 1, max_len=bound, seed=seed)
        assert result.kinds.tolist() == ["off_by_one"] * len(off) + ["uniform"]
        draws[result.paths[len(off)]] += 1
    assert set(draws) == set(support)
    assert chisquare_uniform(draws, support) > P_MIN


# --------------------------------------------------------------------------------------------
# Multi-limb counts (beyond 2^64): exact and still uniform

LONG_TEXT = ("The lattice of a sentence: tokens 日本語 and émoji 🎉 all count. " * 5)[:300]


@pytest.fixture(scope="module")
def long_lattice():
    lat = lattice(GEMMA, LONG_TEXT)
    assert lat.count() > 2**200
    return lat


def merge_small_bins(observed: list[int], expected: list[float], minimum: float = 10.0):
    """Merge adjacent bins until every expected count is at least minimum."""
    obs, exp, o, e = [], [], 0, 0.0
    for a, b in zip(observed, expected):
        o, e = o + a, e + b
        if e >= minimum:
            obs.append(o)
            exp.append(e)
            o, e = 0, 0.0
    if e and exp:
        obs[-1] += o
        exp[-1] += e
    return obs, exp


def test_sampling_beyond_64_bits_gives_valid_distinct_paths(long_lattice):
    lat = long_lattice
    for bound in (None, len(lat.canonical) + 15):
        total = lat.count(bound)
        assert total > 2**64  # several 62-bit limbs, and ranks beyond numpy's int64
        excluded = [lat.canonical, *lat.off_by_one()]
        paths = sample_uniform(lat, 2000, max_len=bound, exclude=excluded, seed=3).tolist()
        assert len(paths) == len(set(paths)) == 2000
        assert not set(paths) & set(excluded)
        assert all(lat.path_bytes(p) == lat.data for p in paths)
        assert bound is None or max(map(len, paths)) <= bound
        # rank() uses exact Python ints, unrank() the limb arrays: they must agree.
        ranks = [lat.rank(p, max_len=bound) for p in paths]
        assert all(0 <= r < total for r in ranks) and max(ranks) > 2**64
        assert lat.unrank(ranks, max_len=bound) == paths
        assert sample_uniform(lat, 50, max_len=bound, exclude=excluded, seed=3).tolist() == paths[:50]


def test_sampling_beyond_64_bits_is_uniform(long_lattice):
    """First token and length of uniform paths follow the exact proportions (reference counts)."""
    lat, ref = long_lattice, reference(embedded(GEMMA))
    draws = sample_uniform(lat, 4000, seed=11).tolist()
    # The first arc a = (0, end, token) starts suffix[end] of the suffix[0] paths.
    suffix = ref.suffix_counts(lat.data)
    assert suffix[0] == lat.count()
    arcs0 = sorted({(e, t) for s, e, t in lat.arcs if s == 0})
    observed = Counter(p[0] for p in draws)
    expected = [len(draws) * suffix[e] / suffix[0] for e, _ in arcs0]
    obs, exp = merge_small_bins([observed[t] for _, t in arcs0], expected)
    assert len(obs) >= 2 and sum(observed.values()) == len(draws)
    assert stats.chisquare(obs, exp).pvalue > P_MIN
    # Lengths: P(len = l) = paths of length l / all paths, unbounded and bounded.
    lengths = ref.length_counts(lat.data)
    for bound in (None, len(lat.canonical) + 15):
        sample = draws if bound is None else sample_uniform(lat, 4000, max_len=bound, seed=12).tolist()
        support = sorted(n for n in lengths if bound is None or n <= bound)
        total = sum(lengths[n] for n in support)
        assert total == lat.count(bound)
        seen = Counter(len(p) for p in sample)
        assert set(seen) <= set(support)
        obs, exp = merge_small_bins([seen[n] for n in support], [len(sample) * lengths[n] / total for n in support])
        assert len(obs) >= 3
        assert stats.chisquare(obs, exp).pvalue > P_MIN


def test_algorithm1_beyond_64_bits(long_lattice):
    lat = long_lattice
    off = lat.off_by_one()
    bound = lat.default_max_len()
    result = lattice_samples(lat, len(off) + 500, seed=5)
    paths = result.paths.tolist()
    assert paths[: len(off)] == off
    uniform = paths[len(off) :]
    assert len(uniform) == 500 == len(set(uniform))
    assert not set(uniform) & (set(off) | {lat.canonical})
    assert all(len(p) <= bound and lat.path_bytes(p) == lat.data for p in uniform)
    smaller = lattice_samples(lat, len(off) + 100, seed=5).paths.tolist()
    assert smaller == paths[: len(smaller)]
    index = lat.index(bound)
    assert index.off_by_one_ranks() == [lat.rank(p, max_len=bound) for p in off]


# --------------------------------------------------------------------------------------------
# Properties on short texts, against full enumeration


@st.composite
def sampling_cases(draw):
    name = draw(st.sampled_from(EMBEDDED))
    text = draw(texts(max_chars=7))
    assume(spells(embedded(name), text))
    lat = lattice(name, text)
    assume(lat.count() <= 3000)
    slack = draw(st.sampled_from([None, -1, 0, 1, 2, 10]))
    bound = None if slack is None else max(0, len(lat.canonical) + slack)
    return name, lat, bound, draw(st.integers(0, 2**32 - 1))


@PROPERTY
@given(case=sampling_cases(), data=st.data())
def test_sample_uniform_is_without_replacement_and_exact(case, data):
    name, lat, bound, seed = case
    everything = lat.enumerate()
    bounded = set(lat.enumerate(max_len=bound))
    excluded = data.draw(st.lists(st.sampled_from(everything), max_size=5), label="exclude")
    remaining = bounded - set(excluded)
    k = data.draw(st.integers(0, len(remaining) + 3), label="k")

    paths = sample_uniform(lat, k, max_len=bound, exclude=excluded, seed=seed).tolist()
    assert len(paths) == len(set(paths)) == min(k, len(remaining))
    assert set(paths) <= remaining
    if k >= len(remaining):
        assert set(paths) == remaining  # asked for more than exist: all of them, once
    # Seeded determinism, and nested samples: a larger k extends the smaller sample.
    assert sample_uniform(lat, k, max_len=bound, exclude=excluded, seed=seed).tolist() == paths
    more = sample_uniform(lat, k + 7, max_len=bound, exclude=excluded, seed=seed).tolist()
    assert more[: len(paths)] == paths


@PROPERTY
@given(case=sampling_cases(), data=st.data())
def test_algorithm1_against_enumeration(case, data):
    name, lat, bound, seed = case
    everything = lat.enumerate()
    canon, n = lat.canonical, len(lat.canonical)
    effective = lat.default_max_len() if bound is None else bound

    # The off-by-one set: exactly the one-token splits of the canonical path, in order.
    off = lat.off_by_one()
    assert len(off) == len(set(off))
    assert set(off) == brute_off_by_one(lat, everything)
    offsets, ref = canonical_offsets(lat), reference(embedded(name))
    assert len(off) == sum(ref.split_pairs(lat.data, a, b) for a, b in zip(offsets, offsets[1:]))
    assert [len(p) for p in off] == [n + 1] * len(off)
    positions = [next(i for i in range(n) if p[i] != canon[i]) for p in off]
    assert positions == sorted(positions)  # canonical order

    # Exact ranks of the off-by-one set, which Algorithm 1 excludes without a rejection loop.
    for b in {None, n + 1, n + 2, effective}:
        if b is not None and b < n + 1:
            with pytest.raises(ValueError):
                lat.index(b).off_by_one_ranks()
        else:
            assert lat.index(b).off_by_one_ranks() == [lat.rank(p, max_len=b) for p in off]

    candidates = set(off) | ({p for p in everything if len(p) <= effective} - {canon})
    assert num_candidates(lat, bound) == len(candidates)
    k = data.draw(st.integers(0, len(candidates) + 3), label="k")
    result = lattice_samples(lat, k, max_len=bound, seed=seed)
    paths, kinds = result.paths.tolist(), result.kinds.tolist()
    assert len(result) == len(paths) == len(kinds) == min(k, len(candidates))
    assert len(set(paths)) == len(paths) and canon not in paths
    head = min(k, len(off))
    assert paths[:head] == off[:head]
    assert kinds == ["off_by_one"] * head + ["uniform"] * (len(paths) - head)
    uniform = paths[head:]
    assert all(len(p) <= effective for p in uniform)
    assert not set(uniform) & set(off)
    assert set(paths) <= candidates
    if k >= len(candidates):
        assert set(paths) == candidates
    assert [s.ids for s in result] == paths and [s.kind for s in result] == kinds
    # Seeded determinism and nesting: the estimate only grows with k.
    assert lattice_samples(lat, k, max_len=bound, seed=seed).paths.tolist() == paths
    assert lattice_samples(lat, k + 5, max_len=bound, seed=seed).paths.tolist()[: len(paths)] == paths


@pytest.mark.parametrize("name", EMBEDDED)
def test_algorithm1_on_a_sentence(name):
    lat = lattice(name, "Marginal probabilities of a string sum over its tokenizations.")
    off = lat.off_by_one()
    offsets, ref = canonical_offsets(lat), reference(embedded(name))
    pairs = [ref.split_pairs(lat.data, a, b) for a, b in zip(offsets, offsets[1:])]
    assert len(off) == sum(pairs) > 20
    assert all(lat.path_bytes(p) == lat.data for p in off)

    result = lattice_samples(lat, 200, seed=0)
    assert result.paths.tolist()[: len(off)] == off
    assert Counter(result.kinds.tolist()) == {"off_by_one": len(off), "uniform": 200 - len(off)}
    # k below |O|: the first k of O, no uniform draws.
    few = lattice_samples(lat, 5, seed=0)
    assert few.paths.tolist() == off[:5] and set(few.kinds.tolist()) == {"off_by_one"}
    # Different seeds differ; the same seed repeats.
    again = lattice_samples(lat, 200, seed=0).paths.tolist()
    other = lattice_samples(lat, 200, seed=1).paths.tolist()
    assert again == result.paths.tolist() and other != again and other[: len(off)] == off
    # Nested for every k: each sample set is a prefix of the next.
    previous: list = []
    for k in (0, 1, len(off), len(off) + 1, 60, 200):
        current = lattice_samples(lat, k, seed=0).paths.tolist()
        assert current[: len(previous)] == previous and len(current) == k
        previous = current


def test_algorithm1_in_blocks_is_algorithm1(monkeypatch):
    """Issue 60: the samples come in blocks (a caller stops between two) of a few paths here,
    the same paths and kinds as one block; the batch counts its distinct paths in arrays."""
    lat = lattice(SMOL, "Marginal probabilities of a string sum over its tokenizations.")
    whole = lattice_samples(lat, 120, seed=3)
    monkeypatch.setattr(sampling, "BLOCK_PATHS", 7)
    blocks = list(sampling.lattice_sample_blocks(lat, 120, seed=3))
    assert len(blocks) > 120 // 7 and max(map(len, blocks)) == 7  # the off-by-one set's last block may be short
    joined = sampling.SampleSet.concat(blocks)
    assert joined.paths.tolist() == whole.paths.tolist() and joined.kinds.tolist() == whole.kinds.tolist()
    paths = whole.paths.tolist()
    repeated = PathBatch.from_paths(paths + paths[:30] + [lat.canonical, lat.canonical, ()])
    assert whole.paths.distinct() == len(set(paths)) == 120
    assert repeated.distinct() == len(set(repeated.tolist())) == 122


def test_algorithm1_when_fewer_paths_than_asked():
    lat = lattice(GEMMA, "Hello")
    bound = len(lat.canonical) + 1
    candidates = set(lat.off_by_one()) | (set(lat.enumerate(max_len=bound)) - {lat.canonical})
    result = lattice_samples(lat, 10_000, max_len=bound, seed=0)
    assert len(result) == num_candidates(lat, bound) == len(candidates)
    assert set(result.paths.tolist()) == candidates
    # A bound below the canonical length: no uniform part at all, only the off-by-one set.
    tight = lattice_samples(lat, 10_000, max_len=0, seed=0)
    assert tight.paths.tolist() == lat.off_by_one() and num_candidates(lat, 0) == len(lat.off_by_one())


# --------------------------------------------------------------------------------------------
# bigint: fixed-width 62-bit limbs against Python ints


@st.composite
def limb_values(draw, count=st.integers(1, 12)):
    limbs = draw(st.integers(1, 5))
    top = 2 ** (bigint.LIMB_BITS * limbs) - 1
    edge = st.sampled_from([0, 1, 2**62 - 1, 2**62, 2**63 - 1, 2**64, top - 1, top]).filter(lambda v: v <= top)
    value = st.integers(0, top) | edge
    return limbs, draw(st.lists(value, min_size=1, max_size=draw(count)))


@settings(max_examples=examples(200), deadline=None)
@given(case=limb_values())
def test_bigint_round_trip_and_width(case):
    limbs, values = case
    arr = bigint.to_limbs(values, limbs)
    assert arr.dtype == np.int64 and arr.shape == (len(values), limbs)
    assert ((arr >= 0) & (arr < 2**bigint.LIMB_BITS)).all()
    assert bigint.from_limbs(arr) == values
    # Any leading shape: a trailing limb axis is added, and from_limbs flattens the rest.
    grid = np.array(values * 2, dtype=object).reshape(2, len(values))
    assert bigint.to_limbs(grid, limbs).shape == (2, len(values), limbs)
    assert bigint.from_limbs(bigint.to_limbs(grid, limbs)) == values * 2
    for v in values:
        w = bigint.width(v)
        assert w >= 1 and v < 2 ** (bigint.LIMB_BITS * w)
        assert w == 1 or v >= 2 ** (bigint.LIMB_BITS * (w - 1))


@settings(max_examples=examples(200), deadline=None)
@given(case=limb_values(), data=st.data())
def test_bigint_compare_and_subtract(case, data):
    limbs, a = case
    top = 2 ** (bigint.LIMB_BITS * limbs) - 1
    # b shares leading limbs with a often, so ties in high limbs are exercised.
    b = [
        data.draw(st.integers(0, top) | st.just(x) | st.integers(max(0, x - 2**62), min(top, x + 2**62)))
        for x in a
    ]
    la, lb = bigint.to_limbs(a, limbs), bigint.to_limbs(b, limbs)
    assert bigint.less_equal(la, lb).tolist() == [x <= y for x, y in zip(a, b)]
    # Broadcasting: every a against every b.
    outer = bigint.less_equal(la[:, None, :], lb[None, :, :])
    assert outer.tolist() == [[x <= y for y in b] for x in a]
    hi = [max(x, y) for x, y in zip(a, b)]
    lo = [min(x, y) for x, y in zip(a, b)]
    diff = bigint.subtract(bigint.to_limbs(hi, limbs), bigint.to_limbs(lo, limbs))
    assert bigint.from_limbs(diff) == [x - y for x, y in zip(hi, lo)]
    assert ((diff >= 0) & (diff < 2**bigint.LIMB_BITS)).all()

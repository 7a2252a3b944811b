"""Proxy importance sampling (docs/design.md point 11) against brute force on real models.

References are independent of marginal_core.estimators.proxy: every path of a short text is run through a
plain transformers forward (context + path, no cache), which gives its log p and the logits at
each of its prefixes; q renormalizes those logits over the next tokens that some allowed
enumerated path takes after the same prefix.
"""

from __future__ import annotations

import copy
import math
from functools import cache

import numpy as np
import pytest
import torch
from scipy.special import logsumexp
from scipy.stats import chisquare

from marginal_core.estimators.proxy import ProxyResult, proxy_sample
from marginal_core.lattice.conditioning import context_ids
from marginal_core.lattice.graph import lattice_of
from marginal_core.lattice.proposal import Proposal, build_proposal
from marginal_core.lm.adapter import LM

QUESTION, ANSWER = "Name a fruit:", " apple"  # 27 tokenizations under SmolLM2


def proposal_log_q(loaded, lattice, paths, context, *, include_canonical: bool = False) -> np.ndarray:
    """log q of given paths under the proposal, teacher-forced after the shared context cache in
    right-padded batches (-inf for paths the proposal never draws): the oracle the sampler's own
    log q is checked by."""
    lm, proposal = loaded, build_proposal(lattice, include_canonical)
    out = np.full(len(paths), -math.inf)
    walks = {i: w for i, path in enumerate(paths) if (w := _walk_or_none(proposal, path)) is not None}
    ctx = lm.prefill(context)
    order = sorted(walks, key=lambda i: len(paths[i]))
    for batch in (order[b : b + 16] for b in range(0, len(order), 16)):
        longest = max(len(paths[i]) for i in batch)
        ids = torch.zeros((len(batch), longest), dtype=torch.long)
        for r, i in enumerate(batch):
            ids[r, : len(paths[i])] = torch.tensor(paths[i])
        with torch.inference_mode():
            hidden = ctx.last_hidden.expand(len(batch), -1)[:, None]
            if longest > 1:
                cache = copy.deepcopy(ctx.cache)
                cache.reorder_cache(torch.zeros(len(batch), dtype=torch.long))
                later = lm.decoder(input_ids=ids[:, :-1], cache=cache, use_cache=True).last_hidden_state
                hidden = torch.cat([hidden, later], dim=1)
            states = np.concatenate([walks[i][:-1] for i in batch])
            rows = torch.cat([hidden[r, : len(paths[i])] for r, i in enumerate(batch)])
            tokens = torch.as_tensor(proposal.tokens[states])
            lq = torch.log_softmax(lm.allowed_logprobs(rows, tokens, torch.as_tensor(proposal.width[states])), dim=-1)
            chosen = torch.cat([ids[r, : len(paths[i])] for r, i in enumerate(batch)])
            picked = lq[torch.arange(len(states)), (tokens == chosen[:, None]).int().argmax(dim=1)].numpy()
            ends = np.cumsum([len(paths[i]) for i in batch])
            out[batch] = [part.sum() for part in np.split(picked, ends[:-1])]
    return out


def _walk_or_none(proposal: Proposal, path) -> list[int] | None:
    """The states an allowed path visits, or None if the proposal never draws it."""
    if proposal.empty:
        return None
    try:
        return proposal.walk(path)
    except ValueError:
        return None


class Reference:
    """Log p and teacher-forced log q of every path of one text, from plain forwards."""

    def __init__(self, lm, context: str | None, text: str) -> None:
        self.lm, self.ctx = lm, context_ids(lm.tokenizer, context)
        self.lattice = lattice_of(text, lm.tokenizer)
        self.paths = self.lattice.enumerate()
        self.log_probs = {p: self._log_softmax(p) for p in self.paths}
        self.log_p = {p: sum(float(lp[i, t]) for i, t in enumerate(p)) for p, lp in self.log_probs.items()}

    def _log_softmax(self, path: tuple[int, ...]) -> torch.Tensor:
        """Log-softmax over the vocabulary before each token of the path (one plain forward)."""
        ids = torch.tensor([self.ctx + list(path)])
        with torch.inference_mode():
            logits = self.lm.model(input_ids=ids).logits[0, len(self.ctx) - 1 : -1]
        return logits.double().log_softmax(-1)

    def allowed_paths(self, include_canonical: bool) -> list[tuple[int, ...]]:
        return [p for p in self.paths if include_canonical or p != self.lattice.canonical]

    @cache  # noqa: B019 -- one brute-force instance per test, dropped with it
    def log_q(self, include_canonical: bool) -> dict[tuple[int, ...], float]:
        """q of each allowed path: the LM renormalized over next tokens of allowed paths."""
        allowed = self.allowed_paths(include_canonical)
        out = {}
        for p in allowed:
            lp, total = self.log_probs[p], 0.0
            for i in range(len(p)):
                nxt = sorted({a[i] for a in allowed if len(a) > i and a[:i] == p[:i]})
                total += float(lp[i, p[i]] - torch.logsumexp(lp[i, nxt], 0))
            out[p] = total
        return out

    def exact(self, include_canonical: bool = False) -> float:
        return float(logsumexp([self.log_p[p] for p in self.allowed_paths(include_canonical)]))


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Run this module on one thread: on a shared, oversubscribed 2-core machine, two OpenMP
    threads made forwards 10 to 20 times slower (spin-waiting); restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def ref(smollm_model, one_thread) -> Reference:
    return Reference(smollm_model, QUESTION, ANSWER)


def check_samples(ref: Reference, res: ProxyResult, include_canonical: bool) -> None:
    """Every sample is an allowed lattice path whose log p and log q match the references."""
    log_q = ref.log_q(include_canonical)
    paths = res.paths.tolist()
    assert len(paths) == len(res.log_p) == len(res.log_q)
    for path, lp, lq in zip(paths, res.log_p, res.log_q):
        assert ref.lattice.path_bytes(path) == ref.lattice.data
        assert path in log_q, f"{path} is not an allowed path"
        assert lq == pytest.approx(log_q[path], abs=1e-4)
        assert lp == pytest.approx(ref.log_p[path], abs=1e-3)
    assert include_canonical or ref.lattice.canonical not in paths


@pytest.mark.parametrize("include_canonical", [False, True])
def test_samples_are_allowed_paths_with_exact_log_p_and_log_q(smollm_model, ref, include_canonical):
    res = proxy_sample(smollm_model, ref.lattice, 200, ref.ctx, include_canonical=include_canonical, seed=1)
    assert len(res) == 200 and not res.completion.cancelled
    check_samples(ref, res, include_canonical)
    assert res.forward_passes == res.paths.lengths.max()  # the context, then one per later step
    if include_canonical:
        assert ref.lattice.canonical in res.paths.tolist()


@pytest.mark.parametrize("include_canonical", [False, True])
def test_proposal_sums_to_one_over_all_paths(smollm_model, ref, include_canonical):
    lq = proposal_log_q(smollm_model, ref.lattice, ref.paths, ref.ctx, include_canonical=include_canonical)
    assert math.exp(logsumexp(lq)) == pytest.approx(1.0, abs=1e-6)
    brute = ref.log_q(include_canonical)  # shared prefixes come from separate forwards: fp32 noise
    assert math.exp(logsumexp(list(brute.values()))) == pytest.approx(1.0, abs=1e-5)
    for path, value in zip(ref.paths, lq):
        if path in brute:
            assert value == pytest.approx(brute[path], abs=1e-4)
        else:
            assert value == -math.inf  # the canonical path, excluded


def test_only_the_canonical_path_is_excluded(ref):
    excluding, including = build_proposal(ref.lattice), build_proposal(ref.lattice, include_canonical=True)
    with pytest.raises(ValueError):
        excluding.walk(ref.lattice.canonical)
    assert len(including.walk(ref.lattice.canonical)) == len(ref.lattice.canonical) + 1
    for path in ref.allowed_paths(False):
        excluding.walk(path)


def test_estimates_are_unbiased_and_draws_follow_q(smollm_model, ref):
    exact = ref.exact()
    runs = [proxy_sample(smollm_model, ref.lattice, 150, ref.ctx, seed=seed) for seed in range(8)]
    estimates = np.exp([r.log_estimate - exact for r in runs])  # in units of the exact marginal
    mean, se = estimates.mean(), estimates.std(ddof=1) / math.sqrt(len(estimates))
    assert abs(mean - 1.0) < 3 * se, (mean, se)
    assert se < 0.1  # the test has power: a 30 % bias would not pass
    # Pooled draws follow q: chi-square goodness of fit, rare paths pooled into one bin.
    log_q = ref.log_q(False)
    drawn = [p for r in runs for p in r.paths.tolist()]
    expected = {p: len(drawn) * math.exp(v) for p, v in log_q.items()}
    big = [p for p, e in expected.items() if e >= 5]
    counts = {p: 0 for p in log_q}
    for p in drawn:
        counts[p] += 1
    observed = [counts[p] for p in big] + [sum(counts[p] for p in log_q if p not in big)]
    wanted = np.array([expected[p] for p in big] + [sum(expected[p] for p in log_q if p not in big)])
    wanted *= len(drawn) / wanted.sum()
    assert chisquare(observed, wanted).pvalue > 1e-3


def test_running_estimate_and_seeding(smollm_model, ref):
    a = proxy_sample(smollm_model, ref.lattice, 24, ref.ctx, seed=7)
    b = proxy_sample(smollm_model, ref.lattice, 24, ref.ctx, seed=7, batch_size=8)
    assert a.paths.tolist() == b.paths.tolist()  # the draws do not depend on the batching
    np.testing.assert_allclose(a.log_q, b.log_q, atol=1e-4)
    running = a.running_log_estimates()
    assert len(running) == 24
    assert running[0] == pytest.approx(a.log_weights[0])
    assert running[-1] == pytest.approx(a.log_estimate)
    assert running[9] == pytest.approx(logsumexp(a.log_weights[:10]) - math.log(10))
    assert b.forward_passes > a.forward_passes  # three chunks, each with its own steps


class _OomAbove(torch.nn.Module):
    """Wraps a model and raises an out-of-memory error on batches larger than a cap."""

    def __init__(self, model: torch.nn.Module, cap: int) -> None:
        super().__init__()
        self.inner, self.cap, self.failures = model, cap, 0

    def forward(self, input_ids, **kwargs):
        if input_ids.shape[0] > self.cap:
            self.failures += 1
            raise torch.OutOfMemoryError("simulated: out of memory")
        return self.inner(input_ids=input_ids, **kwargs)


def test_out_of_memory_halves_the_batch(smollm_model, ref):
    lm = LM(smollm_model.loaded)  # an adapter of its own, whose decoder fails on more than 2 rows
    wrapped = lm.decoder = _OomAbove(lm.decoder, cap=2)
    res = proxy_sample(lm, ref.lattice, 12, ref.ctx, seed=3, batch_size=64)
    plain = proxy_sample(smollm_model, ref.lattice, 12, ref.ctx, seed=3)
    assert wrapped.failures > 0
    assert res.paths.tolist() == plain.paths.tolist()
    np.testing.assert_allclose(res.log_p, plain.log_p, atol=1e-4)


def test_progress_and_cancel(smollm_model, ref):
    seen = []
    res = proxy_sample(
        smollm_model, ref.lattice, 30, ref.ctx, seed=0, progress=lambda d, t: seen.append((d, t))
    )
    assert seen[-1] == (30, 30) and all(t == 30 for _, t in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    stopped = proxy_sample(smollm_model, ref.lattice, 30, ref.ctx, seed=0, should_stop=lambda: True)
    assert stopped.completion.cancelled and len(stopped) == 0 and stopped.log_estimate == -math.inf
    assert len(res) == 30 and not res.completion.cancelled
    done = [0]

    def count(d: int, _total: int) -> None:
        done[0] = d

    part = proxy_sample(
        smollm_model, ref.lattice, 30, ref.ctx, seed=0, batch_size=10,
        progress=count, should_stop=lambda: done[0] >= 10,
    )
    assert part.completion.cancelled and len(part) == 10  # whole chunks only
    assert part.paths.tolist() == res.paths.tolist()[:10]


def test_text_with_only_the_canonical_tokenization(smollm_model):
    ctx = context_ids(smollm_model.tokenizer, QUESTION)
    lattice = lattice_of("a", smollm_model.tokenizer)
    assert lattice.count() == 1
    none = proxy_sample(smollm_model, lattice, 5, ctx, seed=0)
    assert len(none) == 0 and none.forward_passes == 0 and none.log_estimate == -math.inf
    full = proxy_sample(smollm_model, lattice, 5, ctx, include_canonical=True, seed=0)
    assert np.all(full.log_q == 0.0)  # q has no choice
    exact = Reference(smollm_model, QUESTION, "a").log_p[lattice.canonical]
    assert full.log_estimate == pytest.approx(exact, abs=1e-4)


def test_scorer_agrees_on_log_p(smollm_model, ref):
    scoring = pytest.importorskip("marginal_core.scoring.trie_scoring")
    res = proxy_sample(smollm_model, ref.lattice, 20, ref.ctx, seed=5)
    scored = scoring.score_paths(smollm_model, res.paths, ref.ctx)
    np.testing.assert_allclose(res.log_p, scored, atol=1e-3)

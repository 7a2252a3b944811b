"""The estimators against exact enumeration, with every path scored by plain transformers forwards in
float64 (tests/brute_force.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import logsumexp

from marginal_core.estimators.estimate_options import EstimateOptions
from marginal_core.estimators.marginalizer import Marginalizer
from marginal_core.estimators.methods import Method
from marginal_core.ground.errors import MarginalError, TooManyPathsError
from marginal_core.viz import analysis
from tests.brute_force import float64_lm, forget_float64, next_token_log_probs, path_log_prob

QUESTION = "Question: What is the capital of France?\nAnswer:"


@pytest.fixture(scope="module", autouse=True)
def _float64_copies_end_with_the_module():
    yield
    forget_float64()


@pytest.mark.parametrize("context", [None, QUESTION])
def test_exact_equals_brute_force(lm, context):
    m = Marginalizer(lm, " Paris", context)
    paths = m.lattice.enumerate()
    # the reference measures the fp32 scorer's error, not the sum of two fp32 errors (transformers'
    # unmasked fp32 forward of Gemma 3 is 4e-4 off on " Paris")
    rows = next_token_log_probs(float64_lm(lm), m.context_ids, paths)
    scores = {p: path_log_prob(r, p) for p, r in zip(paths, rows, strict=True)}
    exact = m.exact()
    assert exact.num_paths == len(paths) == m.lattice.count()
    assert exact.num_samples == len(paths) - 1
    assert m.canonical_score().log_p == pytest.approx(scores[m.lattice.canonical], abs=1e-4)
    expected = logsumexp([s for p, s in scores.items() if p != m.lattice.canonical])
    assert exact.log_noncanonical == pytest.approx(expected, abs=1e-4)
    assert exact.log_marginal == pytest.approx(logsumexp(list(scores.values())), abs=1e-4)
    for path, score in zip(exact.paths.tolist(), exact.log_p):
        # fp32 logits: a path far down the tail (log p near -120) differs by up to ~4e-6 relative (Gemma 3, fp32)
        assert score == pytest.approx(scores[path], abs=2e-4, rel=5e-6)


def test_lattice_estimate_is_a_growing_lower_bound(lm):
    m = Marginalizer(lm, " Paris", QUESTION)
    exact = m.exact()
    previous = -math.inf
    total = exact.num_samples
    for k in [1, 2, 5, 10, total // 2, total, total + 5]:
        est = m.lattice_estimate(k, seed=3)
        assert est.num_samples == min(k, total)
        assert est.num_distinct == est.num_samples
        assert m.lattice.canonical not in set(est.paths.tolist())
        assert est.log_noncanonical <= exact.log_noncanonical + 2e-4 + 5e-6 * abs(exact.log_noncanonical)
        # nested sample sets; separate scoring calls batch differently, so allow fp32 noise
        assert est.log_noncanonical >= previous - 2e-4 - 5e-6 * abs(previous)
        assert np.all(np.diff(est.running) >= -1e-9)
        previous = est.log_noncanonical
    assert previous == pytest.approx(exact.log_noncanonical, abs=2e-4, rel=5e-6)


def test_canonical_estimate_and_summary(smollm_model):
    m = Marginalizer(smollm_model, " Paris", QUESTION)
    est = m.canonical()
    summary = est.summary()
    assert summary["log_noncanonical"] is None
    assert summary["log_marginal"] == pytest.approx(m.canonical_score().log_p)
    assert est.forward_passes == 1


def test_proxy_estimate_and_analyses(smollm_model):
    m = Marginalizer(smollm_model, " Paris", QUESTION)
    proxy = m.proxy(64, seed=1)
    lattice = m.lattice_estimate(64, seed=1)
    exact = m.exact()
    assert proxy.num_samples == 64 and proxy.log_q is not None
    assert np.all(proxy.log_q <= 1e-9)
    rho, n = analysis.spearman(proxy)
    assert n == proxy.num_distinct
    assert math.isnan(rho) or -1 <= rho <= 1
    assert analysis.underestimates(proxy, lattice) == (proxy.log_noncanonical < lattice.log_noncanonical)
    by_kind = analysis.mass_by_kind(m.lattice, exact).set_index("kind")
    assert by_kind["share"].sum() == pytest.approx(1.0)
    assert by_kind.loc["off_by_one", "paths"] == len(m.lattice.off_by_one())
    by_splits = analysis.mass_by_splits(m.lattice, exact).set_index("splits")
    assert by_splits.loc[0, "paths"] == 1 and by_splits.loc[1, "paths"] >= len(m.lattice.off_by_one())
    top = analysis.top_n_mass(m.lattice, exact)
    assert top["cumulative_share"].iloc[-1] == pytest.approx(1.0)
    assert np.all(np.diff(top["cumulative_share"]) >= 0)


def test_cancelling_keeps_what_was_scored(smollm_model):
    m = Marginalizer(smollm_model, " Paris", QUESTION)
    calls = []
    est = m.lattice_estimate(
        20, seed=0, chunk=5, progress=lambda done, total: calls.append((done, total)),
        should_stop=lambda: sum(done in (5, 10) for done, _ in calls) >= 2,
    )
    assert est.run.cancelled and not est.run.done and est.num_samples == 10
    assert calls[-1] == (10, 20) and all(0 <= a <= b <= 10 for (a, _), (b, _) in zip(calls, calls[1:]))


def test_exact_refuses_large_lattices(smollm_model):
    m = Marginalizer(smollm_model, "A sentence long enough to have very many tokenizations indeed.")
    with pytest.raises(TooManyPathsError, match="enumeration budget"):
        m.exact(budget=1000)


def test_the_context_is_prefilled_once_per_model(smollm_model):
    """Every chunk of every method scores after one shared context KV cache, and the model keeps
    it for the next Marginalizer with that context."""
    lm = smollm_model
    question = QUESTION + " In one word."  # a context no other test has made the model keep
    m = Marginalizer(smollm_model, " Paris", question)
    before = lm.prefills
    m.canonical()
    m.lattice_estimate(12, seed=0, chunk=4)
    m.exact(chunk=5)
    m.proxy(12, seed=0, chunk=4)
    assert lm.prefills == before + 1
    fresh = Marginalizer(smollm_model, " Paris", question)
    fresh.lattice_estimate(4, seed=0)
    assert lm.prefills == before + 1  # a new Marginalizer takes the state the model kept
    assert fresh.context_state() is m.context_state()
    other = Marginalizer(smollm_model, " Paris", question + " Answer:")
    other.lattice_estimate(4, seed=0)
    assert lm.prefills == before + 2  # another context is prefilled once more


def test_options_and_methods_are_checked_before_any_work():
    for bad, word in [({"samples": -1}, "samples"), ({"chunk": 0}, "chunks"), ({"max_len": 0}, "length bound"),
                      ({"budget": 0}, "budget")]:
        with pytest.raises(MarginalError, match=word):
            EstimateOptions(**bad)
    assert Method.parse("lattice") is Method.LATTICE and Method.parse(Method.EXACT) is Method.EXACT
    assert Method.parse("beam") is Method.BEAM
    with pytest.raises(MarginalError, match="choose from canonical, lattice, proxy, beam, exact"):
        Method.parse("beams")


def test_a_small_first_chunk_then_full_ones_keep_the_samples(smollm_model):
    """A first_chunk makes a large run's first estimate come early; the samples stay the same."""
    from marginal_core.estimators.estimate_options import chunk_sizes

    assert list(chunk_sizes(30, 8, 2)) == [2, 8, 8, 8, 4]
    assert list(chunk_sizes(5, 8, 2)) == [2, 3] and list(chunk_sizes(30, None, 4)) == [4, 26]
    assert list(chunk_sizes(10, 4)) == [4, 4, 2] and list(chunk_sizes(0, 4, 2)) == []
    m = Marginalizer(smollm_model, " Paris is the capital", None)
    parts = list(m.stream("lattice", samples=30, chunk=8, first_chunk=2))
    assert [p.num_samples for p in parts] == [2, 10, 18, 26, 30]
    assert parts[-1].paths.tolist() == m.lattice_estimate(30).paths.tolist()
    proxy = list(m.stream("proxy", samples=12, chunk=8, first_chunk=3))
    assert [p.num_samples for p in proxy] == [3, 11, 12]  # the proxy's first batch, then full ones
    assert proxy[-1].paths.tolist() == m.proxy(12, chunk=12).paths.tolist()
    with pytest.raises(MarginalError, match="first chunk"):
        EstimateOptions(first_chunk=0)


def test_chunks_grow_to_the_seconds_of_work_asked_and_keep_the_samples(smollm_model):
    """Issue 44 item 2: with chunk_seconds, a chunk after the first grows past ``chunk`` to about
    that much work at the rate of the chunk before (never below ``chunk``); the samples and the
    estimate stay those of any other chunking."""
    from marginal_core.estimators.estimate_options import chunk_sizes

    spent: list[tuple[int, float]] = []
    sizes = chunk_sizes(1000, 100, 4, 1.0, spent)
    assert next(sizes) == 4
    spent.append((4, 0.02))  # a fast device: 4 samples in 20 ms
    assert next(sizes) == 200  # 1 s at that rate
    spent.append((200, 0.05))
    assert next(sizes) == 796  # the rest: 4,000 would fit in 1 s
    slow: list[tuple[int, float]] = []
    sizes = chunk_sizes(300, 100, 4, 1.0, slow)
    assert next(sizes) == 4
    slow.append((4, 0.5))  # a slow one: chunks stay at ``chunk``
    assert [next(sizes), next(sizes), next(sizes)] == [100, 100, 96]
    m = Marginalizer(smollm_model, " Paris is the capital", None)
    parts = list(m.stream("lattice", samples=30, chunk=4, first_chunk=2, chunk_seconds=1e6))
    assert [p.num_samples for p in parts] == [2, 30]  # any rate: the rest in one chunk
    whole = m.lattice_estimate(30)
    assert parts[-1].paths.tolist() == whole.paths.tolist()
    assert parts[-1].log_marginal == pytest.approx(whole.log_marginal, abs=1e-4)
    with pytest.raises(MarginalError, match="seconds"):
        EstimateOptions(chunk_seconds=0)


def test_texts_beyond_the_context_window_are_refused_before_any_scoring(smollm_model, monkeypatch, capsys):
    """The canonical tokenization (and every sample) must fit the model's context window with
    the context; otherwise a ContextWindowError names the counts before any forward pass."""
    from marginal_core.cli.commands import main
    from marginal_core.ground.errors import ContextWindowError

    lm = smollm_model
    text = " The committee postponed its decision until the next meeting."
    m = Marginalizer(smollm_model, text, QUESTION)
    canonical, context = len(m.lattice.canonical), len(m.context_ids)
    monkeypatch.setattr(lm.config, "max_position_embeddings", context + canonical - 1)
    before = lm.prefills
    for method in ("canonical", "lattice", "proxy", "exact"):
        with pytest.raises(ContextWindowError) as caught:
            m.estimate(method, samples=3)
        assert caught.value.tokens == canonical and caught.value.limit == context + canonical - 1
    assert lm.prefills == before  # refused before the context was even prefilled
    message = str(caught.value)
    assert f"has {canonical} tokens ({canonical + context} with the context)" in message
    assert f"context window of {context + canonical - 1} tokens" in message and "smollm2-135m" in message
    # The canonical path fits, but L lets samples pass the window: lower L.
    monkeypatch.setattr(lm.config, "max_position_embeddings", context + canonical + 2)
    with pytest.raises(ContextWindowError, match="set the length bound L to at most"):
        m.lattice_estimate(200, max_len=canonical + 10, seed=0)
    assert m.lattice_estimate(20, max_len=canonical + 2, seed=0).num_samples == 20
    with pytest.raises(ContextWindowError, match="longest tokenization the proxy may draw"):
        m.proxy(3)
    # The command line says it in one line, exit status 2.
    monkeypatch.setattr(lm.config, "max_position_embeddings", 4)
    assert main(["estimate", text, "--model", "smollm2-135m", "--device", "cpu", "--methods", "lattice",
                 "--samples", "2"]) == 2
    err = capsys.readouterr().err
    assert "context window of 4 tokens" in err and "Traceback" not in err


def test_the_canonical_score_reports_progress_before_any_sample(smollm_model):
    """A long text's canonical pass is where a run waits first: progress hears it (in tokens from
    canonical_score, as (0, requested) from a stream), so a caller can show it or end the run."""
    m = Marginalizer(smollm_model, " Paris is the capital", QUESTION)
    calls: list[tuple[float, int]] = []
    m.lattice_estimate(6, seed=0, chunk=6, progress=lambda done, total: calls.append((done, total)))
    assert calls[0] == (0, 6) and calls[-1] == (6, 6)
    fresh = Marginalizer(smollm_model, " Paris is the capital", QUESTION)
    tokens: list[tuple[float, int]] = []
    fresh.canonical_score(progress=lambda done, total: tokens.append((done, total)))
    assert tokens and tokens[-1][0] == tokens[-1][1] >= len(fresh.lattice.canonical)  # tokens fed, context included


def test_a_first_chunk_may_carry_the_canonical_path_and_reports_each_pass(smollm_model, monkeypatch):
    """canonical_in_first_chunk (the app's live runs): the canonical path goes in the first chunk's
    trie, not a pass of its own, its score within float32 rounding of its own pass's and its
    seconds off the method's clock; a long first chunk reports each pass, so a caller can end it."""
    from marginal_core.scoring import pass_budget

    alone = Marginalizer(smollm_model, " Paris is the capital", QUESTION).canonical_score().log_p
    m = Marginalizer(smollm_model, " Paris is the capital", QUESTION)
    calls: list[tuple[float, int]] = []
    monkeypatch.setattr(pass_budget, "DEFAULT_MAX_BATCH_TOKENS", 8)
    est = m.lattice_estimate(6, seed=0, chunk=6, canonical_in_first_chunk=True,
                             progress=lambda done, total: calls.append((done, total)))
    assert len(calls) > 2 and all(done < 6 for done, _ in calls[:-1]) and calls[-1] == (6, 6)
    assert est.log_p_canonical == m.canonical_score().log_p == pytest.approx(alone, abs=1e-4)
    assert m.canonical_score().seconds > 0  # its share of the first chunk's seconds
    same = Marginalizer(smollm_model, " Paris is the capital", QUESTION).lattice_estimate(6, seed=0, chunk=6)
    np.testing.assert_allclose(est.log_p, same.log_p, atol=1e-4, rtol=0)


def test_a_run_stopped_before_its_first_chunk_can_end_its_canonical_pass(smollm_model):
    """Issue 60: stopped while its samples are drawn, a live run (the canonical path riding in the
    first chunk) has no chunk to carry its canonical score, which is then scored alone; progress
    hears that pass, where the app ends a stopped run, instead of it running to its end unheard."""
    m = Marginalizer(smollm_model, " Paris is the capital", QUESTION)
    heard: list[tuple[float, int]] = []
    est = m.lattice_estimate(6, seed=0, chunk=6, canonical_in_first_chunk=True, should_stop=lambda: True,
                             progress=lambda done, total: heard.append((done, total)))
    assert est.run.cancelled and est.num_samples == 0 and heard and set(heard) == {(0, 6)}

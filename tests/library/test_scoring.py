"""Trie scoring against plain scoring, one-at-a-time scoring and a direct forward pass, on both
embedded models (fp32 on the CPU: scores agree within 1e-4 nats)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from marginal_core.ground.errors import MarginalError, OutOfMemory
from marginal_core.lattice.conditioning import context_ids
from marginal_core.lattice.graph import lattice_of
from marginal_core.lattice.paths import PathBatch
from marginal_core.lattice.sampling import lattice_samples
from marginal_core.lm.adapter import LM
from marginal_core.scoring.pass_budget import DEFAULT_MAX_BATCH_BYTES, pass_bytes
from marginal_core.scoring.plain_scoring import score_paths_plain
from marginal_core.scoring.score_stats import ScoreStats
from marginal_core.scoring.trie_scoring import score_paths

TEXT = "A quick fox."
QUESTION = "Which animal is quick?"
TOL = 1e-4


@pytest.fixture(scope="module")
def paths(lm) -> list[tuple[int, ...]]:
    """The canonical tokenization and 30 Algorithm-1 samples of TEXT (they share prefixes)."""
    lattice = lattice_of(TEXT, lm.tokenizer)
    samples = lattice_samples(lattice, 30, max_len=len(lattice.canonical) + 4, seed=0)
    return [lattice.canonical, *samples.paths.tolist()]


@pytest.fixture(scope="module", params=[None, QUESTION], ids=["bos", "question"])
def case(request, lm, paths):
    """(context ids, plain scores of paths) with and without a question as context."""
    ctx = context_ids(lm.tokenizer, request.param)
    return ctx, score_paths_plain(lm, paths, ctx)


def direct_log_p(lm, context: list[int], path: tuple[int, ...]) -> float:
    """log p(path | context) from the model's own forward over context + path.

    The log-softmax runs in fp64: torch's fp32 one over Gemma's 262,144 logits is off by about
    3e-5 per token, more than the chunked fp32 logsumexp of the scorers.
    """
    with torch.inference_mode():
        logits = lm.model(torch.tensor([[*context, *path]]), use_cache=False).logits[0]
    log_probs = logits.double().log_softmax(dim=-1)
    return sum(float(log_probs[len(context) - 1 + i, t]) for i, t in enumerate(path))


def test_trie_equals_plain_and_one_at_a_time(lm, paths, case):
    ctx, plain = case
    stats = ScoreStats()
    trie = score_paths(lm, paths, ctx, stats=stats)
    assert trie.dtype == np.float64 and trie.shape == (len(paths),)
    np.testing.assert_allclose(trie, plain, rtol=0, atol=TOL)
    one = [score_paths_plain(lm, [p], ctx)[0] for p in paths[:4]]
    np.testing.assert_allclose(trie[:4], one, rtol=0, atol=TOL)
    assert stats.paths == len(paths) and stats.scored_tokens == sum(map(len, paths))
    assert stats.plain_tokens == sum(len(ctx) + len(p) for p in paths)
    assert stats.tokens_fed < stats.plain_tokens and 0 < stats.saved_share < 1
    assert stats.tokens_fed <= stats.padded_tokens and stats.seconds > 0


def test_context_equals_one_forward_over_the_concatenation(lm, paths):
    ctx = context_ids(lm.tokenizer, QUESTION)
    picked = paths[:3]
    want = [direct_log_p(lm, ctx, p) for p in picked]
    np.testing.assert_allclose(score_paths(lm, picked, ctx), want, rtol=0, atol=TOL)


def test_small_budgets_force_many_passes_and_keep_scores(lm, paths, case):
    """Three rows of 4 tokens a pass: pieces cut mid-trie, ancestors carried between passes."""
    ctx, plain = case
    stats = ScoreStats()
    trie = score_paths(lm, paths, ctx, max_batch_tokens=12, row_tokens=4, stats=stats)
    np.testing.assert_allclose(trie, plain, rtol=0, atol=TOL)
    assert stats.forward_passes > 3
    stats = ScoreStats()
    small = score_paths_plain(lm, paths, ctx, max_batch_tokens=128, stats=stats)
    np.testing.assert_allclose(small, plain, rtol=0, atol=TOL)
    assert stats.forward_passes > 1 and stats.tokens_fed == stats.plain_tokens


@pytest.mark.parametrize("fixture", ["smollm_model", "gemma_model"])
def test_a_long_texts_passes_are_bounded_and_score_as_one_pass(fixture, request, monkeypatch):
    """Issue 20 item 4: a long path is fed in passes of at most DEFAULT_MAX_PASS_PAIRS (query,
    key) pairs, one row carrying its KV from pass to pass (no piece that feeds thousands of
    ancestors again), with a stop heard between passes; the scores equal one whole pass."""
    import threading

    from marginal_core.scoring import pass_budget
    from marginal_core.serving import turns

    loaded = request.getfixturevalue(fixture)
    text = " " + "The committee postponed its decision until the next meeting. " * 4
    lattice = lattice_of(text, loaded.tokenizer)
    some = [lattice.canonical, *lattice_samples(lattice, 3, seed=0).paths.tolist()]
    ctx = context_ids(loaded.tokenizer, None)
    whole, one = ScoreStats(), score_paths(loaded, some[:1], ctx, max_batch_tokens=4096, row_tokens=4096)
    np.testing.assert_allclose(one, score_paths_plain(loaded, some[:1], ctx), rtol=0, atol=TOL)
    monkeypatch.setattr(pass_budget, "DEFAULT_MAX_PASS_PAIRS", 8 * len(lattice.canonical))
    bounded = ScoreStats()
    np.testing.assert_allclose(score_paths(loaded, some[:1], ctx, stats=bounded), one, rtol=0, atol=TOL)
    assert bounded.forward_passes >= len(lattice.canonical) // 8 - 1
    assert bounded.tokens_fed == len(lattice.canonical) - 1 + len(ctx)  # no ancestor fed twice
    np.testing.assert_allclose(score_paths(loaded, some, ctx, stats=whole),
                               score_paths_plain(loaded, some, ctx), rtol=0, atol=TOL)
    passes, stop = [], threading.Event()
    with pytest.raises(turns.TurnCancelled), turns.Turns().run("t", should_stop=stop.is_set):
        score_paths(loaded, some[:1], ctx, progress=lambda done, total: (passes.append(done), stop.set()))
    assert len(passes) == 1  # the pass under way finished, the next one never started


def test_memory_cap_feeds_one_token_per_pass(smollm_model):
    lattice = lattice_of(TEXT, smollm_model.tokenizer)
    few = [lattice.canonical, *lattice_samples(lattice, 3, seed=0).paths.tolist()]
    ctx = context_ids(smollm_model.tokenizer, QUESTION)
    stats = ScoreStats()
    capped = score_paths(smollm_model, few, ctx, max_batch_bytes=1, stats=stats)
    np.testing.assert_allclose(capped, score_paths_plain(smollm_model, few, ctx), rtol=0, atol=TOL)
    assert stats.padded_tokens == stats.tokens_fed == stats.forward_passes - 1 + len(ctx)
    assert pass_bytes(smollm_model) == DEFAULT_MAX_BATCH_BYTES  # a CPU's passes: a fixed budget


def test_sliding_window_layers_are_masked_by_position(gemma_model):
    """With Gemma 3's window shrunk to 4 positions, its sliding layers matter on a short text."""
    lattice = lattice_of(TEXT, gemma_model.tokenizer)
    few = [lattice.canonical, *lattice_samples(lattice, 5, seed=1).paths.tolist()]
    ctx = context_ids(gemma_model.tokenizer, QUESTION)
    config = gemma_model.model.config
    wide = score_paths_plain(gemma_model, few, ctx)
    saved, config.sliding_window = config.sliding_window, 4
    try:
        plain = score_paths_plain(gemma_model, few, ctx)
        trie = score_paths(gemma_model, few, ctx, max_batch_tokens=24, row_tokens=6)
    finally:
        config.sliding_window = saved
    assert np.abs(plain - wide).max() > 0.1
    np.testing.assert_allclose(trie, plain, rtol=0, atol=TOL)


def test_edge_cases(smollm_model):
    lm = smollm_model
    ctx = context_ids(lm.tokenizer, None)
    canon = tuple(lattice_of(TEXT, lm.tokenizer).canonical)
    assert score_paths(lm, [], ctx).shape == (0,)
    given = [canon, (), canon[:2], canon, canon[:1]]
    scores = score_paths(lm, PathBatch.from_paths(given), ctx)
    np.testing.assert_allclose(scores, score_paths_plain(lm, given, ctx), rtol=0, atol=TOL)
    assert scores[1] == 0.0 and scores[0] == scores[3] and scores[0] < scores[2] < scores[4] < 0
    with pytest.raises(ValueError):
        score_paths(lm, [canon], [])
    with pytest.raises(ValueError):
        score_paths(lm, [(lm.model.config.vocab_size,)], ctx)


def test_progress_reaches_the_total(smollm_model):
    lattice = lattice_of(TEXT, smollm_model.tokenizer)
    calls: list[tuple[int, int]] = []
    score_paths(
        smollm_model, lattice_samples(lattice, 20, seed=0).paths, [1], max_batch_tokens=16,
        progress=lambda done, total: calls.append((done, total)),
    )
    assert len(calls) > 2 and calls[-1][0] == calls[-1][1]
    assert all(a[0] < b[0] for a, b in zip(calls, calls[1:]))


OOM_SCRIPT = textwrap.dedent(
    """
    import resource, sys
    import numpy as np
    from marginal_core.lattice.conditioning import context_ids
    from marginal_core.lattice.graph import lattice_of
    from marginal_core.models import load_model
    from marginal_core.lattice.sampling import lattice_samples
    from marginal_core.scoring.pass_budget import DEFAULT_MAX_BATCH_BYTES, pass_bytes
    from marginal_core.scoring.score_stats import ScoreStats
    from marginal_core.scoring.trie_scoring import score_paths

    lm = load_model("gemma3-270m", device="cpu", dtype="float32")
    lattice = lattice_of("A quick fox.", lm.tokenizer)
    paths = lattice_samples(lattice, 20, seed=0).paths
    ctx = context_ids(lm.tokenizer, None)
    want = score_paths(lm, paths, ctx, max_batch_tokens=16)
    size = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmSize")) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (size + 20 * 2**20, resource.RLIM_INFINITY))
    stats = ScoreStats()
    got = score_paths(lm, paths, ctx, max_batch_tokens=4096, stats=stats)
    print(stats.oom_retries, float(np.abs(got - want).max()))
    """
)


@pytest.mark.slow
def test_out_of_memory_halves_the_batch_and_retries():
    """Under an address-space limit 20 MiB above what is mapped, 262,144-wide logits cannot be
    allocated: the scorer must shrink its batches and still give the same scores."""
    run = subprocess.run([sys.executable, "-c", OOM_SCRIPT], capture_output=True, text=True, timeout=280)
    assert run.returncode == 0, run.stderr[-2000:]
    retries, diff = run.stdout.split()[-2:]
    assert int(retries) >= 1 and float(diff) < TOL


class _OomAbove(torch.nn.Module):
    """A decoder that raises an allocation failure when fed more than cap tokens at once."""

    def __init__(self, decoder: torch.nn.Module, cap: int) -> None:
        super().__init__()
        self.inner, self.cap, self.failures = decoder, cap, 0

    def forward(self, input_ids, **kwargs):
        if input_ids.numel() > self.cap:
            self.failures += 1
            raise torch.OutOfMemoryError("simulated: out of memory")
        return self.inner(input_ids=input_ids, **kwargs)


def test_injected_out_of_memory_backs_off_in_the_adapter(smollm_model):
    """An allocation failure halves the token budget until the passes fit; the scores stay."""
    lattice = lattice_of(TEXT, smollm_model.tokenizer)
    paths = lattice_samples(lattice, 30, seed=0).paths
    ctx = context_ids(smollm_model.tokenizer, QUESTION)
    lm = LM(smollm_model.loaded)  # an adapter of its own, whose decoder fails above 16 tokens
    lm.decoder = _OomAbove(lm.decoder, cap=16)
    stats = ScoreStats()
    got = score_paths(lm, paths, ctx, stats=stats)
    assert lm.decoder.failures > 0 and stats.oom_retries > 0
    np.testing.assert_allclose(got, score_paths(smollm_model, paths, ctx), rtol=0, atol=TOL)
    lm.decoder.cap = 0  # not even one token fits: a clear error, not a loop
    with pytest.raises(OutOfMemory):
        score_paths(lm, paths, ctx)


def test_the_contiguous_attention_scores_as_transformers_sdpa(lm, monkeypatch):
    """MARGINAL_TREE_ATTENTION=efficient runs attention through lm/attention.py's contiguous_sdpa
    (what a GPU session tries the memory-efficient kernel with): every masked call gets keys with
    no stride-0 head, and the scores are transformers' SDPA's (Gemma 3 has one KV head, whose
    repeat is a stride-0 view; SmolLM2 three)."""
    import copy
    from dataclasses import replace

    from marginal_core.lm.attention import CONTIGUOUS_SDPA, TREE_ATTENTION_ENV

    monkeypatch.setenv(TREE_ATTENTION_ENV, "efficient")
    other = LM(replace(lm.loaded, model=copy.deepcopy(lm.model)))
    assert other.tree_kernel == "efficient" and other.model.config._attn_implementation == CONTIGUOUS_SDPA
    real, masked = torch.nn.functional.scaled_dot_product_attention, []

    def watched(query, key, value, attn_mask=None, **kwargs):
        if attn_mask is not None:
            masked.append(key.is_contiguous() and key.shape[1] == query.shape[1])
        return real(query, key, value, attn_mask=attn_mask, **kwargs)

    lattice = lattice_of(TEXT, lm.tokenizer)
    paths = [lattice.canonical, *lattice_samples(lattice, 60, seed=0).paths.tolist()]
    ctx = context_ids(lm.tokenizer, QUESTION)
    want = score_paths(lm, paths, ctx)
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", watched)
    np.testing.assert_allclose(score_paths(other, paths, ctx), want, rtol=0, atol=1e-5)
    assert masked and all(masked)
    monkeypatch.setenv(TREE_ATTENTION_ENV, "flash")
    with pytest.raises(MarginalError, match="MARGINAL_TREE_ATTENTION='flash'"):
        LM(replace(lm.loaded))


def test_the_tree_rule_lets_a_query_see_the_context_its_ancestors_and_itself(smollm_model):
    """tree_allowed, from the pass's layout, against ancestry walked up the parent links: a real
    query sees the context, its ancestors and itself; a padding query the context only; with a
    window, only keys fewer than window positions back (no model needed: the trie's plan)."""
    from marginal_core.scoring.trie import build_trie, plan_pass, tree_allowed
    from marginal_core.scoring.trie_run import _Row

    lattice = lattice_of(TEXT, smollm_model.tokenizer)
    trie = build_trie([lattice.canonical, *lattice_samples(lattice, 40, seed=3).paths.tolist()])
    half = len(trie.fed) // 2
    rows = [_Row(0, half), _Row(half, len(trie.fed), frozenset(trie.ancestors(int(trie.fed[half]))))]
    plan = plan_pass(trie, rows, 2, 8, ctx_len=3)
    masks = tree_allowed(trie, plan, window=3)
    for r, queries in enumerate(plan.queries):
        nodes = {col: node for node, col in plan.columns(r).items()}
        for i in range(plan.widths[1]):
            node = queries[i] if i < len(queries) else None
            lineage = set(trie.ancestors(node)) | {node} if node is not None else set()
            want = [key < 3 or nodes.get(key) in lineage for key in range(masks["full_attention"].shape[2])]
            assert masks["full_attention"][r, i].tolist() == want
            pos = 2 + (trie.depth[node] if node is not None else 1)
            key_pos = [key if key < 3 else 2 + trie.depth[nodes[key]] if key in nodes else -1 for key in range(len(want))]
            assert masks["sliding_attention"][r, i].tolist() == [w and pos - p < 3 for w, p in zip(want, key_pos)]


@pytest.mark.parametrize("fixture", ["smollm_model", "gemma_model"])
def test_flex_attention_scores_as_the_dense_masks(fixture, request, monkeypatch):
    """MARGINAL_TREE_ATTENTION=flex: every tree-masked pass goes through FlexAttention under a
    BlockMask built from the tree rule, and the scores are the dense masks' (SmolLM2's three KV
    heads, Gemma 3's one and its sliding layers, with the window shrunk to 4 positions so that
    it matters), over many small passes that carry ancestors."""
    import copy
    from dataclasses import replace

    from torch.nn.attention import flex_attention as flex

    from marginal_core.lm import attention
    from marginal_core.lm.attention import FLEX_OR_SDPA, TREE_ATTENTION_ENV

    base = request.getfixturevalue(fixture)
    monkeypatch.setenv(TREE_ATTENTION_ENV, "flex")
    lm = LM(replace(base.loaded, model=copy.deepcopy(base.model)))
    assert lm.tree_kernel == "flex" and lm.model.config._attn_implementation == FLEX_OR_SDPA
    calls = []
    real = attention.flex_kernel("cpu")
    monkeypatch.setattr(attention, "flex_kernel", lambda device: lambda *a, **kw: (calls.append(kw["block_mask"]),
                                                                                   real(*a, **kw))[1])
    lattice = lattice_of(TEXT, base.tokenizer)
    paths = [lattice.canonical, *lattice_samples(lattice, 20, seed=1).paths.tolist()]
    ctx = context_ids(base.tokenizer, QUESTION)
    config = base.model.config.get_text_config()
    saved = getattr(config, "sliding_window", None)
    if saved is not None:
        config.sliding_window = lm.config.sliding_window = 4
    try:
        want = score_paths(base, paths, ctx, max_batch_tokens=24, row_tokens=6)
        stats = ScoreStats()
        got = score_paths(lm, paths, ctx, max_batch_tokens=24, row_tokens=6, stats=stats)
    finally:
        if saved is not None:
            config.sliding_window = lm.config.sliding_window = saved
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=TOL)  # summed in another order: 3e-6 of 63 nats seen
    assert stats.forward_passes > 3 and len(calls) == lm.layers * (stats.forward_passes - 1)
    assert all(isinstance(mask, flex.BlockMask) for mask in calls)


def test_flex_attention_soft_caps_and_shares_kv_heads():
    """flex_or_sdpa under a BlockMask: the logits scaled, soft-capped (Gemma 2's way) and masked,
    two query heads to a KV head, against the same attention written out."""
    from torch.nn.attention.flex_attention import create_block_mask

    from marginal_core.lm.attention import flex_or_sdpa

    torch.manual_seed(0)
    query, key, value = torch.randn(2, 4, 5, 8), torch.randn(2, 2, 7, 8), torch.randn(2, 2, 7, 8)
    allowed = torch.rand(2, 5, 7) < 0.6
    allowed[:, :, 0] = True
    mask = create_block_mask(lambda b, h, q, k: allowed[b, q, k], 2, None, 5, 7, device="cpu")
    got, _ = flex_or_sdpa(torch.nn.Module(), query, key, value, mask, scaling=0.5, softcap=2.0)
    keys, values = key.repeat_interleave(2, dim=1), value.repeat_interleave(2, dim=1)
    scores = 2.0 * torch.tanh(query @ keys.transpose(-1, -2) * 0.5 / 2.0)
    want = scores.masked_fill(~allowed[:, None], float("-inf")).softmax(dim=-1) @ values
    torch.testing.assert_close(got, want.transpose(1, 2), rtol=0, atol=1e-5)

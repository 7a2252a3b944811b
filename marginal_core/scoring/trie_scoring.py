"""Log-probabilities of tokenizations under a causal LM, each distinct prefix computed once
(docs/design.md, point 8 and "Where the time goes").

``score_paths`` runs the paths' prefix trie (``marginal_core.scoring.trie``) after a context whose KV
cache it takes from the LM adapter, or shares with its caller: a ``ContextState`` passed in is
reused as it is, so a Marginalizer prefills its context once for every chunk and method. The
passes (``marginal_core.scoring.trie_run``) carry rows' ancestors' KV states from pass to pass under
tree attention masks; the LM head and the log-softmax run on the hidden states in chunks of rows
(pooled across passes, since each chunk reads the whole output layer), in fp32, reading only the
needed tokens. Pass sizes come from ``marginal_core.scoring.pass_budget``, the work done is counted in a
``ScoreStats`` (``marginal_core.scoring.score_stats``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial

import numpy as np
import torch

from marginal_core.ground import hooks as serving_hooks
from marginal_core.ground.progress import Progress
from marginal_core.lattice.paths import Path, PathBatch
from marginal_core.lm.adapter import LM
from marginal_core.lm.contexts import ContextState
from marginal_core.scoring.pass_budget import DEFAULT_ROW_TOKENS, pass_bytes, pass_tokens
from marginal_core.scoring.score_stats import ScoreStats, count_call
from marginal_core.scoring.trie import as_paths, build_trie, path_sums
from marginal_core.scoring.trie_run import TrieRun

# what callers import from here: the scorer, its stats, and its pass budget
__all__ = ["check_paths", "context_state", "score_paths"]


def context_state(
    lm: LM, context: Sequence[int] | ContextState, stats: ScoreStats, chunk_tokens: int
) -> ContextState:
    """The context's KV cache: the one given, or a fresh prefill counted in stats."""
    state = lm.state_of(context, chunk_tokens)
    if state is context:
        return state
    stats.forward_passes += state.passes
    stats.tokens_fed += len(state)
    stats.padded_tokens += len(state)
    return state


def check_paths(lm: LM, paths: list[Path], context: Sequence[int] | ContextState) -> list[int]:
    """The context ids; refuse an empty context and token ids outside the vocabulary."""
    ids = list(context.ids) if isinstance(context, ContextState) else [int(t) for t in context]
    if not ids:
        raise ValueError("the context is empty: condition on at least a BOS token (see context_ids)")
    lm.check_ids([*ids, *(t for p in paths for t in p)])
    return ids


def score_paths(
    lm: LM,
    paths: PathBatch | Sequence[Path],
    context: Sequence[int] | ContextState,
    *,
    max_batch_tokens: int | None = None,
    row_tokens: int = DEFAULT_ROW_TOKENS,
    max_batch_bytes: int | None = None,
    progress: Progress | None = None,
    stats: ScoreStats | None = None,
) -> np.ndarray:
    """log p(path | context) of every path (float64), each distinct prefix computed once.

    context is token ids (prefilled here) or a ContextState to share. The paths' prefix trie
    runs in passes of about max_batch_tokens tokens (default: pass_tokens) in rows of up to
    row_tokens, shrunk to fit max_batch_bytes of estimated activations (default: pass_bytes) and
    halved on out-of-memory errors. progress gets (tokens fed, tokens to feed), the context
    counted as fed. In a server's run whose device shares passes (``serving_hooks.batcher``, a
    ``marginal_core.serving.batching.Batcher``), paths of at most one pass's worth of tokens (the
    device's pass_tokens, so that a pass's leader hears Stop as soon as a run alone) go in one
    trie with other runs' paths after the same context; outside a run they are scored here.
    """
    stats = stats if stats is not None else ScoreStats()
    started = time.perf_counter()
    path_list = as_paths(paths)
    if not path_list:
        return np.zeros(0, dtype=np.float64)
    max_batch_tokens = pass_tokens(lm, max_batch_tokens)
    ctx = check_paths(lm, path_list, context)
    lm.require_tree_masks()
    state = context_state(lm, context, stats, max_batch_tokens)
    budgets = (max_batch_tokens, row_tokens, pass_bytes(lm, max_batch_bytes))
    size, limit, batcher = sum(map(len, path_list)), pass_tokens(lm), serving_hooks.batcher()
    if batcher is not None and size <= limit:
        log_p, share = batcher.submit((lm, state.ids, budgets), (path_list, state), size, limit,
                                      partial(_score_together, lm, budgets))
        stats.add(share)
        if progress:
            progress(len(state) + size, len(state) + size)
    else:
        log_p = _score_trie(lm, path_list, state, budgets, stats, progress)
    count_call(stats, path_list, ctx, started)
    return log_p


def _score_trie(lm: LM, paths: list[Path], state: ContextState, budgets: tuple[int, int, int],
                stats: ScoreStats, progress: Progress | None) -> np.ndarray:
    """The paths' log-probabilities after the state, from one run of their prefix trie."""
    trie = build_trie(paths)
    run = TrieRun(lm, trie, state, *budgets, stats, progress)
    with torch.inference_mode():
        run.run_trie()
        run.finish()
    return path_sums(trie, run.node_lp.cpu().numpy())


def _score_together(lm: LM, budgets: tuple[int, int, int],
                    requests: list[tuple[list[Path], ContextState]]) -> list[tuple[np.ndarray, ScoreStats]]:
    """Several runs' paths after one context in one trie: each request's log-probabilities and
    its share of the work (by path tokens)."""
    joint = ScoreStats()
    paths = [path for group, _ in requests for path in group]
    log_p = _score_trie(lm, paths, requests[0][1], budgets, joint, None)
    total, out, start = max(sum(map(len, paths)), 1), [], 0
    for group, _ in requests:
        out.append((log_p[start : start + len(group)], joint.share(sum(map(len, group)) / total)))
        start += len(group)
    return out

"""The reference scorer: padded batches of context + path, no KV reuse and no prefix sharing
(what the trie scorer in ``marginal_core.scoring.trie_scoring`` is checked and benchmarked against)."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import torch

from marginal_core.ground.progress import Progress
from marginal_core.lattice.paths import Path, PathBatch
from marginal_core.lm.adapter import LM
from marginal_core.lm.oom import halved
from marginal_core.scoring.pass_budget import pass_bytes, pass_tokens
from marginal_core.scoring.score_stats import ScoreStats, count_call
from marginal_core.scoring.trie import as_paths
from marginal_core.scoring.trie_scoring import check_paths


def _next_batch(
    lengths: np.ndarray, pending: np.ndarray, budget: int, lm: LM, max_bytes: int
) -> np.ndarray:
    """The longest head of the length-sorted pending sequences whose padded batch fits."""
    stop = 1
    while stop < len(pending):
        width = int(lengths[pending[stop]])
        if (stop + 1) * width > budget or lm.activation_bytes(stop + 1, width, width) > max_bytes:
            break
        stop += 1
    return pending[:stop]


def _plain_batch(lm: LM, seqs: list[list[int]], ctx_len: int, budget: int) -> list[np.ndarray]:
    """Token log-probs of each sequence's part after the context, from one right-padded pass.

    Right padding needs no attention mask: causal attention never lets a real token see a pad.
    """
    width = max(map(len, seqs))
    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    rows: list[int] = []
    tokens: list[int] = []
    for b, seq in enumerate(seqs):
        ids[b, : len(seq)] = torch.tensor(seq)
        rows.extend(range(b * width + ctx_len - 1, b * width + len(seq) - 1))
        tokens.extend(seq[ctx_len:])
    hidden = lm.decoder(input_ids=ids.to(lm.device), use_cache=False).last_hidden_state
    picked = hidden.reshape(len(seqs) * width, -1)[torch.tensor(rows, dtype=torch.long, device=lm.device)]
    order = torch.arange(len(rows), device=lm.device)
    targets = torch.tensor(tokens, dtype=torch.long, device=lm.device)
    lp = lm.token_logprobs(picked, order, targets, budget)
    return np.split(lp.double().cpu().numpy(), np.cumsum([len(s) - ctx_len for s in seqs])[:-1])


def score_paths_plain(
    lm: LM,
    paths: PathBatch | Sequence[Path],
    context: Sequence[int],
    *,
    max_batch_tokens: int | None = None,
    max_batch_bytes: int | None = None,
    progress: Progress | None = None,
    stats: ScoreStats | None = None,
) -> np.ndarray:
    """log p(path | context) from padded batches of context + path: the reference to check against.

    No KV reuse and no prefix sharing; the same chunked LM head as score_paths. Sequences are
    batched by length under max_batch_tokens padded tokens; progress gets (tokens, total).
    """
    stats = stats if stats is not None else ScoreStats()
    started = time.perf_counter()
    path_list = as_paths(paths)
    if not path_list:
        return np.zeros(0, dtype=np.float64)
    ctx = check_paths(lm, path_list, context)
    seqs = [ctx + list(p) for p in path_list]
    lengths = np.array([len(s) for s in seqs])
    pending = np.argsort(lengths, kind="stable")
    scores = np.zeros(len(seqs), dtype=np.float64)
    budget, done, max_bytes = pass_tokens(lm, max_batch_tokens), 0, pass_bytes(lm, max_batch_bytes)
    with torch.inference_mode():
        while len(pending):
            batch = _next_batch(lengths, pending, budget, lm, max_bytes)
            try:
                token_lps = _plain_batch(lm, [seqs[i] for i in batch], len(ctx), budget)
            except (RuntimeError, MemoryError) as err:
                budget = halved(budget, err, lm.device.type)
                stats.oom_retries += 1
                continue
            scores[batch] = [lp.sum() for lp in token_lps]
            pending = pending[len(batch) :]
            stats.forward_passes += 1
            stats.tokens_fed += int(lengths[batch].sum())
            stats.padded_tokens += len(batch) * int(lengths[batch].max())
            done += int(lengths[batch].sum())
            if progress:
                progress(done, int(lengths.sum()))
    count_call(stats, path_list, ctx, started)
    return scores

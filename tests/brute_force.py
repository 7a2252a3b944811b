"""The float64 reference the estimator and surprisal tests compare with: a copy of a model in
float64, and plain transformers forwards over context + path (no trie, no KV sharing, no
library scoring), many paths in one left-padded batch."""

from __future__ import annotations

import copy
import dataclasses

import torch

from marginal_core.lm.adapter import LM

# Paths per padded forward: the rows' logits over the vocabulary stay within a few hundred MB.
BATCH = 16

_FLOAT64: dict[str, LM] = {}


def float64_lm(lm: LM) -> LM:
    """The same model in float64, as an LM (kept until :func:`forget_float64`): a search or an
    estimator run on it computes what the brute force does, so a comparison measures the
    algorithm, not float32's rounding in two orders."""
    if lm.name not in _FLOAT64:
        loaded = dataclasses.replace(lm.loaded, model=copy.deepcopy(lm.model).double(), dtype=torch.float64)
        _FLOAT64[lm.name] = LM(loaded)
    return _FLOAT64[lm.name]


def forget_float64() -> None:
    """Free the float64 copies (3.2 GB for both models), as each test module that used them ends."""
    _FLOAT64.clear()


def next_token_log_probs(lm64: LM, context: list[int], paths: list[tuple[int, ...]]) -> list[torch.Tensor]:
    """For each path, log p(next token | context + path[:i]) for i = 0 .. len(path): a (len(path)
    + 1, vocab) float64 tensor from a plain forward over context + path. Paths go in batches of
    BATCH, left-padded under an attention mask with their own positions, so that every row reads
    only its own tokens and the last len(path) + 1 positions are each path's."""
    rows: list[torch.Tensor] = []
    for start in range(0, len(paths), BATCH):
        group = [list(context) + list(p) for p in paths[start : start + BATCH]]
        width = max(map(len, group))
        ids = torch.zeros((len(group), width), dtype=torch.long)
        mask = torch.zeros((len(group), width), dtype=torch.long)
        for i, seq in enumerate(group):
            ids[i, width - len(seq) :] = torch.tensor(seq)
            mask[i, width - len(seq) :] = 1
        positions = (mask.cumsum(1) - 1).clamp(min=0)
        keep = max(len(p) for p in paths[start : start + BATCH]) + 1
        with torch.inference_mode():  # the head's rows from the context's last position on (Gemma's softcap too)
            logits = lm64.model(ids, attention_mask=mask, position_ids=positions, logits_to_keep=keep).logits.double()
        log_probs = torch.log_softmax(logits, dim=-1)
        rows += [log_probs[i, keep - len(p) - 1 :] for i, p in enumerate(paths[start : start + BATCH])]
    return rows


def path_log_prob(rows: torch.Tensor, path: tuple[int, ...]) -> float:
    """log p(path | context) from its next_token_log_probs rows."""
    return sum(float(rows[i, t]) for i, t in enumerate(path))

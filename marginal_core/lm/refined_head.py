"""The LM head's log-softmax from a bfloat16 product, refined in float32 where the bits matter
(docs/precision.md, "bfloat16").

A bfloat16 logit keeps 8 significant bits: a logit of 20 rounds by up to 0.06 nats. The head is
the largest product of a small model, so it runs in bfloat16, and then the few entries that
carry the answer are recomputed in float32 from the float32 weights, one dot product each: the
target token of every (row, token) pair, and every logit within ``NEAR_NATS`` of its row's
largest, which hold nearly all of the normaliser. The rest keep their bfloat16 values; their
rounding errors are unbiased and each weighs at most e^-NEAR_NATS of the top one's share.
"""

from __future__ import annotations

import torch

# Logits within this many nats of their row's largest are recomputed in float32.
NEAR_NATS = 8.0
# (row, token) pairs whose float32 logits are computed at a time (their weight rows are gathered).
PAIR_BLOCK = 16384


def exact_logits(hidden: torch.Tensor, weight: torch.Tensor, rows: torch.Tensor, tokens: torch.Tensor,
                 softcap: float | None) -> torch.Tensor:
    """hidden[rows] . weight[tokens] in float32 for each pair, soft-capped where the model caps."""
    out = torch.empty(len(rows), dtype=torch.float32, device=hidden.device)
    for lo in range(0, len(rows), PAIR_BLOCK):
        hi = lo + PAIR_BLOCK
        h = hidden.index_select(0, rows[lo:hi]).float()
        w = weight.index_select(0, tokens[lo:hi]).float()
        out[lo:hi] = torch.einsum("ph,ph->p", h, w)
    if softcap:
        out.div_(softcap).tanh_().mul_(softcap)
    return out


def refined_logprobs(hidden: torch.Tensor, weight: torch.Tensor, low_weight: torch.Tensor, rows: torch.Tensor,
                     tokens: torch.Tensor, softcap: float | None, block: torch.Tensor | None = None) -> torch.Tensor:
    """log-softmax(hidden @ weight.T)[rows, tokens] in float32, the product taken in low_weight's
    dtype and refined (module docstring). block, if given, is a [>= len(hidden), vocab] scratch
    tensor in low_weight's dtype that the logits are written into."""
    out = None if block is None else block[: len(hidden)]
    logits = torch.matmul(hidden.to(low_weight.dtype), low_weight.T, out=out)
    if softcap:
        logits.div_(softcap).tanh_().mul_(softcap)
    top = logits.amax(dim=-1, keepdim=True)
    near = logits >= top - NEAR_NATS
    near_rows, near_tokens = near.nonzero(as_tuple=True)
    near_exact = exact_logits(hidden, weight, near_rows, near_tokens, softcap)
    shift = top.squeeze(-1).float()
    rest = logits.masked_fill_(near, float("-inf")).sub_(top).exp_().sum(dim=-1, dtype=torch.float32)
    total = rest.index_add_(0, near_rows, (near_exact - shift[near_rows]).exp())
    lse = shift + total.log()
    return exact_logits(hidden, weight, rows, tokens, softcap) - lse[rows]

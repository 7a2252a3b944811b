"""What the model's own token view expects after a prompt (docs/design.md, "What comes next"): the
next token after the prompt's canonical tokens (what ``generate`` samples from) and token
healing's (the last canonical token backed off, the next token constrained to begin with its
bytes, as Guidance does), both as probabilities over the vocabulary's ids, from plain forwards
(``char_keys`` folds them by character).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from marginal_core.ground import hooks as serving_hooks
from marginal_core.lattice.vocab import Vocabulary
from marginal_core.lm.adapter import LM
from marginal_core.lm.contexts import ContextState


def next_token_probs(lm: LM, state: ContextState, ids: Sequence[Sequence[int]]) -> list[np.ndarray]:
    """For each token sequence, p(next token | context + it) over the model's vocabulary, in
    float64: one forward each from a copy of the context's KV."""
    return [np.asarray(token_probs(lm, state, seq, [])) for seq in ids]


@dataclass(frozen=True)
class TokenViews:
    """p(next token) after the canonical ids (``canonical``), and token healing's parts: the
    last canonical token's bytes (``tail``), p(next token) after the ids before it (``before``),
    and after each token that spells the tail exactly in its place (``heads``)."""

    canonical: np.ndarray
    tail: bytes
    before: np.ndarray
    heads: dict[int, np.ndarray]


def token_views(lm: LM, state: ContextState, canonical: Sequence[int], vocab: Vocabulary,
                kept: Mapping[tuple[int, ...], np.ndarray] | None = None) -> TokenViews:
    """The canonical and healed views of what comes after the canonical ids: the next-token
    distributions after the canonical ids and the ids before the last as ``kept`` (a search's,
    by path) has them, else from one plain forward over the ids."""
    canonical = [int(t) for t in canonical]
    if not canonical:  # an empty prompt: nothing to back off
        probs = next_token_probs(lm, state, [[]])[0]
        return TokenViews(probs, b"", probs, {})
    tail = vocab.surface(canonical[-1])
    kept = kept or {}
    ends = (tuple(canonical[:-1]), tuple(canonical))
    if all(end in kept for end in ends):
        before, after = (kept[end] for end in ends)
    else:
        with torch.inference_mode(), serving_hooks.unit():
            hidden = torch.cat([state.last_hidden, lm.hidden_after(state, canonical)])[-2:]
            before, after = torch.softmax(lm.head_logits(hidden, {}).to(torch.float64), dim=-1).cpu().numpy()
    others = [v for v in vocab.ids_beginning(tail) if vocab.surfaces[v] == tail and v != canonical[-1]]
    heads = dict(zip(others, next_token_probs(lm, state, [[*canonical[:-1], v] for v in others]), strict=True))
    return TokenViews(after, tail, before, {**heads, canonical[-1]: after})


def token_probs(lm: LM, state: ContextState, prefix: Sequence[int], new: Sequence[int]) -> list[float]:
    """p(new[i] | context + prefix + new[:i]) for each new token, from one forward over them
    (with ``new`` empty: the context's own next-token distribution, as one list of floats)."""
    seq = [int(t) for t in (*prefix, *new)]
    with torch.inference_mode(), serving_hooks.unit():
        rows = [state.last_hidden]
        if len(seq) > 1 or (seq and not new):
            rows.append(lm.hidden_after(state, seq[:-1] if new else seq))
        hidden = torch.cat(rows)[len(prefix) :] if new else torch.cat(rows)[-1:]
        log_probs = torch.log_softmax(lm.head_logits(hidden, {}).to(torch.float64), dim=-1)
    if not new:
        return log_probs[0].exp().cpu().tolist()
    picked = log_probs[torch.arange(len(new)), torch.tensor([int(t) for t in new])]
    return picked.exp().cpu().tolist()

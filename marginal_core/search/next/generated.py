"""``generate``'s two continuations beside the marginal's (docs/design.md, "What comes next"):
transformers' generate from the canonical tokens and from token healing's prefix, with the same
settings, stopped once their tokens spell the characters asked for; each character's probability
is that of the tokens that begin inside it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from transformers import StoppingCriteria, StoppingCriteriaList

from marginal_core.lattice.vocab import Vocabulary
from marginal_core.search.char_keys import healing_ids
from marginal_core.search.next.results import Continuation
from marginal_core.search.state import PrefixState
from marginal_core.search.token_views import token_probs


def generated(p: PrefixState, chars: int, how: str, seed: int | None) -> tuple[Continuation, Continuation]:
    """transformers' generate from the canonical tokens, and from token healing (the last canonical
    token backed off, the first new token constrained to begin with its bytes), with the same
    settings, each until its tokens spell ``chars`` characters; each character's probability is
    that of the tokens that begin inside it."""
    views = p.views()
    canonical = list(p.lattice.canonical) if p.lattice is not None else []
    tail = views.tail
    sampled = how == "sample"
    options: dict[str, Any] = {"do_sample": sampled, "max_new_tokens": chars + 8, "repetition_penalty": 1.0}
    length = len(p.state) + len(canonical)
    if sampled:
        options.update(top_k=0, top_p=1.0, temperature=1.0)
    allowed = healing_ids(p.vocab, tail, views.heads) if tail else None
    out = []
    for prefix, first in ((canonical, None), (canonical[:-1], allowed)):
        if seed is not None:
            torch.manual_seed(seed)
        extra = {} if first is None else {"prefix_allowed_tokens_fn": _first_of(len(p.state) + len(prefix), first,
                                                                                 p.lm.vocab)}
        spelled = _Spelled(p.vocab, length - (first is not None), tail if first is not None else b"", chars)
        new = p.lm.generate([*p.state.ids, *prefix], **options, **extra,
                            stopping_criteria=StoppingCriteriaList([spelled]))[0]
        probs = token_probs(p.lm, p.state, prefix, new)
        if first is not None and new:
            probs[0] /= float(views.before[first].sum())
        out.append(_spelled(p.vocab, new, probs, tail if first is not None else b"", chars))
    return out[0], out[1]


class _Spelled(StoppingCriteria):
    """generate's stop once the new tokens (ids from ``length`` on) spell ``chars`` characters after
    ``tail`` (which the first spells again), or one of them writes no byte."""

    def __init__(self, vocab: Vocabulary, length: int, tail: bytes, chars: int) -> None:
        self.vocab, self.length, self.tail, self.chars = vocab, length, tail, chars

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: object) -> torch.Tensor:
        return torch.tensor([self._done(row[self.length :].tolist()) for row in input_ids], device=input_ids.device)

    def _done(self, ids: list[int]) -> bool:
        surfaces = [_written(self.vocab, t) for t in ids]
        if not all(surfaces):
            return True
        return len(b"".join(surfaces)[len(self.tail) :].decode("utf-8", errors="ignore")) >= self.chars  # type: ignore[arg-type]


def _written(vocab: Vocabulary, t: int) -> bytes | None:
    """What a generated token writes; None (or b"") for one that ends a continuation."""
    return vocab.surfaces[t] if t < vocab.size and t not in vocab.byte_tokens else None


def _first_of(length: int, first: list[int], size: int) -> Callable[[int, torch.Tensor], list[int]]:
    """generate's prefix_allowed_tokens_fn: ``first`` at the first new token, every id after."""
    every = list(range(size))
    return lambda _batch, ids: first if len(ids) == length else every


def _spelled(vocab: Vocabulary, ids: list[int], probs: list[float], tail: bytes, chars: int) -> Continuation:
    """New tokens as the characters they write after ``tail`` (which the first spells again), up to
    ``chars`` of them, each with the product of the probabilities of the tokens that begin inside it;
    a token that writes no byte ends it."""
    data, starts, ended = b"", [], False
    for t, q in zip(ids, probs, strict=True):
        surface = _written(vocab, t)
        if not surface:
            ended = True
            break
        starts.append((len(data), q))
        data += surface
    data = data[len(tail) :]
    starts = [(max(0, at - len(tail)), q) for at, q in starts]
    text = data.decode("utf-8", errors="replace")[:chars]
    bounds = np.cumsum([0] + [len(ch.encode()) for ch in text])
    char_probs = []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        char_probs.append(float(np.prod([q for at, q in starts if a <= at < b] or [1.0])))
    return Continuation(text, tuple(char_probs), ended and len(text) < chars)

"""A Marginalizer's text cut into regions of surprisal (docs/design.md, "Surprisal"): the prefix
walk's bounds at every byte and the canonical tokens' log p, streamed as :class:`Surprisal`s."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Protocol

import numpy as np
import torch

from marginal_core.estimators.beam_width import DEFAULT_TOLERANCE, MAX_BEAM_WIDTH, auto_widths, check_width
from marginal_core.estimators.prefix_walk import PrefixMasses, exact_width, prefix_masses
from marginal_core.estimators.surprisal_result import SURPRISAL_METHODS, Surprisal, check_choice, region_spans
from marginal_core.lattice.graph import DEFAULT_ENUMERATION_BUDGET, Lattice
from marginal_core.lattice.proposal import proposal_of
from marginal_core.lm.adapter import LM
from marginal_core.lm.contexts import ContextState
from marginal_core.models import dtype_name
from marginal_core.progress import Progress, StopCheck
from marginal_core.serving import hooks as serving_hooks


class OneText(Protocol):
    """What the walk reads of a Marginalizer: its model, text, context, lattice, the context's KV
    and the window check."""

    lm: LM
    text: str
    context: str | None
    lattice: Lattice

    def context_state(self) -> ContextState: ...

    def require_fits(self, tokens: int, what: str = ..., hint: str = ...) -> None: ...


def surprisal_stream(m: OneText, unit: str = "word", space: str = "trailing", method: str = "beam", *,
                     width: int | None = None, max_width: int = MAX_BEAM_WIDTH, tolerance: float = DEFAULT_TOLERANCE,
                     time_budget: float | None = None, budget: int = DEFAULT_ENUMERATION_BUDGET,
                     should_stop: StopCheck | None = None, progress: Progress | None = None) -> Iterator[Surprisal]:
    """The text's surprisal after every step of the walk; the last is the result. ``beam``: the
    anytime walk (widths 16, 64, ... up to ``max_width``, a server's cap, until every byte's
    bounds lie within ``tolerance``), or one walk of ``width``; ``exact``: every prefix
    (TooManyPathsError past ``budget`` prefixes)."""
    region_spans(m.text, unit, space)  # the choices and the text, checked before any work
    check_choice(method, SURPRISAL_METHODS, "surprisal method")
    if width is not None:
        check_width(width)
    widths: Sequence[int] = ((exact_width(m.lattice, budget),) if method == "exact"
                             else (width,) if width is not None else auto_widths(max_width))
    m.require_fits(proposal_of(m.lattice).max_steps, "the longest tokenization of the text")
    started = time.perf_counter()
    state = m.context_state()
    canonical = canonical_token_logprobs(m.lm, m.lattice.canonical, state)
    nodes = m.lattice.canonical_nodes
    base = Surprisal(m.text, m.lm.name, m.context, dtype_name(m.lm.dtype), str(m.lm.device), method, unit, space,
                     len(m.lattice.data) - len(m.text.encode("utf-8")), np.zeros(1), np.zeros(1),
                     tuple(zip(nodes[:-1], nodes[1:])), canonical, -np.inf, 0.0)
    for masses in prefix_masses(m.lm, m.lattice, state, widths=widths, tolerance=tolerance,
                                time_budget=time_budget, progress=progress, should_stop=should_stop):
        serving_hooks.checkpoint()
        yield _with(base, masses, time.perf_counter() - started)


def _with(base: Surprisal, masses: PrefixMasses, seconds: float) -> Surprisal:
    """The surprisal with the walk's bounds so far."""
    return replace(base, prefix_lower=masses.lower, prefix_upper=masses.upper, log_p_text=masses.log_p_text,
                   seconds=seconds, widths=masses.widths, cancelled=masses.cancelled)


def canonical_token_logprobs(lm: LM, canonical: Sequence[int], context: Sequence[int] | ContextState) -> np.ndarray:
    """log p of each canonical token given the context and the tokens before it (float64)."""
    ctx = lm.state_of(context)
    ids = torch.tensor([list(canonical)], device=lm.device)
    with torch.inference_mode():
        cache = copy.deepcopy(ctx.cache)
        with serving_hooks.unit():
            out = lm.decoder(input_ids=ids[:, :-1], cache=cache, use_cache=True) if len(canonical) > 1 else None
        hidden = ctx.last_hidden if out is None else torch.cat([ctx.last_hidden, out.last_hidden_state[0]], 0)
        rows = torch.arange(len(canonical), device=lm.device)
        with serving_hooks.unit():
            lp = lm.token_logprobs(hidden, rows, ids[0], len(canonical), dtype=torch.float64)
    return lp.cpu().numpy()

"""A Marginalizer's text cut into regions of surprisal (docs/design.md, "Surprisal"): the prefix
search's bounds at every byte and the canonical tokens' log p, streamed as :class:`Surprisal`s."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Protocol

import numpy as np
import torch

from marginal_core.estimators.beam_width import DEFAULT_TOLERANCE
from marginal_core.estimators.prefix_search import MAX_ROWS, PrefixMasses, check_exact, prefix_masses
from marginal_core.estimators.surprisal_result import SURPRISAL_METHODS, Surprisal, check_choice, region_spans
from marginal_core.lattice.graph import DEFAULT_ENUMERATION_BUDGET, Lattice
from marginal_core.lattice.proposal import proposal_of
from marginal_core.lm.adapter import LM
from marginal_core.lm.contexts import ContextState
from marginal_core.models import dtype_name
from marginal_core.progress import Progress, StopCheck
from marginal_core.serving import hooks as serving_hooks


class OneText(Protocol):
    """What the search reads of a Marginalizer: its model, text, context, lattice, the context's KV
    and the window check."""

    lm: LM
    text: str
    context: str | None
    lattice: Lattice

    def context_state(self) -> ContextState: ...

    def require_fits(self, tokens: int, what: str = ..., hint: str = ...) -> None: ...


def surprisal_stream(m: OneText, unit: str = "word", space: str = "trailing", method: str = "search", *,
                     max_rows: int = MAX_ROWS, tolerance: float = DEFAULT_TOLERANCE, time_budget: float | None = None,
                     budget: int = DEFAULT_ENUMERATION_BUDGET, should_stop: StopCheck | None = None,
                     progress: Progress | None = None) -> Iterator[Surprisal]:
    """The text's surprisal after every round of the prefix search; the last is the result.
    ``search``: rounds of at most ``max_rows`` prefixes (a server's cap) until every ``unit``
    region's interval is within ``tolerance`` nats, a round moves none by that much, ``budget``
    prefixes are scored, the time budget runs out, or should_stop; ``exact``: every prefix
    (TooManyPathsError past ``budget``).
    progress hears each round's passes (tokens fed, of the round's)."""
    region_spans(m.text, unit, space)  # the choices and the text, checked before any work
    check_choice(method, SURPRISAL_METHODS, "surprisal method")
    if method == "exact":
        check_exact(m.lattice, budget)
    m.require_fits(proposal_of(m.lattice).max_steps, "the longest tokenization of the text")
    started = time.perf_counter()
    state = m.context_state()
    canonical = canonical_token_logprobs(m.lm, m.lattice.canonical, state)
    nodes = m.lattice.canonical_nodes
    offset = len(m.lattice.data) - len(m.text.encode("utf-8"))
    base = Surprisal(m.text, m.lm.name, m.context, dtype_name(m.lm.dtype), str(m.lm.device), method, unit, space,
                     offset, np.zeros(1), np.zeros(1), tuple(zip(nodes[:-1], nodes[1:])), canonical, -np.inf, 0.0)
    for masses in prefix_masses(m.lm, m.lattice, state, boundaries=base.cuts, exact=method == "exact", max_rows=max_rows,
                                tolerance=tolerance, time_budget=time_budget, progress=progress,
                                should_stop=should_stop, budget=budget):
        serving_hooks.checkpoint()
        yield _with(base, masses, time.perf_counter() - started)


def _with(base: Surprisal, masses: PrefixMasses, seconds: float) -> Surprisal:
    """The surprisal with the search's bounds so far."""
    return replace(base, prefix_lower=masses.lower, prefix_upper=masses.upper, log_p_text=masses.log_p_text,
                   seconds=seconds, rounds=masses.rounds, scored=masses.scored, cancelled=masses.cancelled)


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

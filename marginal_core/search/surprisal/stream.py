"""A Marginalizer's text cut into regions of surprisal (docs/design.md, "Surprisal"): the prefix
search's bounds at every byte, its next-byte sums and the canonical tokens' log p (all from its
rounds' heads: no other pass), streamed as :class:`Surprisal`s."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, Protocol

import numpy as np

from marginal_core.ground import hooks as serving_hooks
from marginal_core.lattice.graph import Lattice
from marginal_core.lattice.proposal import proposal_of
from marginal_core.lm.adapter import LM
from marginal_core.lm.contexts import ContextState
from marginal_core.models import dtype_name
from marginal_core.search.counts import check_exact
from marginal_core.search.masses import PrefixMasses
from marginal_core.search.memory import PrefixMemory
from marginal_core.search.rounds import Regions, search_rounds
from marginal_core.search.settings import SearchSettings
from marginal_core.search.surprisal.next_bytes import NextBytes
from marginal_core.search.surprisal.result import SURPRISAL_METHODS, Surprisal, check_choice, region_spans


class OneText(Protocol):
    """What the search reads of a Marginalizer: its model, text, context, lattice, the context's KV
    and the window check."""

    lm: LM
    text: str
    context: str | None
    lattice: Lattice

    def context_state(self) -> ContextState: ...

    def require_fits(self, tokens: int, what: str = ..., hint: str = ...) -> None: ...


def surprisal_stream(m: OneText, unit: str = "word", space: str = "trailing", method: str = "search",
                     **settings: Any) -> Iterator[Surprisal]:
    """The text's surprisal after every round of the prefix search; the last is the result.
    ``search``: rounds of at most ``max_rows`` prefixes (a server's cap) until every ``unit``
    region's interval is within ``tolerance`` nats, a round narrows none enough, ``budget``
    prefixes are scored, the time budget runs out (seconds; "auto": the default stop, a share of
    time for the certificate once the values settled, ``clock``), or should_stop;
    ``exact``: every prefix (TooManyPathsError past ``budget``). ``kv_bytes``: what the search
    keeps of its prefixes' keys and values across rounds (0: none). progress hears each round's
    passes (tokens fed, of the round's). Settings: ``SearchSettings``' fields."""
    return regions_stream(m, unit, space, method, SearchSettings(**settings))


def regions_stream(m: OneText, unit: str, space: str, method: str, settings: SearchSettings,
                   memory: PrefixMemory | None = None) -> Iterator[Surprisal]:
    """surprisal_stream under one settings object (``memory``: what searches of texts this one
    begins with kept); bad choices are refused before any work."""
    region_spans(m.text, unit, space)  # the choices and the text, checked before any work
    check_choice(method, SURPRISAL_METHODS, "surprisal method")
    if method == "exact":
        check_exact(m.lattice, settings.budget)
    m.require_fits(proposal_of(m.lattice).max_steps, "the longest tokenization of the text")
    return _regions(m, unit, space, method, settings, memory)


def _regions(m: OneText, unit: str, space: str, method: str, settings: SearchSettings,
             memory: PrefixMemory | None) -> Iterator[Surprisal]:
    """regions_stream's work, once its input is checked."""
    started = time.perf_counter()
    state = m.context_state()
    nodes = m.lattice.canonical_nodes
    offset = len(m.lattice.data) - len(m.text.encode("utf-8"))
    base = Surprisal(m.text, m.lm.name, m.context, dtype_name(m.lm.dtype), str(m.lm.device), method, unit, space,
                     offset, np.zeros(1), np.zeros(1), tuple(zip(nodes[:-1], nodes[1:])), np.zeros(0), -np.inf, 0.0,
                     tolerance=settings.tolerance)
    goal = Regions(base.cuts, exact=method == "exact")
    for masses in search_rounds(m.lm, m.lattice, state, settings, goal, memory):
        serving_hooks.checkpoint()
        yield _with(base, masses, m.lattice.data, time.perf_counter() - started)


def _with(base: Surprisal, masses: PrefixMasses, data: bytes, seconds: float) -> Surprisal:
    """The surprisal with the search's bounds and sums so far."""
    return replace(base, prefix_lower=masses.lower, prefix_upper=masses.upper, log_p_text=masses.log_p_text,
                   canonical_log_p=masses.canonical_log_p, canonical_prefix=masses.canonical_prefix,
                   next=NextBytes.of(data, masses.next_lower, masses.next_open, masses.lower), seconds=seconds,
                   rounds=masses.rounds, scored=masses.scored, cancelled=masses.cancelled, settled_at=masses.settled_at,
                   ends_at=masses.ends_at, ended=masses.ended, kv_peak_bytes=masses.kv_peak_bytes)


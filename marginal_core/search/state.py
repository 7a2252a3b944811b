"""A text as a prefix under one model and context (docs/design.md, "What comes next"): its
lattice, vocabulary and context state, the settings its searches run under, and the memory they
share with the searches of the texts that extend it. It answers what comes after the text one
byte step at a time (the search past its end; after a character's first bytes, on the lattice
extended by them), as genlm-bytes' byte LMs do, with certified intervals.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from marginal_core.ground.errors import ContextWindowError
from marginal_core.lattice.conditioning import context_ids
from marginal_core.lattice.graph import Lattice, extended, lattice_of
from marginal_core.lattice.proposal import proposal_of
from marginal_core.lattice.vocab import Vocabulary, vocabulary
from marginal_core.lm.adapter import LM
from marginal_core.lm.contexts import ContextState
from marginal_core.search.char_keys import key_groups, key_masses
from marginal_core.search.clock import Deadline
from marginal_core.search.masses import ByteStep, PrefixMasses
from marginal_core.search.memory import PrefixMemory
from marginal_core.search.rounds import NextByte, Regions, search_rounds
from marginal_core.search.settings import SearchSettings
from marginal_core.search.token_views import TokenViews, token_views

S = TypeVar("S", bound="PrefixState")
Steps = Iterator[tuple[ByteStep, PrefixMasses | None]]


@dataclass(eq=False)
class PrefixState:
    """One text under one model and context: its lattice (None when empty), vocabulary, context
    state and settings; ``memory``, what its searches keep for longer texts' (``+`` shares it);
    its token views once asked for (``views``), its last finished step (``finished``) and its
    bounds on log P(text as a prefix) where a search of the whole text gave them (``kept_bounds``)."""

    lm: LM
    text: str
    context: str | None
    lattice: Lattice | None
    vocab: Vocabulary
    state: ContextState
    settings: SearchSettings
    memory: PrefixMemory
    kept_views: TokenViews | None = None
    finished: tuple[ByteStep, PrefixMasses | None] | None = field(default=None, repr=False)
    kept_bounds: tuple[float, float] | None = field(default=None, repr=False)

    @classmethod
    def of(cls: type[S], lm: LM, text: str, context: str | None = None, settings: SearchSettings | None = None,
           ahead: int = 1, memory: PrefixMemory | None = None) -> S:
        """The text's lattice, refused (ContextWindowError) before any search where its longest
        tokenization and ``ahead`` tokens more pass the model's window (0: not checked, a
        continuation's steps, which its start checked for every character to come)."""
        settings = settings if settings is not None else SearchSettings()
        lattice = lattice_of(text, lm.text_tokenizer) if text else None
        memory = memory if memory is not None else PrefixMemory(settings.kv_bytes)
        state = lm.context(context_ids(lm.text_tokenizer, context))
        out = cls(lm, text, context, lattice, vocabulary(lm.text_tokenizer), state, settings, memory)
        if ahead:
            out.require_fits(out.longest() + ahead, "the prompt's longest tokenization and the tokens after it")
        return out

    def longest(self) -> int:
        """The most tokens a tokenization of the text has."""
        return proposal_of(self.lattice).max_steps if self.lattice is not None else 0

    def require_fits(self, tokens: int, what: str = "the text's longest tokenization", hint: str = "") -> None:
        """Refuse (ContextWindowError) ``tokens`` tokens after the context where they pass the
        model's window."""
        limit = self.lm.max_positions
        if limit is not None and len(self.state) + tokens > limit:
            raise ContextWindowError.of(what, tokens, len(self.state), limit, self.lm.name, hint)

    def context_state(self) -> ContextState:
        """The context's state (its KV), as a Marginalizer's."""
        return self.state

    def extended(self: S, more: str, ahead: int = 1) -> S:
        """The state of this text and ``more`` after it, on this one's memory: its searches begin
        with what this one's scored."""
        return type(self).of(self.lm, self.text + more, self.context, self.settings, ahead, self.memory)

    def steps(self, tail: bytes = b"", deadline: Deadline | None = None) -> Steps:
        """The next byte after the text and ``tail`` (the first bytes of an unfinished character)
        after every round of the search past their end, within ``deadline``; an empty text's first
        byte is its context's own next token (one step, no search)."""
        if self.lattice is None and not tail:
            point = key_masses(self.views().canonical, key_groups(self.vocab, self.lm.vocab)).by_byte()
            yield ByteStep(point, point, point), None
            return
        lattice = extended(self.lattice, tail, self.vocab) if tail else self.lattice
        assert lattice is not None  # an empty text has a tail here
        for masses in search_rounds(self.lm, lattice, self.state, self.settings, NextByte(), self.memory, deadline):
            yield ByteStep.past_end(masses), masses

    def last_step(self, deadline: Deadline | None = None) -> tuple[ByteStep, PrefixMasses | None]:
        """The byte step after the text, its search run to its end (once: kept), within
        ``deadline`` (a call's that runs several searches; default the search's own)."""
        if self.finished is None:
            self.finished = deque(self.steps(deadline=deadline), maxlen=1).pop()
        return self.finished

    def log_prob_bounds(self, deadline: Deadline | None = None) -> tuple[float, float]:
        """log P(the text as a prefix), bounded below and above (0 for the empty text): from the
        search past the end where it ran, else from a search of one region, the whole text, whose
        interval the tolerance is about (in nats; no next-byte probabilities to certify), within
        ``deadline``; kept."""
        if self.lattice is None:
            return 0.0, 0.0
        if self.finished is not None and self.finished[1] is not None:
            masses = self.finished[1]
            return float(masses.lower[-1]), float(masses.upper[-1])
        if self.kept_bounds is None:
            whole = Regions((0, self.lattice.end))
            masses = deque(search_rounds(self.lm, self.lattice, self.state, self.settings, whole, self.memory,
                                         deadline), maxlen=1).pop()
            self.kept_bounds = (float(masses.lower[-1]), float(masses.upper[-1]))
        return self.kept_bounds

    def views(self) -> TokenViews:
        """The canonical and healed token views, once: from the distributions a search kept where
        it has them (``want_views``), else from a forward."""
        if self.kept_views is None:
            self.kept_views = token_views(self.lm, self.state, self.canonical(), self.vocab, self.memory.whole)
        return self.kept_views

    def canonical(self) -> tuple[int, ...]:
        return tuple(self.lattice.canonical) if self.lattice is not None else ()

    def want_views(self) -> None:
        """Ask the search for the next-token distributions the token views read (after the
        canonical ids and the ids before the last: round 0 scores both)."""
        self.memory.wanted.update({self.canonical(), self.canonical()[:-1]})


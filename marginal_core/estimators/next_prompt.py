"""One prompt under one model, as What comes next searches it and ``generate`` continues it
(docs/design.md, "What comes next"): its lattice, vocabulary and context state, refused before any
work where it passes the model's window, and its canonical and healed token views once asked for.
"""

from __future__ import annotations

from dataclasses import dataclass

from marginal_core.estimators.prefix_memory import PrefixMemory
from marginal_core.estimators.token_views import TokenViews, token_views
from marginal_core.ground.errors import ContextWindowError
from marginal_core.lattice.conditioning import context_ids
from marginal_core.lattice.graph import Lattice, lattice_of
from marginal_core.lattice.proposal import proposal_of
from marginal_core.lattice.vocab import Vocabulary, vocabulary
from marginal_core.lm.adapter import LM
from marginal_core.lm.contexts import ContextState


@dataclass
class Prompt:
    """One prompt under one model: its lattice (None when empty), vocabulary and context state;
    its token views once asked for (``views``)."""

    lm: LM
    text: str
    context: str | None
    lattice: Lattice | None
    vocab: Vocabulary
    state: ContextState
    kept_views: TokenViews | None = None

    @classmethod
    def of(cls, lm: LM, text: str, context: str | None, ahead: int = 1) -> Prompt:
        """The prompt's lattice, refused (ContextWindowError) before any search where its longest
        tokenization and ``ahead`` tokens more pass the model's window (0: not checked, a
        continuation's steps, which its start checked for every character to come)."""
        ids = context_ids(lm.text_tokenizer, context)
        lattice = lattice_of(text, lm.text_tokenizer) if text else None
        limit = getattr(lm.config, "max_position_embeddings", None)
        if ahead and limit is not None:
            longest = (proposal_of(lattice).max_steps if lattice is not None else 0) + ahead
            if len(ids) + longest > limit:
                raise ContextWindowError.of("the prompt's longest tokenization and the tokens after it", longest,
                                            len(ids), limit, lm.name, "")
        return cls(lm, text, context, lattice, vocabulary(lm.text_tokenizer), lm.context(ids))

    def views(self, memory: PrefixMemory | None = None) -> TokenViews:
        """The canonical and healed token views, once: from the distributions a search kept where
        it has them (``want_views``), else from a forward."""
        if self.kept_views is None:
            self.kept_views = token_views(self.lm, self.state, self.canonical(), self.vocab,
                                          memory.whole if memory is not None else {})
        return self.kept_views

    def canonical(self) -> tuple[int, ...]:
        return tuple(self.lattice.canonical) if self.lattice is not None else ()

    def want_views(self, memory: PrefixMemory) -> None:
        """Ask the search for the next-token distributions the token views read (after the
        canonical ids and the ids before the last: round 0 scores both)."""
        memory.wanted.update({self.canonical(), self.canonical()[:-1]})

"""``mc.prefix``: a text as a prefix under a model, the one stateful object every feature of the
prefix search is read from (docs/library.md, "A text as a prefix"). Like genlm-bytes' byte LMs it
gives the next byte's log probabilities (``logp_next``) and extends (``p + "more"``, on what it
scored); over every tokenization, with certified intervals, it also gives the text's own
probability, its surprisal by region, the next characters, continuations and how likely each of
a list of candidate continuations is."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from marginal_core.ground.errors import MarginalError
from marginal_core.lm.adapter import LM
from marginal_core.search.masses import NO_BYTE
from marginal_core.search.next.candidate_table import ContinuationScores
from marginal_core.search.next.candidates import continuation_scores_stream
from marginal_core.search.next.characters import characters_stream
from marginal_core.search.next.continuations import check_continuation, continuations_of
from marginal_core.search.next.results import MAX_K, Continuations, NextCharacters
from marginal_core.search.settings import SearchSettings
from marginal_core.search.state import PrefixState
from marginal_core.search.surprisal.result import Surprisal
from marginal_core.search.surprisal.stream import regions_stream


@dataclass(frozen=True)
class ByteLogProbs:
    """log P(next byte = b | the text) for b = 0..255 and, at ``EOS`` (256), the outcome that writes
    no byte (end of string, special tokens, byte pieces): genlm-bytes' ``logp_next`` layout, with
    the logs of the interval's ends the search certifies (``lower``, ``upper``)."""

    logp: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    EOS: ClassVar[int] = NO_BYTE

    def __getitem__(self, byte: int) -> float:
        return float(self.logp[byte])

    def __len__(self) -> int:
        return len(self.logp)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        return np.asarray(self.logp, dtype=dtype)


@dataclass(frozen=True)
class LogProb:
    """log P(the text as a prefix): what the scored tokenizations give (``value``, also ``lower``)
    and the upper end of the interval the search certifies."""

    value: float
    lower: float
    upper: float


@dataclass(eq=False)
class Prefix(PrefixState):
    """A text as a prefix under a model and context, with its search settings; ``p + "more"`` is
    the longer text's prefix, whose searches begin with what this one's scored."""

    def __add__(self, more: str) -> Prefix:
        if not isinstance(more, str):
            return NotImplemented
        return self.extended(more)

    def logp_next(self) -> ByteLogProbs:
        """The next byte's log probabilities over every tokenization, 257 values (bytes, then EOS)."""
        step = self.last_step()[0]
        with np.errstate(divide="ignore"):
            return ByteLogProbs(*(np.log(a) for a in (step.point, step.lower, step.upper)))

    def log_prob(self) -> LogProb:
        """log P(the text as a prefix), summed over its tokenizations, with its interval."""
        lower, upper = self.log_prob_bounds()
        return LogProb(lower, lower, upper)

    def next_characters(self, k: int = 10) -> NextCharacters:
        """The k most probable next characters, marginal with its interval beside the canonical and
        healed token views (``NextCharacters``)."""
        return deque(self.next_characters_stream(k), maxlen=1).pop()

    def next_characters_stream(self, k: int = 10) -> Iterator[NextCharacters]:
        """next_characters after every round of every byte step; the last is the result."""
        if not 1 <= k <= MAX_K:
            raise MarginalError(f"k must be between 1 and {MAX_K}, not {k}")
        return characters_stream(self, k)

    def continue_text(self, chars: int = 20, how: str = "greedy", seed: int | None = None) -> Continuations:
        """The text continued ``chars`` characters from the marginal (greedy or sampled), beside
        generate's from the canonical tokens and from token healing."""
        return deque(self.continuations_stream(chars, how, seed), maxlen=1).pop()

    def continuations_stream(self, chars: int = 20, how: str = "greedy",
                             seed: int | None = None) -> Iterator[Continuations]:
        """continue_text after generate's and after each character; the last is the result."""
        check_continuation(chars, how)
        self.require_fits(self.longest() + 1 + 4 * chars, "the prompt's longest tokenization and the tokens after it")
        return continuations_of(self, chars, how, seed)

    def score_continuations(self, candidates: Sequence[str]) -> ContinuationScores:
        """How likely each candidate is after the text: log P(candidate | text) over every
        tokenization of the joined text, with its interval, beside lm-eval's score of the pair
        (``ContinuationScores``); each candidate's state is ``self + candidate``."""
        return deque(self.score_continuations_stream(candidates), maxlen=1).pop()

    def score_continuations_stream(self, candidates: Sequence[str]) -> Iterator[ContinuationScores]:
        """score_continuations after each candidate's search; the last is the result. Bad input
        is refused before any work."""
        return continuation_scores_stream(self, candidates)

    def surprisal(self, unit: str = "word", space: str = "trailing", method: str = "search") -> Surprisal:
        """The text's surprisal by region (``Surprisal``), on what this prefix's searches kept."""
        return deque(self.surprisal_stream(unit, space, method), maxlen=1).pop()

    def surprisal_stream(self, unit: str = "word", space: str = "trailing",
                         method: str = "search") -> Iterator[Surprisal]:
        """surprisal after every round of its search; the last is the result."""
        if self.lattice is None:
            raise MarginalError("the empty text has no surprisal: type a text")
        return regions_stream(self, unit, space, method, self.settings, self.memory)  # type: ignore[arg-type]


def prefix_of(lm: LM, text: str, context: str | None = None, **settings: Any) -> Prefix:
    """The text as a prefix under a loaded model (settings: ``SearchSettings``' fields)."""
    return Prefix.of(lm, text, context, SearchSettings(**settings))


def next_characters_stream(lm: LM, prompt: str, context: str | None = None, k: int = 10,
                           **settings: Any) -> Iterator[NextCharacters]:
    """What comes next after the prompt, after every round (``Prefix.next_characters_stream``;
    settings: ``SearchSettings``' fields). Bad input is refused before any work."""
    return prefix_of(lm, prompt, context, **settings).next_characters_stream(k)


def continuations_stream(lm: LM, prompt: str, context: str | None = None, chars: int = 20, how: str = "greedy",
                         seed: int | None = None, **settings: Any) -> Iterator[Continuations]:
    """The prompt continued from the marginal beside generate's (``Prefix.continuations_stream``;
    settings: ``SearchSettings``' fields). Bad input is refused before any work."""
    check_continuation(chars, how)
    return prefix_of(lm, prompt, context, **settings).continuations_stream(chars, how, seed)

"""How likely each candidate continuation is after a prompt (docs/design.md, "What comes next: the
prompt boundary", "Candidates"): the marginal log P(candidate | prompt) = log P(prompt + candidate
as a prefix) − log P(prompt as a prefix), over every tokenization of the joined text, so there is no
seam to place; beside it, the score lm-evaluation-harness's ``hf`` model gives the pair (it cuts
the joined encoding at the context encoding's length), computed by this project's own scorer.

Every candidate's state extends the prompt's (``p + candidate``, on the prompt's memory), so its
search feeds only the candidate's new tokens; the searches of one call lie within one deadline.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

from marginal_core.ground.errors import MarginalError
from marginal_core.lattice.conditioning import HarnessPair, context_ids, harness_pair
from marginal_core.lattice.vocab import Vocabulary
from marginal_core.scoring.trie_scoring import score_paths
from marginal_core.search.clock import Deadline
from marginal_core.search.next.candidate_table import (
    ContinuationScore,
    ContinuationScores,
    check_candidates,
    ranked,
    short,
)
from marginal_core.search.state import PrefixState

Bounds = tuple[float, float]  # log P(a text as a prefix): the search's lower and upper bounds


def continuation_scores_stream(p: PrefixState, candidates: Sequence[str]) -> Iterator[ContinuationScores]:
    """Each candidate after the state's text, the table after each candidate's search (its rows
    those scored so far); the last is the result. Bad input is refused before any search: an empty
    candidate or more than MAX_CANDIDATES (MarginalError), a joined text the tokenizer cannot
    take (its error, naming the candidate), one longer than the model's window
    (ContextWindowError, naming the candidate)."""
    texts = check_candidates(candidates)
    states = [_extension(p, i, text) for i, text in enumerate(texts, 1)]
    return _scores(p, texts, states, time.perf_counter())


def _extension(p: PrefixState, i: int, text: str) -> PrefixState:
    """The state of the prompt and candidate i, its lattice built and its window checked."""
    try:
        q = p.extended(text, ahead=0)
    except MarginalError as err:
        raise type(err)(f"candidate {i} ({short(text)}): {err}") from None
    q.require_fits(q.longest() + 1, f"the longest tokenization of the prompt and candidate {i} ({short(text)}) with "
                   "the token after it", f"shorten the prompt or candidate {i}")
    return q


def _scores(p: PrefixState, texts: tuple[str, ...], states: list[PrefixState],
            started: float) -> Iterator[ContinuationScores]:
    """The prompt's search, lm-eval's scores, then each candidate's search, within one deadline."""
    harness = lm_eval_scores(p, texts)
    deadline = Deadline(p.settings.time_budget, started=started)
    prompt = p.log_prob_bounds(deadline)
    rows: list[ContinuationScore] = []
    for text, q, (score, pair) in zip(texts, states, harness, strict=True):
        rows.append(_row(text, q.log_prob_bounds(deadline), prompt, score, pair, p.vocab, p.settings.tolerance))
        yield ContinuationScores(p.text, p.lm.name, p.context, ranked(rows), *prompt, time.perf_counter() - started,
                                 p.settings.tolerance, len(rows) == len(texts), p.settings.stopped())


def lm_eval_scores(p: PrefixState, texts: Sequence[str]) -> list[tuple[float | None, HarnessPair]]:
    """lm-eval ``hf``'s score of (the state's text, each candidate) and its encoding of the pair,
    in one scoring pass: the log p of its continuation tokens after its context tokens; None where
    its assertions would fail (no continuation tokens, or a context of none). A context before the
    prompt (the state's) stands in front of lm-eval's context: its ids in place of BOS."""
    tokenizer = p.lm.text_tokenizer
    start = context_ids(tokenizer, p.context) if p.context else None
    pairs = [harness_pair(tokenizer, p.text, text, start) for text in texts]
    scored = [i for i, pair in enumerate(pairs) if pair.context and pair.continuation]
    found: dict[int, float] = {}
    if scored:  # one context: the prompt's, the same for every candidate
        state = p.lm.context(list(pairs[scored[0]].context))
        found = dict(zip(scored, score_paths(p.lm, [pairs[i].continuation for i in scored], state).tolist(),
                         strict=True))
    return [(found.get(i), pair) for i, pair in enumerate(pairs)]


def _row(text: str, joined: Bounds, prompt: Bounds, score: float | None, pair: HarnessPair, vocab: Vocabulary,
         tolerance: float) -> ContinuationScore:
    """One candidate's row: the conditional's value (the masses found) and certified interval
    (lower: the joined text's lower bound over the prompt's upper; upper: the other way, at most
    0), lm-eval's score and its tokens."""
    value = min(0.0, joined[0] - prompt[0])
    lower, upper = min(value, joined[0] - prompt[1]), max(value, min(0.0, joined[1] - prompt[0]))
    return ContinuationScore(text, value, lower, upper, upper - lower <= tolerance, score,
                             _surfaces(vocab, pair.continuation), _surfaces(vocab, pair.own), pair.crosses)


def _surfaces(vocab: Vocabulary, ids: Sequence[int]) -> tuple[bytes, ...]:
    """The tokens' bytes (a special token's: none)."""
    return tuple(vocab.surfaces[t] or b"" for t in ids)

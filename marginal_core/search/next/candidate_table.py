"""How likely each candidate continuation is after a prompt, as a table (docs/design.md, "What comes
next: the prompt boundary", "Candidates"). No torch: the rows the search and lm-eval's score give
(``marginal_core.search.next.candidates`` computes them), their ranks, and what a notebook, the CLI
and the page show; and the check of a list of candidates, before any work.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from marginal_core.ground.errors import MarginalError
from marginal_core.ground.jsonsafe import json_float
from marginal_core.lattice.readable import show_piece

if TYPE_CHECKING:
    import pandas as pd

MAX_CANDIDATES = 100  # the most candidates one call scores


def short(text: str, width: int = 30) -> str:
    """A candidate as an error message names it: its repr, cut to ``width`` characters."""
    return repr(text) if len(text) <= width else repr(text[:width]) + "…"


def check_candidates(candidates: Iterable[str]) -> tuple[str, ...]:
    """The candidates as given, in order, if they are 1 to MAX_CANDIDATES texts of at least one
    character each (whitespace is kept: it is part of the candidate), else one clear error."""
    if isinstance(candidates, str | bytes):
        raise MarginalError(f"candidates is a list of texts, not one text ({short(str(candidates))}): "
                            f"write [{short(str(candidates))}]")
    texts = tuple(candidates)
    if not texts:
        raise MarginalError("no candidates: give at least one continuation to score")
    if len(texts) > MAX_CANDIDATES:
        raise MarginalError(f"{len(texts)} candidates is more than {MAX_CANDIDATES}: score them in parts")
    for i, text in enumerate(texts, 1):
        if not isinstance(text, str):
            raise MarginalError(f"candidate {i} is not a text: {text!r}")
        if not text:
            raise MarginalError(f"candidate {i} is empty: a candidate is at least one character")
    return texts


def tokens_shown(tokens: Sequence[bytes]) -> str:
    """Tokens as one string with their boundaries marked: ``␣Fr|ance``."""
    return "|".join(show_piece(t.decode("utf-8", "backslashreplace")) for t in tokens)


@dataclass(frozen=True)
class ContinuationScore:
    """One candidate after the prompt. ``logprob``: the marginal log P(candidate | prompt) over
    every tokenization of prompt + candidate, the mass found (log P(prompt + candidate as a prefix)
    minus log P(prompt as a prefix), each the search's lower bound), in the certified interval
    [``lower``, ``upper``] (``certified``: within the tolerance). ``lm_eval``: lm-eval ``hf``'s
    score of the pair, the log p of ``lm_eval_tokens`` (its whole encoding past the context
    encoding's length) after its context tokens; None where lm-eval's assertions fail (no
    continuation tokens, or a context of no tokens). ``own_tokens``: the candidate encoded on its
    own (after the prompt's trailing whitespace, which lm-eval moves to it); ``crosses``: a token
    of lm-eval's whole encoding crosses the seam. ``rank`` and ``lm_eval_rank``: 1 for the most
    probable under each (None where lm-eval has no score)."""

    text: str
    logprob: float
    lower: float
    upper: float
    certified: bool
    lm_eval: float | None
    lm_eval_tokens: tuple[bytes, ...]
    own_tokens: tuple[bytes, ...]
    crosses: bool
    rank: int = 0
    lm_eval_rank: int | None = None

    @property
    def probability(self) -> float:
        """P(candidate | prompt) over every tokenization, the mass found."""
        return math.exp(self.logprob)

    @property
    def rank_changed(self) -> bool:
        """Whether lm-eval's score ranks the candidate elsewhere (or cannot score it)."""
        return self.lm_eval_rank != self.rank

    @property
    def seam(self) -> str:
        """What lm-eval's split does at the seam, in words ("" where no token crosses it)."""
        own = tokens_shown(self.own_tokens)
        if self.lm_eval is None and not self.lm_eval_tokens:
            return (f"lm-eval's split leaves no continuation tokens (its assertion fails): a token crosses the "
                    f"seam; on its own the candidate is {own}")
        if self.lm_eval is None:
            return "lm-eval's context encodes to no tokens (its assertion fails)"
        if self.crosses:
            return (f"a token crosses the seam: lm-eval scores {tokens_shown(self.lm_eval_tokens)}, the candidate "
                    f"on its own is {own}")
        return ""

    def to_json(self) -> dict[str, Any]:
        """The row as the CLI's --json writes it (non-finite numbers as null)."""
        return {"text": self.text, "logprob": json_float(self.logprob), "lower": json_float(self.lower),
                "upper": json_float(self.upper), "certified": self.certified,
                "lm_eval": None if self.lm_eval is None else json_float(self.lm_eval), "rank": self.rank,
                "lm_eval_rank": self.lm_eval_rank, "crosses": self.crosses,
                "lm_eval_tokens": [t.decode("utf-8", "backslashreplace") for t in self.lm_eval_tokens],
                "own_tokens": [t.decode("utf-8", "backslashreplace") for t in self.own_tokens]}


def ranked(rows: Sequence[ContinuationScore]) -> tuple[ContinuationScore, ...]:
    """The rows in the order given, each with its rank under the marginal and under lm-eval's score
    (1: the most probable; ties in the order given; lm-eval's over the rows it scores)."""
    by_marginal = sorted(range(len(rows)), key=lambda i: -rows[i].logprob)
    scored = [i for i in range(len(rows)) if rows[i].lm_eval is not None]
    by_lm_eval = sorted(scored, key=lambda i: -(rows[i].lm_eval or 0.0))
    marginal_rank = {i: r for r, i in enumerate(by_marginal, 1)}
    lm_eval_rank = {i: r for r, i in enumerate(by_lm_eval, 1)}
    return tuple(replace(row, rank=marginal_rank[i], lm_eval_rank=lm_eval_rank.get(i)) for i, row in enumerate(rows))


@dataclass(frozen=True)
class ContinuationScores:
    """Each candidate after ``prompt`` (``rows``, in the order given; while a stream runs, those
    scored so far): the marginal over every tokenization of the joined text beside lm-eval's score.
    ``prompt_lower``, ``prompt_upper``: log P(prompt as a prefix), certified between them;
    ``done``: every candidate searched; ``cancelled``: Stop."""

    prompt: str
    model: str
    context: str | None
    rows: tuple[ContinuationScore, ...]
    prompt_lower: float
    prompt_upper: float
    seconds: float
    tolerance: float
    done: bool
    cancelled: bool = False

    @property
    def rankings_differ(self) -> bool:
        """Whether the marginal and lm-eval's score rank some candidate differently."""
        return any(r.rank_changed for r in self.rows)

    def sentence(self) -> str:
        """Which candidate each score puts first, in numbers."""
        if not self.rows:
            return "No candidate scored yet."
        top = min(self.rows, key=lambda r: r.rank)
        said = (f"Over every tokenization of the prompt and candidate, “{show_piece(top.text)}” is the most "
                f"probable ({top.probability:.3g})")
        first = [r for r in self.rows if r.lm_eval_rank == 1]
        if not first:
            return f"{said}; lm-eval's split scores no candidate."
        if first[0] is top:
            changed = sum(r.rank_changed for r in self.rows)
            return f"{said}, as by lm-eval's score" + (f"; {changed} other candidate(s) change rank." if changed else ".")
        return (f"{said}; lm-eval's score puts “{show_piece(first[0].text)}” first "
                f"({math.exp(first[0].lm_eval or -math.inf):.3g}).")

    def to_pandas(self) -> pd.DataFrame:
        """A row per candidate, in the order given: text, logprob, lower, upper, certified, lm_eval,
        rank, lm_eval_rank, crosses, seam."""
        import pandas as pd

        columns = ["text", "logprob", "lower", "upper", "certified", "lm_eval", "rank", "lm_eval_rank", "crosses", "seam"]
        return pd.DataFrame([{c: getattr(r, c) for c in columns} for r in self.rows], columns=columns)

    def to_json(self) -> dict[str, Any]:
        """The call as one JSON object: the prompt, the model, the prompt's log P as a prefix and
        ``candidates``, a list of rows in the order given."""
        return {"prompt": self.prompt, "model": self.model, "context": self.context,
                "prompt_lower": json_float(self.prompt_lower), "prompt_upper": json_float(self.prompt_upper),
                "seconds": round(self.seconds, 3), "tolerance": self.tolerance, "done": self.done,
                "cancelled": self.cancelled, "rankings_differ": self.rankings_differ,
                "candidates": [r.to_json() for r in self.rows]}

    def _repr_html_(self) -> str:
        """A notebook's table: each candidate's probability by the marginal (with its interval) and
        by lm-eval's score, their ranks (a change marked) and the seam."""
        def cell(r: ContinuationScore) -> str:
            interval = f"[{math.exp(r.lower):.4g}, {math.exp(r.upper):.4g}]"
            mark = "" if r.certified else " open"
            return f"{r.probability:.4g} <small>{interval}{mark}</small>"

        rows = "".join(
            f"<tr><td><code>{html.escape(show_piece(r.text))}</code></td><td>{cell(r)}</td>"
            f"<td>{'—' if r.lm_eval is None else f'{math.exp(r.lm_eval):.4g}'}</td>"
            f"<td>{r.rank}</td><td>{'—' if r.lm_eval_rank is None else r.lm_eval_rank}"
            f"{' <b>≠</b>' if r.rank_changed else ''}</td><td><small>{html.escape(r.seam)}</small></td></tr>"
            for r in self.rows)
        return (f"<p>After <code>{html.escape(repr(self.prompt))}</code> under {html.escape(self.model)}:</p>"
                f"<table><tr><th>candidate</th><th>marginal [certified]</th><th>lm-eval</th><th>rank</th>"
                f"<th>lm-eval rank</th><th>seam</th></tr>{rows}</table><p>{html.escape(self.sentence())}</p>")

"""What comes next after a prompt, as characters (docs/design.md, "What comes next"). No torch: the
marginal's next-byte steps (the prefix search carried past the prompt's last byte) composed into
whole characters, beside the canonical and healed token views folded by the character their
tokens write first, and the results a notebook, the CLI and the page show.
"""

from __future__ import annotations

import html
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from marginal_core.lattice.readable import show_piece
from marginal_core.search.char_keys import KeyMasses, char_length
from marginal_core.search.ending import Ended
from marginal_core.search.surprisal.next_bytes import label

if TYPE_CHECKING:
    import pandas as pd

END = "end"  # the outcome that writes no byte: end of string, special tokens, byte pieces
MAX_K = 256  # the most characters one call lists


# What a row's marginal value is worth: its interval within the tolerance; its value stopped
# moving (by the tolerance, round to round) while its interval is still open; neither yet (Stop or
# the time budget came first); the rest of a range of characters not resolved (a remainder row).
CERTIFIED = "certified"
SETTLED = "settled"
MOVING = "moving"
REST = "rest"
Candidate = tuple[float, float, float, bool]  # an outcome's (point, lower, upper, settled)


@dataclass(frozen=True)
class NextChar:
    """One next character: its bytes (empty for ``end``; a remainder row's: the first bytes of
    the characters it stands for), the marginal's probability and interval, the canonical and
    healed views' probabilities, and what the marginal's value is worth (``status``: CERTIFIED,
    SETTLED, MOVING or REST)."""

    character: str
    bytes: bytes
    probability: float
    lower: float
    upper: float
    canonical: float
    healed: float
    status: str

    @property
    def shown(self) -> str:
        """The character as a table shows it: a space as ␣, a newline as ↵, a tab as ⇥ (``end`` as
        is; a remainder row as the rest of its range)."""
        if self.status == REST:
            return f"rest of {self.character}"
        return self.character if not self.bytes else show_piece(self.character)

    @property
    def interval(self) -> str:
        """The interval as a reader should take it: the two ends where certified, else how wide
        it still is beside what the value is worth."""
        if self.status == CERTIFIED:
            return f"[{self.lower:.4f}, {self.upper:.4f}]"
        if self.status == REST:
            return "characters not told apart"
        return f"{self.status}, open by {self.upper - self.lower:.2f}"


def character_rows(chars: dict[bytes, Candidate], k: int, tolerance: float, canonical: KeyMasses,
                   healed: KeyMasses) -> tuple[tuple[NextChar, ...], tuple[NextChar, ...]]:
    """The k most probable whole characters (and ``end``), most probable first; then, as
    remainder rows, the prefixes not resolved into characters (every character each begins)
    that would have ranked among the k."""
    order = sorted(chars, key=lambda b: -chars[b][0])

    def row(b: bytes, status: str | None = None) -> NextChar:
        point, lower, upper, settled = chars[b]
        status = status or (CERTIFIED if upper - lower <= tolerance else SETTLED if settled else MOVING)
        return NextChar(character_of(b) if b else END, b, point, lower, upper, canonical.mass_of(b),
                        healed.mass_of(b), status)

    rows = tuple(row(b) for b in order if not b or finished(b))[:k]
    rest = tuple(row(b, REST) for b in order[:k] if b and not finished(b))
    return rows, rest


@dataclass(frozen=True)
class NextCharacters:
    """The k most probable next characters after ``prompt`` (``rows``, whole characters, most
    probable first; ``rest``: remainder rows for ranges of characters the search did not resolve
    before it ended), what the search did (rounds and prefixes scored over every byte step,
    seconds; ``done``: every row certified; ``cancelled``: Stop; ``ended``: why it ended
    (``Ended``); ``settled_at``: when the first byte's values settled), the prompt's canonical
    tokens (``tokens``, their surfaces) and the total variation distance from the marginal over
    the next byte of each view."""

    prompt: str
    model: str
    context: str | None
    rows: tuple[NextChar, ...]
    tokens: tuple[bytes, ...]
    total_variation: dict[str, float]
    seconds: float
    rounds: int
    scored: int
    done: bool
    cancelled: bool = False
    tolerance: float = 0.01
    ended: Ended | None = None
    settled_at: float | None = None
    rest: tuple[NextChar, ...] = ()

    @property
    def boundary(self) -> tuple[int, int]:
        """The last canonical token's byte span in the prompt's tokens' bytes: where the canonical
        view puts a token boundary that the text does not have."""
        end = sum(map(len, self.tokens))
        return end - len(self.tokens[-1]) if self.tokens else 0, end

    def sentence(self) -> str:
        """How far the canonical view is from the marginal, in numbers."""
        if not self.rows:
            return "The search found no mass yet."
        top = max(self.rows + self.rest, key=lambda r: r.probability)
        if top.status == REST:
            return (f"Over every tokenization the next character is most likely one of {top.character} "
                    f"({top.probability:.3f} together); the search has not told them apart yet.")
        return (f"Over every tokenization the next character is most likely {_quoted(top)} "
                f"({top.probability:.3f}); the canonical tokens give it {top.canonical:.3f} and token "
                f"healing {top.healed:.3f}. Total variation from the marginal over the next byte: canonical "
                f"{self.total_variation['canonical']:.3f}, healed {self.total_variation['healed']:.3f}.")

    def to_pandas(self) -> pd.DataFrame:
        """A row per character (then the remainder rows): character, bytes, probability, lower,
        upper, canonical, healed, status."""
        import pandas as pd

        return pd.DataFrame([{**asdict(r), "bytes": list(r.bytes)} for r in self.rows + self.rest],
                            columns=["character", "bytes", "probability", "lower", "upper", "canonical", "healed",
                                     "status"])

    def to_json(self) -> dict[str, Any]:
        """The CLI's --json object (without ``seconds`` rounding or the continuation)."""
        def row(r: NextChar) -> dict[str, Any]:
            return {"character": r.character, "bytes": list(r.bytes), "probability": r.probability,
                    "lower": r.lower, "upper": r.upper, "status": r.status, "canonical": r.canonical,
                    "healed": r.healed}

        return {"prompt": self.prompt, "model": self.model, "context": self.context, "seconds": round(self.seconds, 3),
                "rounds": self.rounds, "scored": self.scored, "done": self.done, "cancelled": self.cancelled,
                "ended": self.ended or "", "settled": self.settled_at, "tolerance": self.tolerance,
                "total_variation": self.total_variation, "next": [row(r) for r in self.rows],
                "rest": [row(r) for r in self.rest]}

    def _repr_html_(self) -> str:
        """A notebook's table: each character's three views as bars."""
        def bar(p: float, colour: str) -> str:
            return (f"<div style='background:{colour};height:0.8em;width:{max(0.0, min(p, 1.0)) * 12:.2f}em'></div>"
                    f"<small>{p:.3f}</small>")

        rows = "".join(
            f"<tr><td><code>{html.escape(r.shown)}</code></td><td>{bar(r.probability, '#1f77b4')}"
            f"<small> {html.escape(r.interval)}</small></td><td>{bar(r.canonical, '#ff7f0e')}</td>"
            f"<td>{bar(r.healed, '#2ca02c')}</td></tr>" for r in self.rows + self.rest)
        return (f"<p>After <code>{html.escape(repr(self.prompt))}</code> under {html.escape(self.model)}:</p>"
                f"<table><tr><th>next</th><th>marginal [certified]</th><th>canonical</th><th>healed</th></tr>{rows}"
                f"</table><p>{html.escape(self.sentence())}</p><p><small>{html.escape(self.standing())}</small></p>")

    def standing(self) -> str:
        """What the rows' values are worth, and why the search ended, in one sentence."""
        counts = {s: sum(r.status == s for r in self.rows) for s in (CERTIFIED, SETTLED, MOVING)}
        said = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        why = ("it was stopped" if self.cancelled else f"it ended by the {self.ended}" if self.ended
               else "it is running")
        settled = "" if self.settled_at is None else f"; the first byte's values settled at {self.settled_at:.1f} s"
        rest = f"; {len(self.rest)} range(s) of characters not resolved" if self.rest else ""
        return (f"After {self.seconds:.1f} s ({self.rounds} rounds, {self.scored:,} prefixes), {said or 'no rows'} "
                f"(tolerance {self.tolerance}){settled}{rest}; {why}. Certified: the true value lies in the interval; "
                f"settled: the value stopped moving round to round, its interval still open by the width shown; "
                f"moving: neither yet.")


@dataclass(frozen=True)
class Continuation:
    """A continuation, character by character, with each character's probability under the view
    that chose it; ``ended``: it reached the end of the string (or a special token) before its length."""

    text: str
    probabilities: tuple[float, ...]
    ended: bool = False


VIEWS = ("marginal", "canonical", "healed")  # a continuation's three views, in the order shown


@dataclass(frozen=True)
class Continuations:
    """A prompt continued by the marginal, by ``generate`` from the canonical tokens and from
    token healing, with the same settings (``how``: greedy or sample, ``seed``)."""

    prompt: str
    model: str
    how: str
    seed: int | None
    marginal: Continuation
    canonical: Continuation
    healed: Continuation
    seconds: float = 0.0
    cancelled: bool = False

    def to_json(self) -> dict[str, str]:
        """The three continuations' texts, by view."""
        return {v: getattr(self, v).text for v in VIEWS}

    def _repr_html_(self) -> str:
        """Each continuation's characters coloured by their probability."""
        return f"<p>{html.escape(repr(self.prompt))} continued ({self.how}):</p>{self.table()}"

    def table(self, font: str = "monospace") -> str:
        """The three continuations as an HTML table, one row a view, in ``font``, each cell in
        its own writing direction, with a line on what the colours say."""
        rows = "".join(f"<tr><th style='text-align:left;padding-right:1em'>{v}</th>"
                       f"<td dir='auto' style='unicode-bidi:isolate;font-family:{font};font-size:1.15em'>"
                       f"{self.html(v)}</td></tr>" for v in VIEWS)
        return (f"<table>{rows}</table><small>Each character on red as deep as it was improbable under the view "
                "that chose it (hover for its probability).</small>")

    def html(self, view: str) -> str:
        """One view's continuation as HTML: each character on red as deep as it was improbable."""
        c: Continuation = getattr(self, view)
        spans = []
        for ch, p in zip(c.text, c.probabilities, strict=False):
            alpha = 0.65 * (1.0 - max(0.0, min(p, 1.0)))
            spans.append(f"<span title='{p:.3f}' style='background:rgba(214,39,40,{alpha:.2f})'>"
                         f"{html.escape(show_piece(ch))}</span>")
        return "".join(spans) + (" <small>(end)</small>" if c.ended else "")


def _quoted(row: NextChar) -> str:
    return row.character if row.character == END else f"“{row.shown}”"


def finished(prefix: bytes) -> bool:
    """Whether a character's bytes so far are a whole character (or a byte no character needs more of)."""
    return len(prefix) >= char_length(prefix[0])


def character_of(prefix: bytes) -> str:
    """A whole character's text, or the range of characters an unfinished one begins."""
    if finished(prefix):
        try:
            return prefix.decode("utf-8")
        except UnicodeDecodeError:
            return "".join(f"\\x{b:02x}" for b in prefix)
    return label(prefix[:-1], len(prefix) - 1, prefix[-1])

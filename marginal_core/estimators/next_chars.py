"""What comes next after a prompt, as characters (docs/design.md, "What comes next"). No torch: the
marginal's next-byte steps (the prefix search carried past the prompt's last byte) composed into
whole characters, beside the canonical and healed token views folded by the character their
tokens write first, and the results a notebook, the CLI and the page show.
"""

from __future__ import annotations

import bisect
import html
import weakref
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from marginal_core.estimators.next_bytes import label
from marginal_core.lattice.readable import show_piece
from marginal_core.lattice.vocab import Vocabulary

if TYPE_CHECKING:
    import pandas as pd

END = "end"  # the outcome that writes no byte: end of string, special tokens, byte pieces
NO_BYTE = 256  # its column in a step's 257 outcomes
MAX_K = 256  # the most characters one call lists


@dataclass(frozen=True)
class ByteStep:
    """P(next byte = c | the bytes so far) for c = 0..255 and the outcome of no byte (256): the
    mass the search found (``point``) and the interval it certifies (``lower``, ``upper``)."""

    point: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


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
    seconds; ``done``: every row certified; ``cancelled``: Stop; ``ended``: why it ended, as
    ``search_stop.why_ended`` says; ``settled_at``: when the first byte's values settled), the
    prompt's canonical tokens (``tokens``, their surfaces) and the total variation distance from
    the marginal over the next byte of each view."""

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
    ended: str = ""
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
                "ended": self.ended, "settled": self.settled_at, "tolerance": self.tolerance,
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
    views: tuple[str, ...] = field(default=("marginal", "canonical", "healed"), repr=False)

    def to_json(self) -> dict[str, str]:
        """The three continuations' texts, by view."""
        return {v: getattr(self, v).text for v in self.views}

    def _repr_html_(self) -> str:
        """Each continuation's characters coloured by their probability."""
        rows = "".join(f"<tr><th>{v}</th><td>{self.html(v)}</td></tr>" for v in self.views)
        return f"<p>{html.escape(repr(self.prompt))} continued ({self.how}):</p><table>{rows}</table>"

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


def char_length(lead: int) -> int:
    """How many bytes the UTF-8 character a lead byte begins has (1 for ASCII and invalid leads)."""
    return 2 if 0xC2 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else 4 if 0xF0 <= lead < 0xF5 else 1


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


# ------------------------------------------------------------------- the token views, folded

_KEYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def first_key(surface: bytes | None) -> bytes:
    """The first character a surface writes (its bytes; the rest of the surface where it stops
    inside one), or b"" for none."""
    if not surface:
        return b""
    return surface[: char_length(surface[0])]


@dataclass(frozen=True)
class KeyGroups:
    """A head's ids by the first character they write: the characters, sorted (b"": none), and
    each id's index among them."""

    keys: tuple[bytes, ...]
    label: np.ndarray


@dataclass(frozen=True)
class KeyMasses:
    """A distribution over first characters: the characters, sorted, and their masses."""

    keys: tuple[bytes, ...]
    masses: np.ndarray

    @classmethod
    def of(cls, masses: dict[bytes, float]) -> KeyMasses:
        keys = tuple(sorted(masses))
        return cls(keys, np.array([masses[k] for k in keys], dtype=np.float64))

    def mass_of(self, prefix: bytes) -> float:
        """The mass of the first characters that begin with prefix (b"": of no byte); they are
        neighbours in sorted order (a character has at most four bytes)."""
        lo = bisect.bisect_left(self.keys, prefix)
        if not prefix:
            return float(self.masses[0]) if self.keys and self.keys[0] == b"" else 0.0
        return float(self.masses[lo : bisect.bisect_right(self.keys, prefix + b"\xff" * 4)].sum())

    def top(self) -> bytes:
        """The most probable first character (b"": none)."""
        return self.keys[int(np.argmax(self.masses))]

    def by_byte(self) -> np.ndarray:
        """The mass by first byte (256: no byte)."""
        first = np.array([k[0] if k else NO_BYTE for k in self.keys], dtype=np.int64)
        return np.bincount(first, weights=self.masses, minlength=257)


def key_groups(vocab: Vocabulary, size: int) -> KeyGroups:
    """A head of ``size`` rows' ids by the first character they write (b"": none: special tokens,
    byte pieces, empty surfaces, ids past the tokenizer), built once per vocabulary."""
    cache = _KEYS.setdefault(vocab, {})
    if size not in cache:
        pieces = {t for t in vocab.byte_tokens if t is not None}
        first = [b"" if v in pieces or v >= vocab.size else first_key(vocab.surfaces[v]) for v in range(size)]
        keys = tuple(sorted(set(first)))
        index = {k: i for i, k in enumerate(keys)}
        cache[size] = KeyGroups(keys, np.array([index[k] for k in first], dtype=np.int64))
    return cache[size]  # type: ignore[no-any-return]


def key_masses(probs: np.ndarray, groups: KeyGroups) -> KeyMasses:
    """A next-token distribution as the mass of each first character."""
    return KeyMasses(groups.keys, np.bincount(groups.label, weights=probs[: len(groups.label)],
                                              minlength=len(groups.keys)))


def healed_masses(vocab: Vocabulary, groups: KeyGroups, tail: bytes, before: np.ndarray,
                  heads: dict[int, np.ndarray]) -> KeyMasses:
    """Token healing as the mass of each first character after the tail: the next token after the
    backed-off one's predecessors, constrained to begin with its bytes ``tail``, renormalized; a
    token that spells the tail exactly goes on by the next token after it (``heads``)."""
    if not tail:
        return key_masses(before, groups)
    allowed = healing_ids(vocab, tail, heads)
    total = float(before[allowed].sum())
    out: dict[bytes, float] = {}
    exact = np.zeros(len(groups.keys))
    for v in allowed:
        rest = (vocab.surfaces[v] or b"")[len(tail) :]
        if rest:
            key = first_key(rest)
            out[key] = out.get(key, 0.0) + float(before[v]) / total
        else:
            exact += float(before[v]) / total * key_masses(heads[v], groups).masses
    for key, mass in zip(groups.keys, exact.tolist(), strict=True):
        if mass:
            out[key] = out.get(key, 0.0) + mass
    return KeyMasses.of(out)


def healing_ids(vocab: Vocabulary, tail: bytes, spelling: Iterable[int]) -> list[int]:
    """The tokens token healing lets follow the backed-off token's predecessors: every ordinary
    token that begins with its bytes ``tail``, and the tokens that spell it exactly (``spelling``:
    the backed-off token itself among them, a byte piece included: after a CJK character Gemma
    spells in byte pieces no ordinary token begins with its last byte)."""
    return sorted({*vocab.ids_beginning(tail), *spelling})


def total_variation(p: np.ndarray, q: np.ndarray) -> float:
    """Half the L1 distance between two distributions over the same outcomes."""
    return 0.5 * float(np.abs(np.asarray(p) - np.asarray(q)).sum())

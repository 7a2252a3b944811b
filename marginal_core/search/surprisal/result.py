"""Where in the text: the marginal surprisal of every byte, character or word, beside the
canonical tokenization's (docs/design.md, "Surprisal"). No torch: a :class:`Surprisal` holds the
prefix probabilities at every byte (``prefix_search``'s bounds) and the canonical tokens' log p,
and cuts them into regions of any unit without the model.

A region [a, b) of the text's bytes has the marginal surprisal log P(s<a) - log P(s<b), where
P(s<j) is the probability that the model's string begins with the first j bytes; the regions'
surprisals sum to -log P(s) as a prefix. Two rows of the canonical tokenization stand beside it:
the naive canonical row gives each canonical token's surprisal wholly to the region of its first
byte that is not whitespace (a token of whitespace alone: its first byte), as token-level tools
give a word the tokens that start in it; the canonical prefix row cuts the canonical
tokenization's own prefix probability at the region boundaries, as the marginal is cut (Pimentel
& Meister's word probability). Each region also holds what the model expected at its first byte:
the next byte's entropy and the rank of the byte that came (``next_bytes``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

import numpy as np

from marginal_core.ground.errors import EmptyTextError, MarginalError, UnrepresentableTextError
from marginal_core.search.ending import Ended
from marginal_core.search.masses import intervals
from marginal_core.search.settings import DEFAULT_TOLERANCE
from marginal_core.search.surprisal.next_bytes import ExpectedByte, NextBytes

if TYPE_CHECKING:
    import pandas as pd

Unit = Literal["byte", "char", "word"]
Space = Literal["trailing", "leading"]
UNITS: tuple[str, ...] = ("byte", "char", "word")
SPACES: tuple[str, ...] = ("trailing", "leading")
SURPRISAL_METHODS: tuple[str, ...] = ("search", "exact")
UNIT_NAMES = {"byte": "bytes", "char": "characters", "word": "words"}
COLUMNS = ("index", "start_byte", "end_byte", "text", "surprisal", "surprisal_canonical", "surprisal_canonical_prefix",
           "lower", "upper", "exact", "entropy", "rank")
NATS_COLUMNS = ("surprisal", "surprisal_canonical", "surprisal_canonical_prefix", "lower", "upper", "entropy")
EXACT_NATS = 1e-9  # bounds closer than this are one value (float64 sums of the same terms)


@dataclass(frozen=True)
class Region:
    """One region of the text: its byte span in the text's own UTF-8 bytes, its text, its marginal
    surprisal (nats) with the interval the search certifies, the naive canonical row's and the
    canonical prefix row's surprisal, and at its first byte the next byte's entropy (nats) and
    the rank of the byte that came (0: not reached yet)."""

    index: int
    start_byte: int
    end_byte: int
    text: str
    surprisal: float
    surprisal_canonical: float
    surprisal_canonical_prefix: float
    lower: float
    upper: float
    exact: bool
    entropy: float
    rank: int

    def as_dict(self) -> dict[str, object]:
        """The region's fields by name (COLUMNS), in order."""
        return {name: getattr(self, name) for name in COLUMNS}


def check_choice(value: str, choices: tuple[str, ...], what: str) -> str:
    """value if it is one of choices, else one MarginalError naming them."""
    if value not in choices:
        raise MarginalError(f"unknown {what} {value!r}: choose one of {', '.join(choices)}")
    return value


def check_text(text: str) -> None:
    """Refuse a text with nothing to cut into regions (empty, or whitespace alone) or that is not
    valid Unicode (a lone surrogate)."""
    UnrepresentableTextError.check_unicode(text)
    if not text.strip():
        raise EmptyTextError("the text is empty or only whitespace: type at least one word")


def _byte_starts(text: str) -> list[int]:
    """The byte offset at which each character starts, and the text's length in bytes last."""
    starts = [0]
    for ch in text:
        starts.append(starts[-1] + len(ch.encode("utf-8")))
    return starts


def region_spans(text: str, unit: str = "word", space: str = "trailing") -> list[tuple[int, int]]:
    """The regions of a text as byte spans [a, b) of its UTF-8 bytes, covering it end to end.

    ``word``: whitespace-delimited words, the whitespace after a word in its region
    (``trailing``) or in the next word's (``leading``); whitespace before the first word belongs
    to it, and whitespace after the last to it too."""
    check_choice(unit, UNITS, "unit")
    check_choice(space, SPACES, "space rule")
    check_text(text)
    starts = _byte_starts(text)
    if unit == "byte":
        return [(i, i + 1) for i in range(starts[-1])]
    if unit == "char":
        return list(zip(starts[:-1], starts[1:]))
    words = [(starts[m.start()], starts[m.end()]) for m in re.finditer(r"\S+", text)]
    if space == "trailing":
        cuts = [0] + [a for a, _ in words[1:]] + [starts[-1]]
    else:
        cuts = [0] + [b for _, b in words[:-1]] + [starts[-1]]
    return list(zip(cuts[:-1], cuts[1:]))


def _space_bytes(text: str) -> np.ndarray:
    """Per byte of the text: whether it belongs to a whitespace character."""
    flags = [ch.isspace() for ch in text for _ in ch.encode("utf-8")]
    return np.array(flags, dtype=bool)


@dataclass(frozen=True)
class Surprisal:
    """A text's surprisal by region under one model: ``regions`` (see :class:`Region`), with the
    byte-level prefix bounds behind them, so ``by(unit, space)`` recuts without the model.

    ``prefix_lower``/``prefix_upper``: log P(s<j) at every byte j of the lattice's bytes (which
    begin with a dummy-prefix space where the tokenizer adds one: ``offset`` bytes);
    ``canonical_spans`` and ``canonical_log_p``: each canonical token's byte span there and log p;
    ``canonical_prefix``: the canonical prefix probability's log at every byte; ``next``: what the
    model expected at every byte (None: not computed, a store's older line).
    ``log_p_text`` is the text's marginal (tokenizations that end exactly at its end) found.
    The search's two measures of progress (``search_stop``): ``settled_at``, the seconds at which
    its values settled (None: not yet), and ``certified``, the regions within ``tolerance``;
    ``ends_at``: the latest end its time budget allowed, ``ended``: why it ended (None while it runs);
    ``kv_peak_bytes``: the most its KV store held."""

    text: str
    model: str
    context: str | None
    dtype: str
    device: str
    method: str
    unit: str
    space: str
    offset: int
    prefix_lower: np.ndarray
    prefix_upper: np.ndarray
    canonical_spans: tuple[tuple[int, int], ...]
    canonical_log_p: np.ndarray
    log_p_text: float
    seconds: float
    canonical_prefix: np.ndarray | None = None
    next: NextBytes | None = None
    rounds: int = 0
    scored: int = 0
    cancelled: bool = False
    tolerance: float = DEFAULT_TOLERANCE
    settled_at: float | None = None
    ends_at: float | None = None
    ended: Ended | None = None
    kv_peak_bytes: int = 0

    def __repr__(self) -> str:
        text = self.text if len(self.text) <= 40 else self.text[:39] + "…"
        return (f"Surprisal({text!r}, {self.model}, {len(self.regions)} {self.unit} regions, "
                f"{self.total:.3f} nats, {self.bits_per_byte:.3f} bits/byte)")

    @property
    def regions(self) -> tuple[Region, ...]:
        """The regions of ``unit`` and ``space``, in text order."""
        return _regions(self)

    def by(self, unit: str = "word", space: str = "trailing") -> Surprisal:
        """The same surprisal cut into other regions (no model needed)."""
        region_spans(self.text, unit, space)  # checks the choices
        return replace(self, unit=unit, space=space)

    @property
    def log_prefix_probability(self) -> float:
        """log P(s) as a prefix: the string begins with the whole text (covering tokens included)."""
        return float(self.prefix_lower[-1])

    @property
    def total(self) -> float:
        """The regions' marginal surprisals summed: -log P(s) as a prefix, in nats."""
        return -self.log_prefix_probability

    @property
    def exact(self) -> bool:
        """Whether every region's value is exact (the search left no exit before it)."""
        return bool(np.all(self.prefix_upper - self.prefix_lower <= EXACT_NATS))

    @property
    def cuts(self) -> np.ndarray:
        """The regions' boundaries as lattice bytes, 0 and the end included (the first region holds
        a dummy-prefix space)."""
        return np.array([0] + [b + self.offset for _, b in region_spans(self.text, self.unit, self.space)])

    @property
    def certified(self) -> int:
        """How many regions have an interval within the tolerance."""
        return sum(r.upper - r.lower <= self.tolerance for r in self.regions)

    @property
    def open_regions(self) -> tuple[Region, ...]:
        """The regions left open: their interval wider than the tolerance."""
        return tuple(r for r in self.regions if not r.upper - r.lower <= self.tolerance)

    @property
    def progress(self) -> str:
        """The two measures of progress in words: 'values settled at 3.8 s; certifying: 16 of 94 words'."""
        values = "values settling" if self.settled_at is None else f"values settled at {self.settled_at:.1f} s"
        doing = "certifying" if not self.ended else "certified"
        return f"{values}; {doing}: {self.certified} of {len(self.regions)} {UNIT_NAMES[self.unit]}"

    @property
    def ended_reason(self) -> str:
        """Why the search ended, in words ('' while it runs)."""
        return self.ended.meaning if self.ended is not None else ""

    @property
    def fraction(self) -> float:
        """How far the search is, 0 to 1, for a bar: the share of regions certified, or of the time
        its budget allows, whichever is further (1 once it ended)."""
        if self.ended:
            return 1.0
        share = self.certified / max(len(self.regions), 1)
        return max(share, min(1.0, self.seconds / self.ends_at)) if self.ends_at else share

    @property
    def widest(self) -> float:
        """The widest region's interval, in nats (inf where a region is not reached yet)."""
        return max((r.upper - r.lower for r in self.regions), default=0.0)

    @property
    def bits_per_byte(self) -> float:
        """-log2 p(text) per byte of the text: a scale on which models of different vocabularies compare."""
        return bits_per_byte(self.log_p_text, self.text)

    def expected_bytes(self, j: int, k: int = 5) -> list[ExpectedByte]:
        """The k most probable next bytes at byte j of the text (0 to len - 1), most probable
        first, each labelled by the character it writes or begins: P(next byte = c | the text's
        first j bytes), summed over tokenizations, with the interval the search certifies (a
        character of several bytes by its first byte's mass; whole characters after a prompt:
        ``mc.prefix(text[:j]).next_characters``)."""
        return self._next().expected(j + self.offset, self.prefix_lower, self.prefix_upper, k)

    def _next(self) -> NextBytes:
        if self.next is None:
            raise MarginalError("this surprisal has no next-character sums (a store's older line): "
                                "compute it again with mc.surprisal")
        return self.next

    def to_pandas(self, bits: bool = False, next: int = 0) -> pd.DataFrame:
        """One row a region (COLUMNS); surprisals and entropy in nats, or in bits with ``bits``;
        ``next``: the columns next_1 .. next_k and p_next_1 .. p_next_k, the k most probable next
        characters at each region's first byte."""
        import pandas as pd

        frame = pd.DataFrame([r.as_dict() for r in self.regions], columns=list(COLUMNS))
        if bits:
            for column in NATS_COLUMNS:
                frame[column] = frame[column] / math.log(2)
        found = [self.expected_bytes(r.start_byte, next) for r in self.regions] if next else []
        for i in range(next):
            frame[f"next_{i + 1}"] = [f[i].label if i < len(f) else None for f in found]
            frame[f"p_next_{i + 1}"] = [f[i].probability if i < len(f) else None for f in found]
        return frame

    def as_dict(self, seconds: float | None = None, next: int = 0) -> dict[str, object]:
        """The JSON object of ``marginal surprisal --json`` (non-finite floats as None); ``next``:
        each region's k most probable next characters at its first byte, as a list ``next``."""
        from marginal_core.ground.jsonsafe import json_float

        regions = [{k: (json_float(v) if isinstance(v, float) else v) for k, v in r.as_dict().items()}
                   for r in self.regions]
        for region, r in zip(regions, self.regions, strict=True):
            if next:
                region["next"] = [{"character": c.label, "byte": c.byte, "probability": c.probability,
                                   "lower": c.lower, "upper": c.upper}
                                  for c in self.expected_bytes(r.start_byte, next)]
        return {"text": self.text, "model": self.model, "context": self.context, "unit": self.unit,
                "space": self.space, "method": self.method, "dtype": self.dtype, "device": self.device,
                "regions": regions, "log_prefix_probability": json_float(self.log_prefix_probability),
                "log_p_text": json_float(self.log_p_text), "bits_per_byte": json_float(self.bits_per_byte),
                "exact": self.exact, "seconds": self.seconds if seconds is None else seconds,
                "tolerance": self.tolerance, "settled": self.settled_at, "certified": self.certified,
                "open": [{"index": r.index, "text": r.text, "lower": json_float(r.lower), "upper": json_float(r.upper)}
                         for r in self.open_regions], "ended": self.ended or ""}


def bits_per_byte(log_p: float, text: str) -> float:
    """-log2 p per byte of the text's UTF-8 bytes (inf where no mass was found)."""
    size = len(text.encode("utf-8"))
    return -log_p / math.log(2) / size if size and math.isfinite(log_p) else math.inf


def _regions(s: Surprisal) -> tuple[Region, ...]:
    """Cut the byte-level bounds and the canonical tokens into s.unit's regions."""
    spans = region_spans(s.text, s.unit, s.space)
    data = s.text.encode("utf-8")
    canonical = np.zeros(len(spans))
    ends = np.array([b for _, b in spans])
    starts = np.array([a for a, _ in spans]) + s.offset
    spaces = _space_bytes(s.text)
    for (u, v), lp in zip(s.canonical_spans, s.canonical_log_p.tolist(), strict=True):
        first = next((p for p in range(max(u - s.offset, 0), v - s.offset) if not spaces[p]), max(u - s.offset, 0))
        canonical[int(np.searchsorted(ends, first, side="right"))] -= lp
    cuts = s.cuts
    bottom, top = intervals(s.prefix_lower, s.prefix_upper, cuts[:-1], cuts[1:])
    lower, gap = s.prefix_lower[cuts], s.prefix_upper[cuts] - s.prefix_lower[cuts]
    with np.errstate(invalid="ignore"):  # a region the search has not reached yet: -inf - -inf
        value = lower[:-1] - lower[1:]
        row = s.canonical_prefix[cuts] if s.canonical_prefix is not None else np.full(len(cuts), np.nan)
        prefix = row[:-1] - row[1:]
    entropy = s.next.entropy[starts] if s.next is not None else np.full(len(spans), np.nan)
    rank = s.next.rank[starts] if s.next is not None else np.zeros(len(spans), dtype=int)
    return tuple(Region(i, a, b, data[a:b].decode("utf-8", "backslashreplace"), float(value[i]), float(canonical[i]),
                        float(prefix[i]), float(bottom[i]), float(top[i]),
                        bool(gap[i] <= EXACT_NATS and gap[i + 1] <= EXACT_NATS), float(entropy[i]), int(rank[i]))
                 for i, (a, b) in enumerate(spans))

"""The beam's width: its default, its largest allowed value and the check, and the anytime
beam's rounds with what they say of convergence, apart from the beam itself so that options are
checked (and rounds described) without importing torch."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from marginal_core.ground.errors import MarginalError

DEFAULT_BEAM_WIDTH = 32
MAX_BEAM_WIDTH = 1024

AUTO_WIDTHS = (16, 64, 256, 1024)  # the anytime beam's rounds: each four times the last
# A round whose pruned prefixes could hold at most this many nats more is described by that bound.
CERTIFIED_NATS = 1.0


class Round(NamedTuple):
    """One finished round of the anytime beam: its width, the log of the non-canonical mass found
    by it and the rounds before it, the prefixes it pruned, the seconds and paths at its end, and
    ``log_missed``: the log of the pruned prefixes' summed probability, which bounds the mass of
    every path the rounds did not find (each extends a pruned prefix, and a prefix's completions
    hold at most its own probability), so the exact mass is at most log_mass ⊕ log_missed."""

    width: int
    log_mass: float
    pruned: int
    seconds: float
    paths: int
    log_missed: float = math.inf  # inf: not known

    @property
    def certified_gap(self) -> float:
        """Nats by which the exact non-canonical mass may lie above the bound, at most."""
        if self.pruned == 0:
            return 0.0
        if not (math.isfinite(self.log_mass) and math.isfinite(self.log_missed)):
            return math.inf
        excess = self.log_missed - self.log_mass  # log(1 + e^excess), without overflow
        return excess + math.log1p(math.exp(-excess)) if excess > 0 else math.log1p(math.exp(excess))


def auto_widths(widest: int = MAX_BEAM_WIDTH) -> tuple[int, ...]:
    """The anytime beam's widths up to ``widest`` (a server's cap): AUTO_WIDTHS below it, then it."""
    check_width(widest)
    return tuple(w for w in AUTO_WIDTHS if w < widest) + (widest,)


def describe_rounds(rounds: Sequence[Round]) -> str:
    """How converged the anytime beam's bound is, in a sentence: exact (the last round pruned
    nothing), or what the last widening added to the non-canonical mass found."""
    if not rounds:
        return "no round finished"
    widths = ("widths " if len(rounds) > 1 else "width ") + " → ".join(str(r.width) for r in rounds)
    if rounds[-1].pruned == 0:
        return f"{widths}; the last round pruned no prefix, so the bound is exact"
    if rounds[-1].certified_gap < CERTIFIED_NATS:  # what it pruned cannot hold much
        return (f"{widths}; what it pruned could hold at most {_share(-math.expm1(-rounds[-1].certified_gap))} "
                "more mass, so the bound is exact to within that")
    if len(rounds) == 1:
        return f"{widths}; stopped before a widening could be measured"
    added = -math.expm1(rounds[-2].log_mass - rounds[-1].log_mass) if math.isfinite(rounds[-1].log_mass) else 0.0
    return f"{widths}; the last widening added {_share(added)} of the non-canonical mass found"


def _share(fraction: float) -> str:
    """A share of the mass in words: '0.20%', or 'less than 0.01%'."""
    return "less than 0.01%" if fraction < 1e-4 else f"{100 * fraction:.2f}%"


def check_width(width: int) -> None:
    """Refuse a beam width outside 1..MAX_BEAM_WIDTH."""
    if not 1 <= width <= MAX_BEAM_WIDTH:
        raise MarginalError(f"the beam width must be between 1 and {MAX_BEAM_WIDTH}, not {width}")


def parse_width(value: str | int | None) -> int | None:
    """A width from a command line or a model argument: a number, checked, or None for 'auto'
    (the anytime beam, widened until it stops finding mass)."""
    if value is None or str(value).strip().lower() == "auto":
        return None
    try:
        width = int(value)
    except ValueError:
        raise MarginalError(f"the beam width is a number from 1 to {MAX_BEAM_WIDTH} or 'auto', not {value!r}") from None
    check_width(width)
    return width

"""What the prefix search knows after a round (docs/design.md, "Surprisal" and "What comes next";
no torch): the bounds on P(s<j) at every byte, the next-byte sums, a region's surprisal interval,
and past a text's end the next byte's probabilities with their certified intervals."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from marginal_core.search.ending import Ended

NO_BYTE = 256  # the column of the outcome that writes no byte (end of string, special tokens, byte pieces)


@dataclass(frozen=True)
class PrefixMasses:
    """Bounds on log P(s<j) for every lattice byte j (``lower``, ``upper``: arrays of len + 1),
    and on the text's own marginal (the tokenizations that end exactly at its end), after
    ``rounds`` rounds that scored ``scored`` prefixes; ``exits`` prefixes are left unscored.
    ``canonical_log_p``: each canonical token's log p; ``canonical_prefix``: log of the canonical
    prefix probability at every byte. ``next_lower[j, c]``: log P(s<j, next byte c) summed over
    the exactly scored prefixes (j < len), ``next_open[j]``: log of the mass that may add to any
    of byte j's (the exits and bounded prefixes at nodes up to j). Past the end, these have a row for
    the byte after the text, and ``next_end`` is the log mass the scored complete paths give the
    outcomes that write no byte there (end of string, special tokens, byte pieces). ``settled_at``:
    the seconds at which the values settled (``clock``), ``ends_at`` the latest end the time
    budget allows, ``ended`` why the search ended (the last one's; None before); ``fed``: the
    tokens it fed the model; ``kv_peak_bytes``: the most its KV store held (``kv``)."""

    lower: np.ndarray
    upper: np.ndarray
    log_p_text: float
    log_p_text_upper: float
    rounds: int
    scored: int
    exits: int
    seconds: float
    done: bool
    canonical_log_p: np.ndarray
    canonical_prefix: np.ndarray
    next_lower: np.ndarray
    next_open: np.ndarray
    cancelled: bool = False
    next_end: float = -math.inf
    settled_at: float | None = None
    ends_at: float | None = None
    ended: Ended | None = None
    fed: int = 0
    kv_peak_bytes: int = 0


@dataclass(frozen=True)
class ByteStep:
    """P(next byte = c | the text) for c = 0..255 and the outcome of no byte (NO_BYTE): the mass
    the search found (``point``) and the interval it certifies (``lower``, ``upper``)."""

    point: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    @classmethod
    def past_end(cls, masses: PrefixMasses) -> ByteStep:
        """From a search past the text's end: the mass found over the lower bound on P(text as a
        prefix), in [found over the upper bound, found and open over the lower]."""
        found = np.append(masses.next_lower[-1], masses.next_end)
        low_p, up_p, open_mass = masses.lower[-1], masses.upper[-1], masses.next_open[-1]
        with np.errstate(invalid="ignore", over="ignore"):
            point = np.nan_to_num(np.exp(found - low_p), nan=0.0)
            lower = np.nan_to_num(np.exp(found - up_p), nan=0.0)
            upper = np.minimum(np.nan_to_num(np.exp(np.logaddexp(found, open_mass) - low_p), nan=1.0), 1.0)
        return cls(point, lower, upper)


def intervals(lower: np.ndarray, upper: np.ndarray, a: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The surprisal intervals of regions [a, c) (lattice bytes, a < c) from the bounds on
    log P(s<j). The top is log up(a) - log lo(c). The bottom couples the two ends: the mass
    unscored before a, Y at a, is at most Y at c too, so the surprisal is at least the smaller of
    log lo(a) - log(lo(c) + the mass unscored in [a, c)) and log up(a) - log up(c) (the ends of
    Y's range), and at least 0 (docs/design.md, "Surprisal")."""
    lo_a, up_a, lo_c, up_c = lower[a], upper[a], lower[c], upper[c]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        top = np.fmax(np.fmax(up_c, up_a), lo_a)
        safe = np.where(np.isfinite(top), top, 0.0)
        # lo(c) + the mass unscored in [a, c) = up(c) - (up(a) - lo(a))
        rest = np.exp(up_c - safe) - np.exp(up_a - safe) + np.exp(lo_a - safe)
        inside = np.fmax(lo_c, np.where(rest > 0, safe + np.log(np.where(rest > 0, rest, 1.0)), -np.inf))
        bottom = np.fmax(np.fmin(lo_a - inside, up_a - up_c), 0.0)
        return np.where(np.isnan(bottom), 0.0, bottom), up_a - lo_c


def interval_widths(lower: np.ndarray, upper: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """The width of each region's interval between consecutive cuts (lattice bytes, in order)."""
    bottom, top = intervals(lower, upper, cuts[:-1], cuts[1:])
    return top - bottom

"""What the prefix search knows after a round (docs/design.md, "Surprisal" and "What comes next";
no torch): the bounds on P(s<j) at every byte, the next-byte sums, and past a text's end the
next-byte probabilities with their certified intervals."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


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
    the seconds at which the values settled (``search_stop``), ``ends_at`` the latest end the time
    budget allows, ``ended`` why the search ended (the last one's: "certified", "stalled",
    "prefix budget", "time budget", "default stop", "stopped", "exact"); ``kv_peak_bytes``: the
    most its KV store held (``prefix_kv``)."""

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
    ended: str = ""
    kv_peak_bytes: int = 0


def end_probabilities(masses: PrefixMasses) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """P(next byte = c | the text) past its end, for every byte c and the outcome of no byte (the
    257th): the mass found over the lower bound on P(text as a prefix), and the interval it lies
    in, [found over the upper bound, found and open over the lower]."""
    found = np.append(masses.next_lower[-1], masses.next_end)
    low_p, up_p, open_mass = masses.lower[-1], masses.upper[-1], masses.next_open[-1]
    with np.errstate(invalid="ignore", over="ignore"):
        point = np.nan_to_num(np.exp(found - low_p), nan=0.0)
        lower = np.nan_to_num(np.exp(found - up_p), nan=0.0)
        upper = np.minimum(np.nan_to_num(np.exp(np.logaddexp(found, open_mass) - low_p), nan=1.0), 1.0)
    return point, lower, upper

"""When a search in rounds ends by itself (docs/design.md, "Surprisal: where in the text",
"Stopping"), and its two measures of progress. No torch: a caller hands it, after every round,
the seconds so far, each region's point value and each region's interval width.

- **Values settled**: the last round moved no region's value by more than the tolerance. The
  values are then taken as settled since the round before it (``settled_at``: its seconds); a
  round that moves a value again unsettles them.
- **Certified**: n of N regions whose interval is within the tolerance.

The time budget is ``None`` (run until every region is within the tolerance), a number of
seconds (an explicit budget: the search runs until every region is certified or it is spent), or
``"auto"`` (the default stop of the CLI and the page): once the values have settled, the
certificate gets at most CERTIFY_SHARE times the seconds it took to see them settled (the round
after), at least CERTIFY_FLOOR_S, and the search never runs past AUTO_CAP_S.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from marginal_core.ground.errors import MarginalError

AUTO: Literal["auto"] = "auto"
TimeBudget = float | Literal["auto"] | None
# The default stop (measured on bench/paragraph.txt under both models: docs/design.md, "Stopping").
CERTIFY_SHARE = 3.0  # after the values settle, the certificate gets this many times their seconds
CERTIFY_FLOOR_S = 8.0  # ... but at least this long (a sentence certifies within it)
AUTO_CAP_S = 45.0  # and the whole search at most this long (values that never settle)


def check_time_budget(value: TimeBudget) -> TimeBudget:
    """A time budget as given, if it is None, "auto" or a positive number of seconds, else one
    clear error."""
    if value is None or value == AUTO:
        return value
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0 or not math.isfinite(value):
        raise MarginalError(f"the time budget is a number of seconds (0 or more), 'auto' or None, not {value!r}")
    return float(value)


def parse_time_budget(text: str) -> TimeBudget:
    """A command line's --time-budget: seconds, 'auto' (the default stop) or 'none' (until
    certified), else one clear error."""
    word = text.strip().lower()
    if word == "none":
        return None
    if word == AUTO:
        return AUTO
    try:
        return check_time_budget(float(word))
    except (ValueError, MarginalError):
        raise MarginalError(f"--time-budget takes a number of seconds (0 or more), 'auto' or 'none', not {text!r}") from None


@dataclass
class SearchClock:
    """A search's two measures of progress and its time budget, updated after every round.
    ``ended`` says why the clock ends the search (None: it does not)."""

    tolerance: float
    time_budget: TimeBudget = None
    settled_at: float | None = None  # seconds when the values settled (None: not settled)
    certified: int = 0
    regions: int = 0
    ends_at: float | None = None  # seconds at which the search will end at the latest (None: no limit)
    ended: str | None = None
    _values: np.ndarray | None = field(default=None, repr=False)
    _seconds: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        self.time_budget = check_time_budget(self.time_budget)
        self._plan(None)

    def round(self, seconds: float, values: np.ndarray, widths: np.ndarray) -> None:
        """A finished round at ``seconds``: each region's point value and interval width."""
        before, self._values = self._values, np.asarray(values, dtype=np.float64)
        if before is not None:
            with np.errstate(invalid="ignore"):
                moved = np.abs(self._values - before)
            still = bool(np.all(np.isfinite(moved)) and float(np.max(moved, initial=0.0)) <= self.tolerance)
            if not still and self.settled_at is not None:
                self.settled_at = None
                self._plan(None)
            elif still and self.settled_at is None:
                self.settled_at = self._seconds  # the round before this one held the values already
                self._plan(seconds)
        self._seconds = seconds
        self.regions = len(widths)
        self.certified = int(np.count_nonzero(np.asarray(widths) <= self.tolerance))
        if self.settled_at is None and self.certified == self.regions:
            self.settled_at = seconds  # every value within the tolerance of its truth: none can move further
        if self.ends_at is not None and seconds >= self.ends_at:
            self.ended = "time budget" if self.time_budget != AUTO else "default stop"

    def over(self, seconds: float) -> bool:
        """Whether the time is up at ``seconds`` (the round under way then ends the search)."""
        return self.ends_at is not None and seconds >= self.ends_at

    def rows(self, seconds: float, rows: int, per_row: float | None) -> int:
        """At most ``rows`` for the next round, fewer where the time left at ``seconds`` holds
        fewer at ``per_row`` seconds each (the last round's rate; None: not known yet), so that
        a round ends near the budget's end instead of one long round past it (at least one)."""
        if self.ends_at is None or per_row is None or per_row <= 0 or rows <= 0:
            return rows
        return max(1, min(rows, int((self.ends_at - seconds) / per_row)))

    def _plan(self, now: float | None) -> None:
        """The latest end: the explicit budget, or the default stop's (its cap, and once the values
        settled, their seconds' share after ``now``)."""
        if self.time_budget is None:
            self.ends_at = None
        elif self.time_budget != AUTO:
            self.ends_at = float(self.time_budget)
        elif now is None:
            self.ends_at = AUTO_CAP_S
        else:
            self.ends_at = min(AUTO_CAP_S, now + max(CERTIFY_FLOOR_S, CERTIFY_SHARE * now))


def why_ended(exact: bool, steps: bool, room: bool, widths: np.ndarray, before: np.ndarray | None,
              clock: SearchClock, user_stop: Callable[[], bool]) -> str:
    """Why a search in rounds ends after this round ("" where it goes on): every region certified,
    no prefix left to score (``steps`` False: every exit scored, or none heavy enough to matter;
    with no ``room`` left, the prefix budget spent), a round that narrowed no open interval
    enough (``before``: the widths after the round before; :func:`narrowed`), Stop, or the clock."""
    tolerance = clock.tolerance
    if not exact and float(np.max(widths, initial=0.0)) <= tolerance:
        return "certified"
    if not steps:
        return "exact" if exact else "exits scored" if room else "prefix budget"
    if not exact and before is not None and not narrowed(before, widths, tolerance):
        return "stalled"
    if user_stop():
        return "stopped"
    return clock.ended or ""


def narrowed(before: np.ndarray, widths: np.ndarray, tolerance: float) -> bool:
    """Whether a round narrowed some interval that was over the tolerance by the tolerance, or by
    half of what it was over: near the tolerance the widths shrink by a share a round (0.017,
    0.011, 0.007), so a step of the tolerance alone would end a search a round before it certifies."""
    open_ = before > tolerance
    need = np.minimum(tolerance, (before[open_] - tolerance) / 2)
    return bool(np.any(before[open_] - widths[open_] >= need))

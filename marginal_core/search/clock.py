"""When a search in rounds ends by itself (docs/design.md, "Stopping"), and its two measures of
progress. No torch: a caller hands it, after every round, each region's point value and interval
width.

- **Values settled**: the last round moved no value by more than the tolerance. The values are then
  taken as settled since the round before it (``settled_at``: its seconds); a round that moves a
  value again unsettles them.
- **Certified**: n of N regions whose interval is within the tolerance.

The time is kept by a :class:`Deadline`, the one stop rule: a time budget of None (no limit), a
number of seconds, or "auto" (the default stop of the CLI and the page: once the values have
settled, the certificate gets at most CERTIFY_SHARE times the seconds it took to see them settled,
at least CERTIFY_FLOOR_S, and the work never runs past AUTO_CAP_S). A call of several searches (What
comes next's byte steps) holds one deadline, and each search's lies within it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from marginal_core.search.ending import Ended
from marginal_core.search.settings import AUTO, TimeBudget

# The default stop (measured on bench/paragraph.txt under both models: docs/history/2026-12-07-figures-from-the-design-notes.md).
CERTIFY_SHARE = 3.0  # after the values settle, the certificate gets this many times their seconds
CERTIFY_FLOOR_S = 8.0  # ... but at least this long (a sentence certifies within it)
AUTO_CAP_S = 45.0  # and the whole work at most this long (values that never settle)


@dataclass
class Deadline:
    """When work under a time budget must end, in seconds from ``started``: the explicit budget,
    or the default stop's (its cap, and once ``settle`` says when the values settled, their share
    after). Within a ``parent``, it ends by the parent's end too."""

    time_budget: TimeBudget
    parent: Deadline | None = None
    started: float = field(default_factory=time.perf_counter)
    _plan: float = math.inf

    def __post_init__(self) -> None:
        self.settle(None)

    def seconds(self) -> float:
        """Seconds since the work began."""
        return time.perf_counter() - self.started

    def settle(self, at: float | None) -> None:
        """The values settled at ``at`` seconds (None: they moved again): the default stop gives
        the certificate its share of time after it."""
        if self.time_budget is None:
            self._plan = math.inf
        elif self.time_budget != AUTO:
            self._plan = float(self.time_budget)
        else:
            self._plan = AUTO_CAP_S if at is None else min(AUTO_CAP_S, at + max(CERTIFY_FLOOR_S, CERTIFY_SHARE * at))

    @property
    def ends_at(self) -> float | None:
        """The latest end, in this deadline's seconds (None: no limit)."""
        end = self._plan
        if self.parent is not None and self.parent.ends_at is not None:
            end = min(end, self.parent.ends_at - (self.started - self.parent.started))
        return None if math.isinf(end) else end

    def over(self, seconds: float | None = None) -> bool:
        """Whether the time is up at ``seconds`` (None: now)."""
        end = self.ends_at
        return end is not None and (self.seconds() if seconds is None else seconds) >= end

    def reason(self) -> Ended:
        """Why work that ran out of time ended, in the enum's words."""
        top = self
        while top.parent is not None:
            top = top.parent
        return Ended.DEFAULT_STOP if top.time_budget == AUTO else Ended.TIME_BUDGET


@dataclass
class SearchClock:
    """A search's two measures of progress and its deadline, updated after every round."""

    tolerance: float
    deadline: Deadline
    settled_at: float | None = None  # seconds when the values settled (None: not settled)
    certified: int = 0
    regions: int = 0
    late: bool = False  # the deadline passed by the last round's end
    _values: np.ndarray | None = field(default=None, repr=False)
    _seconds: float = field(default=0.0, repr=False)

    def round(self, seconds: float, values: np.ndarray, widths: np.ndarray) -> None:
        """A round finished at ``seconds``: each region's point value and interval width."""
        before, self._values = self._values, np.asarray(values, dtype=np.float64)
        if before is not None:
            with np.errstate(invalid="ignore"):
                moved = np.abs(self._values - before)
            still = bool(np.all(np.isfinite(moved)) and float(np.max(moved, initial=0.0)) <= self.tolerance)
            if not still and self.settled_at is not None:
                self.settled_at = None
                self.deadline.settle(None)
            elif still and self.settled_at is None:
                self.settled_at = self._seconds  # the round before this one held the values already
                self.deadline.settle(seconds)
        self._seconds = seconds
        self.regions = len(widths)
        self.certified = int(np.count_nonzero(np.asarray(widths) <= self.tolerance))
        if self.settled_at is None and self.certified == self.regions:
            self.settled_at = seconds  # every value within the tolerance of its truth: none can move further
        self.late = self.deadline.over(seconds)

    def rows(self, seconds: float, rows: int, per_row: float | None) -> int:
        """At most ``rows`` for the next round, fewer where the time left at ``seconds`` holds
        fewer at ``per_row`` seconds each (the last round's rate; None: not known yet), so that a round
        ends near the deadline instead of one long round past it (at least one)."""
        end = self.deadline.ends_at
        if end is None or per_row is None or per_row <= 0 or rows <= 0:
            return rows
        return max(1, min(rows, int((end - seconds) / per_row)))


def why_ended(exact: bool, steps: bool, room: bool, widths: np.ndarray, before: np.ndarray | None,
              clock: SearchClock, user_stop: Callable[[], bool]) -> Ended | None:
    """Why a search in rounds ends after this round (None where it goes on): every region
    certified, no prefix left to score (``steps`` False: every exit scored, or none heavy enough
    to matter; with no ``room`` left, the prefix budget spent), a round that narrowed no open
    interval enough (``before``: the widths after the round before; :func:`narrowed`), Stop, or
    the deadline."""
    tolerance = clock.tolerance
    if not exact and float(np.max(widths, initial=0.0)) <= tolerance:
        return Ended.CERTIFIED
    if not steps:
        return Ended.EXACT if exact else Ended.EXITS_SCORED if room else Ended.PREFIX_BUDGET
    if not exact and before is not None and not narrowed(before, widths, tolerance):
        return Ended.STALLED
    if user_stop():
        return Ended.STOPPED
    return clock.deadline.reason() if clock.late else None


def narrowed(before: np.ndarray, widths: np.ndarray, tolerance: float) -> bool:
    """Whether a round narrowed some interval that was over the tolerance by the tolerance, or by
    half of what it was over: near the tolerance the widths shrink by a share a round (0.017,
    0.011, 0.007), so a step of the tolerance alone would end a search a round before it certifies."""
    open_ = before > tolerance
    need = np.minimum(tolerance, (before[open_] - tolerance) / 2)
    return bool(np.any(before[open_] - widths[open_] >= need))

"""How one search, or one call of several, runs: one settings object, checked once (docs/design.md,
"Stopping"). No torch."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from marginal_core.ground.errors import MarginalError
from marginal_core.ground.progress import Progress, StopCheck
from marginal_core.lattice.graph import DEFAULT_ENUMERATION_BUDGET

DEFAULT_TOLERANCE = 0.01  # nats: an interval this narrow is certified (and a widening that adds less ends the beam)
MAX_ROWS = 1024  # the most prefixes a round scores unless a caller (a server's cap) says otherwise
KV_BYTES = 256 << 20  # what one search keeps of its prefixes' keys and values (SmolLM2: 46 KB a prefix in float32)
AUTO: Literal["auto"] = "auto"
TimeBudget = float | Literal["auto"] | None


@dataclass(frozen=True)
class SearchSettings:
    """``tolerance``: the interval width (nats) that certifies; ``time_budget``: None (until
    certified), seconds, or "auto" (the default stop, ``clock``); ``max_rows``: the most prefixes a
    round scores (a server's cap); ``budget``: the most prefixes a search scores; ``kv_bytes``: what
    it keeps of their keys and values across rounds (0: none); ``progress`` hears each round's
    passes; ``should_stop`` is Stop. Bad values are refused here, before any work."""

    tolerance: float = DEFAULT_TOLERANCE
    time_budget: TimeBudget = None
    max_rows: int = MAX_ROWS
    budget: int = DEFAULT_ENUMERATION_BUDGET
    kv_bytes: int = KV_BYTES
    progress: Progress | None = None
    should_stop: StopCheck | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.tolerance, int | float) and self.tolerance > 0 and math.isfinite(self.tolerance)):
            raise MarginalError(f"the tolerance is a positive number of nats, not {self.tolerance!r}")
        object.__setattr__(self, "time_budget", check_time_budget(self.time_budget))
        for name in ("max_rows", "budget"):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= 1):
                raise MarginalError(f"{name} is a whole number of prefixes (1 or more), not {getattr(self, name)!r}")
        if not (isinstance(self.kv_bytes, int) and self.kv_bytes >= 0):
            raise MarginalError(f"kv_bytes is a number of bytes (0 or more), not {self.kv_bytes!r}")

    def stopped(self) -> bool:
        """Whether Stop was pressed."""
        return self.should_stop is not None and bool(self.should_stop())


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

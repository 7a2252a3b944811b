"""Why a search ended: one enum, whose values are the words the JSON, the command line and the
pages show, each with its meaning (docs/design.md, "Stopping"). No torch."""

from __future__ import annotations

from enum import Enum


class Ended(str, Enum):
    """Why a search (or a call of several) ended; its value is the word written everywhere (a
    str: it compares, formats and goes into JSON as that word)."""

    CERTIFIED = "certified"
    STALLED = "stalled"
    EXITS_SCORED = "exits scored"
    EXACT = "exact"
    PREFIX_BUDGET = "prefix budget"
    TIME_BUDGET = "time budget"
    DEFAULT_STOP = "default stop"
    STOPPED = "stopped"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @property
    def meaning(self) -> str:
        """What the reason says, in a few words."""
        return _MEANINGS[self]


_MEANINGS = {
    Ended.CERTIFIED: "every interval within the tolerance",
    Ended.STALLED: "a round narrowed no open interval by the tolerance, or by half of what it was over",
    Ended.EXITS_SCORED: "every prefix that matters scored",
    Ended.EXACT: "every prefix scored",
    Ended.PREFIX_BUDGET: "the budget of prefixes spent",
    Ended.TIME_BUDGET: "the time budget spent",
    Ended.DEFAULT_STOP: "the default stop (the values settled and the certificate had its share of time)",
    Ended.STOPPED: "stopped",
}

"""The work scoring calls did (paths, tokens fed, forward passes, head rows, seconds), summed over
every call given one :class:`ScoreStats`; what the benchmarks and the estimators' pass counts read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields

from marginal_core.lattice.paths import Path


@dataclass
class ScoreStats:
    """Work done by scoring calls, summed over every call that is given this object.

    plain_tokens is what plain scoring feeds for the same paths (context + path each, without
    padding); tokens_fed counts what was fed here (padding excluded, padded_tokens includes it);
    head_rows counts the hidden states that went through the LM head.
    """

    paths: int = 0
    scored_tokens: int = 0
    plain_tokens: int = 0
    tokens_fed: int = 0
    padded_tokens: int = 0
    forward_passes: int = 0
    head_rows: int = 0
    oom_retries: int = 0
    seconds: float = 0.0

    def share(self, fraction: float) -> ScoreStats:
        """A request's part of a shared pass's work: its fraction of the tokens and head rows,
        every pass (each carried it)."""
        return ScoreStats(tokens_fed=round(self.tokens_fed * fraction),
                          padded_tokens=round(self.padded_tokens * fraction),
                          forward_passes=self.forward_passes, head_rows=round(self.head_rows * fraction),
                          oom_retries=self.oom_retries)

    def add(self, other: ScoreStats) -> None:
        """Add other's work to this one's."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    @property
    def saved_share(self) -> float:
        """Share of plain scoring's tokens that context reuse and prefix sharing did not feed."""
        return 1 - self.tokens_fed / self.plain_tokens if self.plain_tokens else 0.0

    @property
    def tokens_per_second(self) -> float:
        """Path tokens scored per wall-clock second."""
        return self.scored_tokens / self.seconds if self.seconds else 0.0


def count_call(stats: ScoreStats, paths: list[Path], context: list[int], started: float) -> None:
    """Add one call's paths, path tokens, plain-equivalent tokens and wall time to stats."""
    lengths = sum(map(len, paths))
    stats.paths += len(paths)
    stats.scored_tokens += lengths
    stats.plain_tokens += lengths + len(context) * len(paths)
    stats.seconds += time.perf_counter() - started

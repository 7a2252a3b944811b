"""What a method's run may be told (samples, the length bound, the seed, chunks, the beam's width
and budget), checked once before any work (docs/design.md, "Streams"); no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from marginal_core.estimators.beam_width import DEFAULT_BEAM_WIDTH, DEFAULT_TOLERANCE, MAX_BEAM_WIDTH, check_width
from marginal_core.ground.errors import MarginalError
from marginal_core.lattice.graph import DEFAULT_ENUMERATION_BUDGET


@dataclass(frozen=True)
class EstimateOptions:
    """What a method's run may be told, checked once: samples (k), the length bound L, the
    seed, the exact method's path budget, whether the proxy covers the canonical path, the
    samples per streamed update (None: everything at once, which shares the most prefixes), and
    the first update's samples (then full chunks, so a large run's first estimate comes early;
    None: every chunk is ``chunk``), and the seconds of work past which a chunk after the first
    need not grow (None: chunks of ``chunk`` samples; else a chunk grows past ``chunk`` to about
    that much work at the rate of the chunk before, so a fast device needs few passes: the
    lattice and exact methods); the beam's width (None: the anytime beam, widened until a
    widening adds less than ``tolerance`` nats or ``time_budget`` seconds have passed, its
    widest round ``max_beam_width``)."""

    samples: int = 1000
    max_len: int | None = None
    seed: int | None = 0
    budget: int = DEFAULT_ENUMERATION_BUDGET
    include_canonical: bool = False
    chunk: int | None = None
    first_chunk: int | None = None
    chunk_seconds: float | None = None
    beam_width: int | None = DEFAULT_BEAM_WIDTH
    tolerance: float = DEFAULT_TOLERANCE
    time_budget: float | None = None
    max_beam_width: int = MAX_BEAM_WIDTH  # the anytime beam's widest round (a class server caps it)

    def __post_init__(self) -> None:
        check_width(self.max_beam_width)
        if self.beam_width is not None:
            check_width(self.beam_width)
        checks = [
            (self.tolerance > 0, f"the tolerance must be above 0 nats, not {self.tolerance}"),
            (self.time_budget is None or self.time_budget > 0, f"the time budget must be above 0 s, not {self.time_budget}"),
            (self.samples >= 0, f"samples must be 0 or more, not {self.samples}"),
            (self.max_len is None or self.max_len >= 1, f"the length bound must be at least 1, not {self.max_len}"),
            (self.budget >= 1, f"the enumeration budget must be at least 1, not {self.budget}"),
            (self.chunk is None or self.chunk >= 1, f"chunks must hold at least 1 sample, not {self.chunk}"),
            (self.first_chunk is None or self.first_chunk >= 1,
             f"the first chunk must hold at least 1 sample, not {self.first_chunk}"),
            (self.chunk_seconds is None or self.chunk_seconds > 0,
             f"a chunk's seconds must be above 0, not {self.chunk_seconds}"),
        ]
        for ok, message in checks:
            if not ok:
                raise MarginalError(message)

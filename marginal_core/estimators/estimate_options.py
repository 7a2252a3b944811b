"""What a method's run may be told (samples, the length bound, the seed, chunks, the beam's width
and budget), checked once before any work (docs/design.md, "Streams"); no torch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from marginal_core.estimators.beam_width import DEFAULT_BEAM_WIDTH, MAX_BEAM_WIDTH, check_width
from marginal_core.ground.errors import MarginalError
from marginal_core.lattice.graph import DEFAULT_ENUMERATION_BUDGET
from marginal_core.search.settings import DEFAULT_TOLERANCE


@dataclass(frozen=True)
class EstimateOptions:
    """What a method's run may be told, checked once: samples (k), the length bound L, the
    seed, the exact method's path budget, whether the proxy covers the canonical path, the
    samples per streamed update (None: everything at once, which shares the most prefixes), and
    the first update's samples (then full chunks, so a large run's first estimate comes early;
    None: every chunk is ``chunk``), and the seconds of work past which a chunk after the first
    need not grow (None: chunks of ``chunk`` samples; else a chunk grows past ``chunk`` to about
    that much work at the rate of the chunk before, so a fast device needs few passes: the
    lattice and exact methods), and whether a lattice or exact run scores a canonical path not
    yet scored in its first chunk's trie (one pass, not two: the app's live runs, whose first
    chunks a class's sessions share; its log p then carries that trie's rounding, about 1e-5
    nats in float32, instead of its own pass's); the beam's width (None: the anytime beam, widened until a
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
    canonical_in_first_chunk: bool = False
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


def chunk_sizes(total: int, chunk: int | None, first: int | None = None, seconds: float | None = None,
                spent: Sequence[tuple[int, float]] = ()) -> Iterator[int]:
    """The sizes of a stream's chunks over total samples: ``chunk`` each (None: all at once),
    after a ``first`` one where given (a small first chunk brings the first estimate early;
    full chunks after it share the most prefixes, which doubling up to ``chunk`` did not). With
    ``seconds``, a chunk after the first grows past ``chunk`` to hold about that much work at the
    rate of the chunk before (``spent``: (samples, seconds scoring them) per chunk, appended by
    the stream as it goes): a GPU takes a run in a few passes, a CPU keeps its steady updates."""
    base = max(1, chunk or total)
    size, done = min(base, first or base), 0
    while done < total:
        size = min(size, total - done)
        yield size
        done += size
        samples, took = spent[-1] if spent else (size, 0.0)
        size = max(base, int(seconds * samples / took)) if seconds and took > 0 else base

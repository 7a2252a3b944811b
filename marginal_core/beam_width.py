"""The beam's width: its default, its largest allowed value and the check, apart from the beam
itself so that options are checked without importing torch."""

from __future__ import annotations

from marginal_core.errors import MarginalError

DEFAULT_BEAM_WIDTH = 32
MAX_BEAM_WIDTH = 1024


def check_width(width: int) -> None:
    """Refuse a beam width outside 1..MAX_BEAM_WIDTH."""
    if not 1 <= width <= MAX_BEAM_WIDTH:
        raise MarginalError(f"the beam width must be between 1 and {MAX_BEAM_WIDTH}, not {width}")

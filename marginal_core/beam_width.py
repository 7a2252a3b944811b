"""The beam's width: its default, its largest allowed value and the check, apart from the beam
itself so that options are checked without importing torch."""

from __future__ import annotations

from marginal_core.errors import MarginalError

DEFAULT_BEAM_WIDTH = 32
MAX_BEAM_WIDTH = 1024
DEFAULT_TOLERANCE = 0.01  # nats: a widening that adds less ends the anytime beam


def check_width(width: int) -> None:
    """Refuse a beam width outside 1..MAX_BEAM_WIDTH."""
    if not 1 <= width <= MAX_BEAM_WIDTH:
        raise MarginalError(f"the beam width must be between 1 and {MAX_BEAM_WIDTH}, not {width}")


def parse_width(value: str | int | None) -> int | None:
    """A width from a command line or a model argument: a number, checked, or None for 'auto'
    (the anytime beam, widened until it stops finding mass)."""
    if value is None or str(value).strip().lower() == "auto":
        return None
    try:
        width = int(value)
    except ValueError:
        raise MarginalError(f"the beam width is a number from 1 to {MAX_BEAM_WIDTH} or 'auto', not {value!r}") from None
    check_width(width)
    return width

"""JSON has no infinities or NaN: the one conversion every writer of results uses."""

from __future__ import annotations

import math


def json_float(x: float) -> float | None:
    """x as a float, or None where it is not finite (a log of zero mass, a missing figure)."""
    x = float(x)
    return x if math.isfinite(x) else None

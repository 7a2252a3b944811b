"""marginal: decoding-free marginalization of causal LMs over tokenizations.

Importing the package is cheap (no torch); the heavy modules are imported where they are used.
"""

from __future__ import annotations

from marginal_core.errors import (
    EmptyTextError,
    MarginalError,
    NormalizationError,
    TooManyPathsError,
    UnknownModelError,
    UnrepresentableTextError,
)

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "MarginalError",
    "UnknownModelError",
    "EmptyTextError",
    "UnrepresentableTextError",
    "NormalizationError",
    "TooManyPathsError",
]

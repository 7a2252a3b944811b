"""The one place marginal keeps what it builds once (converted tokenizers, models, vocabulary
indexes, the app's results): ``$MARGINAL_CACHE``, or ``~/.cache/marginal`` when unset or empty."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The cache root; an empty ``$MARGINAL_CACHE`` counts as unset."""
    return Path(os.environ.get("MARGINAL_CACHE") or Path.home() / ".cache" / "marginal")

"""Where marginal keeps what it builds once (converted tokenizers, models, vocabulary indexes, the
app's results): the cache root. The models' folders under it are ``models.caches``'."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The cache root: ``$MARGINAL_CACHE``, or ``~/.cache/marginal`` when unset or empty."""
    return Path(os.environ.get("MARGINAL_CACHE") or Path.home() / ".cache" / "marginal")

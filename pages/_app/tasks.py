"""What the downstream task pages share: where the app keeps their results folders."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from marginal_core.cache import cache_root


def app_folder(task: str, **identity: Any) -> Path:
    """A results folder for the app, one per setup, under $MARGINAL_CACHE/runs (so runs resume
    and accumulate across sessions: a larger limit or another method only adds rows)."""
    digest = hashlib.sha1(json.dumps({"task": task, **identity}, sort_keys=True).encode()).hexdigest()[:12]
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(identity.get("dataset", "")))[-40:]
    return cache_root() / "runs" / f"{task}-{name}-{digest}"

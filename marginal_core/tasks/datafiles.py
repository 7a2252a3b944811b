"""Reading the local dataset files every task accepts (checked paths, JSON lines or a JSON list)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from marginal_core.ground.errors import MarginalError


def dataset_file(path: str | Path) -> Path:
    """The path of a local dataset file, which must exist."""
    path = Path(path)
    if not path.is_file():
        raise MarginalError(f"no dataset file at {path}")
    return path


def read_json_records(path: Path) -> list[Any]:
    """The records of a .jsonl file (one JSON value per line) or of a .json file holding a list."""
    text = path.read_text(encoding="utf-8")
    try:
        if text.lstrip().startswith("["):
            return json.loads(text)
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError as err:
        raise MarginalError(f"{path} is not valid JSON lines: {err}") from err

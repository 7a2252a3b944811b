"""The one writer of markdown tables (reports, benches): a header, its rule and rows of one width.

The rule is derived from the cells, so a header and its separator can never disagree: a column
whose every filled cell is a number (``-1.25``, ``3.1%``, ``2.40x``, ``12 s``; ``-`` for none)
is right-aligned, every other column left-aligned.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

_NUMBER = re.compile(r"^[-+]?(\d[\d,]*(\.\d*)?|\.\d+)(e[-+]?\d+)?( ?(x|%|s))?$", re.IGNORECASE)
_EMPTY = {"", "-"}


def _cell(value: Any) -> str:
    """A cell's text on one line (a pipe would end the cell early)."""
    return " ".join(str(value).split()).replace("|", "\\|")


def _numeric(cells: Sequence[str]) -> bool:
    filled = [c for c in cells if c not in _EMPTY]
    return bool(filled) and all(_NUMBER.match(c) for c in filled)


def table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """A markdown table's lines; a row of another width than the header raises ValueError."""
    head = [_cell(h) for h in header]
    body = [[_cell(v) for v in row] for row in rows]
    for row in body:
        if len(row) != len(head):
            raise ValueError(f"a markdown row has {len(row)} cells, its header {len(head)}: {row}")
    rule = ["---:" if _numeric([row[i] for row in body]) else "---" for i in range(len(head))]
    return ["| " + " | ".join(head) + " |", "|" + "|".join(rule) + "|", *("| " + " | ".join(r) + " |" for r in body)]

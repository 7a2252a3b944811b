"""Dataframes whose long text cells wrap onto more lines instead of being cut at the column's
edge (Streamlit wraps cell text only in rows taller than 4rem, so the row height is chosen from
the longest text)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import streamlit as st

if TYPE_CHECKING:
    import pandas as pd
    from streamlit.delta_generator import DeltaGenerator

# Pixels a character of the dataframe's font takes on average, a wrapped line, and a row's padding.
CHAR_PX = 7
LINE_PX = 19
PAD_PX = 12
WRAP_FROM_PX = 65  # Streamlit wraps text only in rows taller than 4rem (64 px)
MAX_LINES = 12  # beyond, a cell shows this many lines (double-click it to read it whole)


def row_height(texts: Iterable[str], width_px: int, max_lines: int = MAX_LINES) -> int | None:
    """A row height that shows the longest of texts whole in a column width_px wide (up to
    max_lines lines); None when every text fits on one line."""
    longest = max((len(t) for t in texts), default=0)
    lines = min(max_lines, math.ceil(longest * CHAR_PX / width_px))
    if lines <= 1:
        return None
    return max(WRAP_FROM_PX, PAD_PX + LINE_PX * lines)


def wrapped_dataframe(
    frame: pd.DataFrame,
    widths: Mapping[str, int],
    *,
    column_config: Mapping[str, Any] | None = None,
    column_order: Sequence[str] | None = None,
    height: int | str = "auto",
    where: DeltaGenerator | None = None,
) -> None:
    """st.dataframe whose text columns (widths: name -> pixels, stretched with the other columns
    to the table's width) wrap, in rows tall enough to show their longest cell whole."""
    config = dict(column_config or {})
    heights = []
    for name, width in widths.items():
        if name in frame.columns:
            config.setdefault(name, st.column_config.TextColumn(name, width=width))
            heights.append(row_height(frame[name].astype(str), width))
    tallest = max((h for h in heights if h), default=None)
    (where or st).dataframe(frame, hide_index=True, height=height, column_config=config,
                            column_order=column_order, row_height=tallest)

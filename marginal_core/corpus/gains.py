"""A scan's gains: per row, log marginal − log p(canonical) in nats (>= 0 for a bound) and the share
off the canonical, 1 − exp(−gain); per text, the best bound found; a text cut for a report's table.
Shared by one model's report (scan_report.py) and the comparison of two (scan_compare.py)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

TOP = 20  # texts listed in a report.md (the exports hold them all)
TEXT_WIDTH = 60  # characters of a text shown in a report.md


def gains(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows with their gain (nats) and share off the canonical."""
    gain = (rows["log_marginal"] - rows["log_p_canonical"]).clip(lower=0.0)
    return rows.assign(gain_nats=gain, share_off_canonical=-np.expm1(-gain))


def best_rows(rows: pd.DataFrame, per: Sequence[str] = ("item",)) -> pd.DataFrame:
    """Per text (and whatever else ``per`` names), the row of the method with the highest log
    marginal (the best bound found); largest gain first."""
    ranked = gains(rows).sort_values(["log_marginal"], ascending=False, kind="stable")
    return ranked.drop_duplicates(list(per)).sort_values("gain_nats", ascending=False, kind="stable")


def short_text(text: str) -> str:
    """A text on one line, cut to TEXT_WIDTH characters for a report.md table."""
    flat = " ".join(text.split()) if text.strip() else repr(text)
    return flat if len(flat) <= TEXT_WIDTH else flat[: TEXT_WIDTH - 1] + "…"

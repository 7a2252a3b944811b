"""The few most probable tokenizations with their share of the mass: which tokenizations carry
the marginal (Home and Probability mass)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd
import streamlit as st

from marginal_core import viz
from pages._app.ui import projector, wrapped_tables

if TYPE_CHECKING:
    from marginal_core import Estimate, Lattice

TOKENIZATION_PX = 520  # one line for a sentence of about 70 characters on a laptop


def top_table(lat: Lattice, est: Estimate, n: int = 5) -> None:
    """A table of the n most probable tokenizations found, with log p and share of the found mass in %."""
    from marginal_core.viz import analysis  # scipy: imported when a page shows an estimate

    top = analysis.top_tokenizations(lat, est, n)
    frame = pd.DataFrame({
        "tokenization": [viz.segmented(lat, p) + (" (canonical)" if c else "") for p, c in zip(top["ids"], top["canonical"])],
        "tokens": [len(p) for p in top["ids"]],
        "log p": [viz.format_log(x) for x in top["log_p"]],
        "share": [viz.format_small(s, 2, percent=True) for s in top["share"]],
    })
    config = {"tokens": st.column_config.NumberColumn("tokens", width=60),
              "log p": st.column_config.TextColumn("log p", width=80),
              "share": st.column_config.TextColumn("share", width=80, help="Share of the mass found")}
    if projector.on():
        st.table(frame, hide_index=True)  # HTML, in the projector's larger text
    else:
        wrapped_tables.wrapped_dataframe(frame, {"tokenization": TOKENIZATION_PX}, column_config=config)

"""Projector mode (URL ``?projector=true``, or the sidebar's switch): for a class at 1280×720
and 150% zoom, each page shows its figure first, its settings folded below it, lattice drawings
at their natural size (arc labels 17 px high) in a box that scrolls instead of shrinking,
and small tables in larger text."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

if TYPE_CHECKING:
    from streamlit.delta_generator import DeltaGenerator

KEY = "projector"
# Streamlit's own spacing shrunk so the figure fits the first screen (480 CSS pixels high at 150%
# zoom); drawings at natural size in a scrolling box; small tables (st.table, which the pages use
# in projector mode: Streamlit's grid draws on a canvas that CSS cannot enlarge) in larger text.
STYLE = """<style>
[data-testid="stMainBlockContainer"] { padding-top: 3.2rem; }
[data-testid="stMainBlockContainer"] h1 { font-size: 1.6rem; padding: 0 0 0.4rem 0; }
[data-testid="stGraphVizChart"] { overflow: auto; max-height: 80vh; }
[data-testid="stGraphVizChart"] svg { max-width: none !important; width: auto !important; height: auto !important; }
[data-testid="stTable"] { font-size: 1.2rem; }
[data-testid="stMetricValue"] { font-size: 2.2rem; }
</style>"""


def requested() -> bool:
    """Whether the link asks for projector mode (before the sidebar's switch exists: app.py
    folds the sidebar then)."""
    return st.query_params.get(KEY, "").lower() == "true"


def switch(where: DeltaGenerator) -> None:
    """The sidebar's Projector mode switch (URL key projector), and the page's style when on."""
    where.toggle("Projector mode", value=False, key=KEY, bind="query-params",
                 help="For a class: the figure first, settings folded below it, drawings at a readable size "
                 "that scroll rather than shrink, larger tables. A link keeps it (projector=true).")
    if on():
        st.html(STYLE)


def on() -> bool:
    """Whether projector mode is on in this run."""
    return bool(st.session_state.get(KEY))


def about(text: str, **markdown: object) -> None:
    """A page's introduction: as it is, or folded under the title in projector mode."""
    if on():
        with st.expander("What this page shows", expanded=False):
            st.markdown(text, **markdown)
    else:
        st.markdown(text, **markdown)


def settings() -> DeltaGenerator:
    """Where a page's settings go: in place, or folded in projector mode (their widgets work
    while folded)."""
    return st.expander("Settings", expanded=False, icon=":material/tune:") if on() else st.container()


def figure_first() -> tuple[DeltaGenerator, DeltaGenerator]:
    """(figure, settings) containers: settings above the figure, or in projector mode the figure
    first and the settings folded below it."""
    if on():
        figure = st.container()
        return figure, settings()
    above = settings()
    return st.container(), above

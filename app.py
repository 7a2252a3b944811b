"""The Streamlit app: `streamlit run app.py` (or `make app`).

This file is the router. It draws the inputs every view shares (model, device, text, context)
in the sidebar, bound to the URL so that a link reproduces a view, and runs the chosen page from
pages/. Each page shows its own errors as friendly messages, never a traceback.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

st.set_page_config(page_title="marginal: tokenization marginals", page_icon=":material/join:", layout="wide")

from pages import _common as C  # noqa: E402 -- after set_page_config

HERE = Path(__file__).resolve().parent
VIEWS = [
    st.Page("pages/home.py", title="Home", icon=":material/home:", default=True),
    st.Page("pages/lattice.py", title="Lattice", icon=":material/account_tree:"),
    st.Page("pages/samplers.py", title="Samplers", icon=":material/casino:"),
    st.Page("pages/mass.py", title="Probability mass", icon=":material/balance:"),
    st.Page("pages/rank.py", title="Rank correlation", icon=":material/scatter_plot:"),
    st.Page("pages/running.py", title="Running estimates", icon=":material/timeline:"),
]
TASKS = [
    st.Page(path, title=title, icon=icon)
    for path, title, icon in [
        ("pages/8_QA.py", "Multiple-choice Q&A", ":material/quiz:"),
        ("pages/9_Translation.py", "Translation", ":material/translate:"),
    ]
    if (HERE / path).is_file()
]

page = st.navigation({"Views": VIEWS, "Downstream tasks": TASKS} if TASKS else VIEWS)
with C.routed(C.sidebar_inputs()):
    page.run()

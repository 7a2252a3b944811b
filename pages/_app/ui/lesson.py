"""The lesson's order through the pages: each page ends with a link to the next one (app.py
draws it after the page), which keeps the text, the model and every other setting (they live in
the session). A page that ends with st.stop() (an error, a refused input) has no link: after a
stop Streamlit draws nothing more, so pages end their normal flows with return."""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

# (URL path, title, what the page shows), in the lesson's order.
ORDER: tuple[tuple[str, str, str], ...] = (
    ("home", "Home", "the text's tokenizations and its marginal"),
    ("lattice", "Lattice", "every tokenization as a path, and where the mass flows"),
    ("surprisal", "Surprisal", "where in the text the model is surprised, by canonical and by marginal"),
    ("next", "What comes next", "the next characters after the text, over every tokenization and by the canonical"),
    ("mass", "Probability mass", "which tokenizations hold the mass"),
    ("samplers", "Samplers", "what each estimator draws"),
    ("running", "Running estimates", "how the estimates converge"),
    ("compare", "Compare models", "one text under two models, where each puts its mass"),
    ("rank", "Rank correlation", "how well the proxy's proposal orders tokenizations"),
    ("qa", "Multiple-choice Q&A", "does the marginal change the answers"),
    ("translation", "Translation", "does it change which translation wins"),
)


def next_link(url_path: str, pages: Mapping[str, st.Page]) -> None:
    """A link to the page after url_path in the lesson (back to Home after the last), one of the
    router's pages (by URL path); nothing for a page outside the lesson. Home, the default page,
    has the URL path ''."""
    paths = [path for path, _, _ in ORDER]
    url_path = url_path or "home"
    if url_path not in paths:
        return
    path, title, what = ORDER[(paths.index(url_path) + 1) % len(ORDER)]
    st.divider()
    label = f"Next in the lesson: {title} — {what}" if path != "home" else "Back to the start: Home"
    st.page_link(pages[path], label=label,
                 icon=":material/arrow_forward:")

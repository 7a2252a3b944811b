"""The app's fonts in every script: the style every run injects, so that Streamlit's own text
(sentences, captions, labels, tables, the text box) names a font with the glyphs of CJK,
Devanagari, Arabic, Hebrew, Thai and emoji after its own (marginal_core.viz.style's stacks,
defined once there; the chips and strips carry them inline)."""

from __future__ import annotations

import streamlit as st

from marginal_core.viz.style import CODE_FONTS, TEXT_FONTS

# Streamlit sets its font on the app and again on paragraphs, captions and headings (a class each):
# ":is(...)" under .stApp outranks those classes. Icons (Material Symbols on their own spans) and the
# chips' inline styles keep theirs.
STYLE = (
    "<style>"
    ".stApp, .stApp :is(p, li, td, th, h1, h2, h3, h4, h5, h6, label, textarea, input, "
    f"[data-testid='stCaptionContainer'], [data-testid='stMarkdownContainer']) {{ font-family: {TEXT_FONTS}; }}"
    f".stApp :is(code, pre, kbd) {{ font-family: {CODE_FONTS}; }}"
    "</style>"
)


def inject() -> None:
    """The style, once per script run (an element of no height)."""
    st.html(STYLE)

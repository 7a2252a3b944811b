"""Exact counts as the app shows them: abbreviated in a metric (viz.count_label), and the whole
number, as the CLI prints it, to copy or download."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from marginal_core.viz import count_label

if TYPE_CHECKING:
    from streamlit.delta_generator import DeltaGenerator

# Below this a count is shown with every digit (count_label), so it needs no expander.
ABBREVIATED_FROM = 10**9


def exact_count(what: str, count: int, key: str, where: DeltaGenerator | None = None) -> None:
    """An expander with every digit of a count too long for a metric: a code block (its copy
    button copies the number) and a download of it as a text file. Nothing for short counts."""
    if count < ABBREVIATED_FROM:
        return
    digits = str(count)
    box = (where or st).expander(f"The exact {what}: {count_label(count)} ({len(digits):,} digits)",
                                 icon=":material/tag:")
    box.code(digits, language=None, wrap_lines=True, height="content" if len(digits) < 2_000 else 300)
    box.download_button(f"Download the {len(digits):,} digits", digits, file_name=f"{key}.txt", mime="text/plain",
                        key=f"dl_{key}", icon=":material/download:")

"""The app's live progress bar (pages/_app/runtime/live.py's Bar), driven headless: a run in rounds (the
anytime beam's) is counted in rounds, its walk's steps moving the bar within one, with the
width and the certified gap said (issue 44, item 4; the CLI's bars are tests/library/test_progress.py)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _rounds_script() -> None:
    from pages._app.runtime import live

    bar = live.Bar("Beam", "steps")
    bar.drawn = 0.0  # redraw at once
    bar(3, 12)  # no round heard yet: steps of total
    first = bar.message
    bar.on_round(1, 4, 64, 0.003)  # the second round starts, after a first that left 0.003 nats
    bar.drawn = 0.0
    bar(6, 12)
    import streamlit as st

    st.caption(first)


def test_the_beams_bar_counts_rounds_and_says_the_width_and_gap():
    at = AppTest.from_function(_rounds_script).run()
    assert not at.exception
    assert at.caption[0].value.startswith("Beam: 3 of 12 steps scored in ")
    (bar,) = at.get("progress")
    assert bar.proto.value == 37  # (1 round + 6/12 of the second) of 4
    assert bar.proto.text.startswith("Beam: round 2 of 4 (width 64, gap 0.003 nats), step 6 of 12 in ")

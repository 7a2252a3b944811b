"""The Surprisal page (issue 42), driven headless with streamlit.testing.v1.AppTest: the strip and
the bars for a short text under SmolLM2, the region unit and space rule from the URL, a second
model's row, friendly messages for bad input, and its place after Lattice in the lesson. A
finished search is shared per inputs (whatever the unit), so only the first test walks SmolLM2."""

from __future__ import annotations

import re

import pytest

from bench.support.apptest import app
from pages._app.ui import lesson
from tests.app_support import SMOL, assert_clean, click, plotly

pytestmark = pytest.mark.models

TEXT = " Paris is nice."
LINK = dict(model=SMOL, text=TEXT, context="", dtype="float32")


def strip(at) -> str:
    """The strip's HTML (the one html element holding it)."""
    (found,) = [e.proto.body for e in at.get("html") if "surprisal-strip" in e.proto.body]
    return found


def regions(at) -> int:
    return strip(at).count("class='region'")


def test_run_draws_the_strip_the_bars_and_the_totals():
    from marginal_core.estimators.marginalizer import Marginalizer
    from marginal_core.models import load_model

    at = app("pages/views/surprisal.py", **LINK)
    assert_clean(at)
    assert at.segmented_control(key="unit").value == "word" and at.segmented_control(key="space").value == "trailing"
    (empty,) = plotly(at)  # the axes before Run
    assert not empty.data
    click(at, "run")
    assert_clean(at)
    expected = Marginalizer(load_model(SMOL, dtype="float32"), TEXT, None).surprisal()
    assert regions(at) == len(expected.regions) == 3
    html = strip(at)
    assert html.count("title='naive canonical · smollm2-135m") == 3 and html.count("title='smollm2-135m") == 3
    assert html.count("title='canonical prefix · smollm2-135m") == 3 and "whitespace convention" in html
    assert "href='lattice?" in html and "first=3&amp;span=2" in html  # nice. -> ␣nice and .
    first = expected.expected_bytes(0, 5)[0]  # " Paris ": what SmolLM2 expected at its first byte
    assert f"next character expected: {first.label} {first.probability:.3f}" in html
    assert f"came at rank {expected.regions[0].rank}" in html
    (bars,) = plotly(at)
    canonical, prefix, marginal = bars.data
    assert list(canonical.y) == pytest.approx([r.surprisal_canonical for r in expected.regions], abs=1e-6)
    assert list(prefix.y) == pytest.approx([r.surprisal_canonical_prefix for r in expected.regions], abs=1e-6)
    assert list(marginal.y) == pytest.approx([r.surprisal for r in expected.regions], abs=1e-6)
    assert marginal.error_y.visible
    shown = {m.label: m.value for m in at.metric}
    assert float(shown["Σ marginal row"]) == pytest.approx(expected.total, abs=1e-3)
    assert float(shown["log p(text)"]) == pytest.approx(expected.log_p_text, abs=1e-3)
    assert any("counts only the tokenizations that end exactly" in c.value for c in at.caption)
    assert any("Done:" in s.value for s in at.success)
    # the search's two measures of progress, and why it ended (every word within the tolerance)
    (said,) = [c.value for c in at.caption if c.value.startswith(f"{SMOL}: values ")]
    assert re.fullmatch(rf"{SMOL}: values settled at \d+\.\d s; certified: 3 of 3 words within 0\.01 nats; "
                        r"ended after \d+\.\d s: every interval within the tolerance", said), said


def test_the_unit_and_the_space_rule_come_from_the_url():
    at = app("pages/views/surprisal.py", **LINK, unit="char", space="leading")
    assert_clean(at)
    assert at.segmented_control(key="unit").value == "char" and at.segmented_control(key="space").value == "leading"
    click(at, "run")  # the search of the first test, recut by character
    assert_clean(at)
    assert regions(at) == len(TEXT)
    at = app("pages/views/surprisal.py", **LINK, unit="word", space="leading")
    click(at, "run")
    assert re.findall(r"title='smollm2-135m · bytes (\d+)–(\d+)", strip(at)) == [("0", "6"), ("6", "9"), ("9", "15")]


def test_a_second_model_adds_its_row_on_the_same_regions():
    at = app("pages/views/surprisal.py", **LINK, model_b="gemma3-270m")
    assert_clean(at)
    click(at, "run")
    assert_clean(at)
    html = strip(at)
    assert regions(at) == 3 and html.count("title='gemma3-270m") == 3 and html.count("title='smollm2-135m") == 3
    (bars,) = plotly(at)
    assert [t.name for t in bars.data] == ["naive canonical (smollm2-135m)", "canonical prefix (smollm2-135m)",
                                           "marginal (smollm2-135m)", "marginal (gemma3-270m)"]


def test_colour_by_rank_from_the_url():
    """colour=rank: the marginal chips take GLTR's bin colours by the rank of each region's first
    character, with their key under the strip."""
    from marginal_core.viz.surprisal import RANK_COLOURS

    at = app("pages/views/surprisal.py", **LINK, colour="rank")
    click(at, "run")
    assert_clean(at)
    assert at.segmented_control(key="colour").value == "rank"
    html = strip(at)
    assert "by the rank of the region's first character" in html and "top 10" in html
    assert sum(html.count(f"background:{c}' title='smollm2-135m") for c in RANK_COLOURS) == 3


@pytest.mark.parametrize(("params", "said"), [
    (dict(text="   "), "empty or only whitespace"),
    (dict(text=" ".join(["The committee postponed its decision until the next meeting."] * 3), method="exact"),
     "prefixes to score, over the budget"),
])
def test_bad_input_gives_one_message_and_no_traceback(params, said):
    at = app("pages/views/surprisal.py", **{**LINK, **params})
    if any(b.key == "run" for b in at.button):
        click(at, "run")
    assert not at.exception
    assert any(said in e.value for e in at.error), [e.value for e in at.error]


def test_surprisal_comes_after_lattice_in_the_navigation_and_the_lesson():
    paths = [path for path, _, _ in lesson.ORDER]
    assert paths.index("surprisal") == paths.index("lattice") + 1
    at = app("pages/views/lattice.py", model=SMOL, text=TEXT, context="")
    assert any("Next in the lesson: Surprisal" in link.label for link in at.get("page_link"))
    at = app("pages/views/surprisal.py", **LINK)
    assert any("Next in the lesson: What comes next" in link.label for link in at.get("page_link"))


def test_stop_keeps_the_rounds_scored_and_says_so(monkeypatch):
    """A newer run of the session (a Stop click) ends the search; the next view shows the strip of
    its first round, with intervals, and says it was stopped (the session keeps one stopped search)."""
    import streamlit as st

    from marginal_core.search.surprisal import stream as surprisal_run

    stream = surprisal_run.surprisal_stream

    def first_round_then_stop(*args, **kwargs):
        for s in stream(*args, **kwargs):
            yield s
            st.session_state["_run_token"].set()  # as a Stop click would: ends the search at its next check

    monkeypatch.setattr(surprisal_run, "surprisal_stream", first_round_then_stop)
    text = " The committee postponed its decision."  # walked by no other test: nothing cached
    at = app("pages/views/surprisal.py", **{**LINK, "text": text})
    click(at, "run")
    at.run()
    assert_clean(at)
    assert any(w.value.startswith("Stopped: the search kept") for w in at.warning)
    assert regions(at) == 5 and "in [" in strip(at)


def test_texts_in_other_scripts_draw_their_strip(monkeypatch):
    """Issue 65: a Chinese text, one word region as written (no spaces), gets a note and a button
    that cuts it by characters: one region a character, no error. An Arabic text's strip runs
    right to left (its names column and legend left to right) and its bars from the right."""
    text = "我们今天去北京大学"
    at = app("pages/views/surprisal.py", **{**LINK, "text": text})
    assert_clean(at)
    assert any("without spaces between words" in i.value for i in at.info)
    click(at, "by_char")
    assert at.segmented_control(key="unit").value == "char"
    assert not any("without spaces between words" in i.value for i in at.info)
    click(at, "run")
    assert_clean(at)
    assert regions(at) == len(text) and "dir='ltr'" in strip(at)
    at = app("pages/views/surprisal.py", **{**LINK, "text": "مرحبا بالعالم"})
    assert not any("without spaces between words" in i.value for i in at.info)
    click(at, "run")
    assert_clean(at)
    html = strip(at)
    assert regions(at) == 2 and html.startswith("<div class='surprisal-strip' dir='rtl'")
    assert html.count("<span dir='auto'") == 2 * 3  # each region's three chips, each in its own direction
    (bars,) = plotly(at)
    assert bars.layout.xaxis.autorange == "reversed"

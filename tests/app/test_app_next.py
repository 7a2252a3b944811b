"""The What comes next page (issue 58), driven headless with streamlit.testing.v1.AppTest: a prompt
with a trailing space from a link, the boundary marked on its chips, the three views' bars against
the library, the continuations, a second model's marginal on the same axis, and its place after
Surprisal in the lesson."""

from __future__ import annotations

import re

import pytest

from bench.support.apptest import app
from pages._app.ui import lesson
from tests.app_support import SMOL, assert_clean, click, plotly, values

pytestmark = pytest.mark.models

PROMPT = "The capital of France is "
LINK = dict(model=SMOL, text=PROMPT, context="", dtype="float32", chars="4", k="5")


def test_run_draws_the_three_views_and_the_continuations():
    from marginal_core import next_characters
    from marginal_core.models import load_model

    at = app("pages/views/next.py", **LINK)
    assert_clean(at)
    assert at.text_area(key="text").value == PROMPT  # the link's trailing space is kept
    chips = [e.proto.body for e in at.get("html") if "3px solid #d62728" in e.proto.body]
    assert len(chips) == 1 and "the boundary" in chips[0]
    (empty,) = plotly(at)
    assert not empty.data
    click(at, "run")
    assert_clean(at)
    expected = next_characters(PROMPT, load_model(SMOL, dtype="float32"), k=5)
    (bars,) = plotly(at)
    marginal, canonical, healed = bars.data
    assert list(marginal.x) == [r.shown for r in expected.rows]
    assert values(marginal.y) == pytest.approx([r.probability for r in expected.rows], abs=1e-3)
    assert values(canonical.y) == pytest.approx([r.canonical for r in expected.rows], abs=1e-6)
    assert values(healed.y) == pytest.approx([r.healed for r in expected.rows], abs=1e-6)
    assert marginal.error_y.visible
    assert any("most likely “P”" in m.value for m in at.markdown)
    (more,) = [e.proto.body for e in at.get("html") if ">marginal</th>" in e.proto.body]
    assert ">canonical</th>" in more and ">healed</th>" in more and "title='" in more


def test_a_second_model_adds_its_marginal_on_the_same_axis():
    at = app("pages/views/next.py", **{**LINK, "chars": "0"}, model_b="gemma3-270m")
    click(at, "run")
    assert_clean(at)
    (bars,) = plotly(at)
    names = [t.name for t in bars.data]
    assert names[:2] == [f"marginal ({SMOL})", "marginal (gemma3-270m)"] and len(names) == 4


def test_an_empty_text_asks_for_the_first_character():
    at = app("pages/views/next.py", **{**LINK, "text": "", "chars": "0"})
    assert_clean(at)
    assert any("first character" in c.value for c in at.caption)
    click(at, "run")
    assert_clean(at)
    (bars,) = plotly(at)
    assert len(bars.data) == 3 and values(bars.data[0].y) == pytest.approx(values(bars.data[1].y), abs=1e-9)


def test_the_page_follows_surprisal_in_the_lesson():
    paths = [path for path, _, _ in lesson.ORDER]
    assert paths.index("next") == paths.index("surprisal") + 1
    at = app("pages/views/next.py", **LINK)
    assert any("Next in the lesson: Probability mass" in link.label for link in at.get("page_link"))


def test_a_step_that_fails_keeps_what_the_steps_before_found_with_the_reason(monkeypatch):
    """Issue 65: a search that fails after its first round (as "中华人民共和" did, KeyError: 8) ends
    with that round's characters drawn (sentence and bars agree), the error beside them and no
    traceback; the status says it ended; a later run of the page still draws them with the reason,
    as a stopped run's (nothing was shared as finished)."""
    from marginal_core.search.prefix import Prefix

    stream = Prefix.next_characters_stream

    def first_round_then_fail(self, *args, **kwargs):
        steps = stream(self, *args, **kwargs)
        yield next(steps)
        steps.close()
        raise KeyError(8)

    monkeypatch.setattr(Prefix, "next_characters_stream", first_round_then_fail)
    at = app("pages/views/next.py", **{**LINK, "chars": "0", "k": "3"})  # walked by no other test: nothing cached
    click(at, "run")
    (ended,) = [w.value for w in at.warning]
    assert ended.startswith(f"Ended: {SMOL}") and "failed" in ended
    for run in range(2):  # the run that failed, then a later run of the page
        assert not at.exception
        (error,) = [e.value for e in at.error]
        assert "KeyError: 8" in error and f"what the search under {SMOL} had found before (1 round," in error
        (bars,) = plotly(at)
        top = bars.data[0].x[0]
        assert len(bars.data) == 3 and values(bars.data[0].y)[0] > 0.5, bars.data[0]
        assert any(f"most likely “{top}”" in m.value for m in at.markdown)
        if run == 0:
            at.run()
    assert any(w.value.startswith(f"Stopped: {SMOL}: the search failed") for w in at.warning)


def test_candidates_are_scored_beside_lm_evals_score():
    """Issue 67: the Candidates box, one a line (a leading space kept, shown as ␣): after the next
    characters, each candidate's probability over every tokenization of the prompt and it joined,
    with its interval, beside lm-eval's score and both ranks."""
    from marginal_core import score_continuations
    from marginal_core.models import load_model

    prompt = "The capital of France is"
    at = app("pages/views/next.py", **{**LINK, "text": prompt, "chars": "0", "k": "3", "candidates": " Paris\n Rome"})
    assert at.text_area(key="candidates").value == " Paris\n Rome"
    click(at, "run")
    assert_clean(at)
    (table,) = [e.proto.body for e in at.get("html") if "lm-eval rank" in e.proto.body]
    assert "␣Paris" in table and "␣Rome" in table and "marginal [certified]" in table
    expected = score_continuations(prompt, [" Paris", " Rome"], load_model(SMOL, dtype="float32"), time_budget="auto")
    drawn = [float(v) for v in re.findall(r"<td>([0-9.e+-]+) <small>\[", table)]
    assert drawn == pytest.approx([r.probability for r in expected.rows], rel=1e-2)

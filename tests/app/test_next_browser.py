"""Issue 58 in a real browser (`streamlit run app.py`, Playwright on Debian's Chromium): the What
comes next page keeps a typed trailing space, draws the three views, the boundary and the
continuations, and adds a second model's marginal."""

from __future__ import annotations

import pytest

from bench.support.browser import (
    CHROMIUM,
    HAVE_CHROMIUM,
    OUTPUT,
    browser_page,
    no_traceback,
    settle,
    streamlit_server,
    type_prompt,
)

SMOL = "smollm2-135m"
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not HAVE_CHROMIUM, reason=f"{CHROMIUM} is missing (`make setup` installs chromium)")]


def test_what_comes_next_keeps_a_typed_trailing_space_and_draws_the_three_views():
    """Issue 58: a prompt typed with a trailing space keeps it (in the box, the link and after a
    reload); Run draws the three views' bars, the boundary chip and the continuations; a second
    model adds its marginal to the same bars."""
    prompt = "The capital of France is "
    with streamlit_server() as server, browser_page(1400, 1600) as page:
        page.goto(f"{server.url}/next?model={SMOL}&dtype=float32&chars=4&k=5")
        box = type_prompt(page, prompt)
        assert box.input_value() == prompt and "text=The+capital+of+France+is+&" in page.url + "&", page.url
        page.reload()  # the link keeps the trailing space
        page.locator("span[title*='the boundary']").wait_for()
        settle(page)
        assert page.get_by_label("Text", exact=True).input_value() == prompt
        assert page.locator("span[title*='the boundary']").inner_text().startswith("␣")
        page.locator(".st-key-run button").first.click()
        page.get_by_text("Done:").wait_for()
        settle(page)
        no_traceback(page)
        legend = page.locator(".js-plotly-plot .legendtext").evaluate_all("ts => ts.map(t => t.textContent)")
        assert legend == [f"marginal ({SMOL})", f"canonical ({SMOL})", f"healed ({SMOL})"], legend
        assert page.locator(".js-plotly-plot .bars path").count() >= 10
        assert page.get_by_text("most likely “P”").count() == 1
        continuation = page.locator("th", has_text="marginal").locator("xpath=..").inner_text()
        assert "P" in continuation, continuation
        page.screenshot(path=str(OUTPUT / "next.png"))
        page.goto(page.url + "&model_b=gemma3-270m")
        page.locator(".st-key-run button").first.click()
        page.get_by_text("Done:").wait_for()
        settle(page)
        no_traceback(page)
        legend = page.locator(".js-plotly-plot .legendtext").evaluate_all("ts => ts.map(t => t.textContent)")
        assert f"marginal ({SMOL})" in legend and "marginal (gemma3-270m)" in legend, legend


def test_two_candidates_typed_in_are_scored_beside_lm_evals_score():
    """Issue 67: two candidates typed into the Candidates box (one a line, the leading space of
    “␣Angeles.” kept) are scored after a prompt that stops inside a word: the table shows both,
    each by the marginal with its interval and by lm-eval's score, and marks the rank that differs
    (lm-eval's split drops the “don” that crosses the seam)."""
    with streamlit_server() as server, browser_page(1400, 1600) as page:
        page.goto(f"{server.url}/next?model={SMOL}&dtype=float32&chars=0&k=3")
        type_prompt(page, "The capital of England is Lon")
        box = page.get_by_label("Candidates (one per line)", exact=True)
        box.fill("don, of course.\n Angeles.")
        box.press("Control+Enter")
        settle(page)
        page.locator(".st-key-run button").first.click()
        page.get_by_text("Done:").wait_for()
        settle(page)
        no_traceback(page)
        table = page.locator("table", has_text="lm-eval rank").inner_text()
        assert "don,␣of␣course." in table and "␣Angeles." in table and "≠" in table, table
        assert page.get_by_text("lm-eval's score puts “␣Angeles.” first").count() == 1

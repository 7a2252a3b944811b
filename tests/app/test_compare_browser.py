"""The Compare page in a real browser (Chromium under Playwright, the app's own server): both
canonical tokenizations as chips on one byte axis, both models' numbers after Run, a Stop during
the second model's beam keeping the first model's figures, and no error anywhere."""

from __future__ import annotations

import time
from urllib.parse import quote

import pytest

from bench.support.browser import (
    CHROMIUM,
    HAVE_CHROMIUM,
    OUTPUT,
    browser_page,
    no_traceback,
    run_button,
    settle,
    streamlit_server,
)
from tests.conftest import GEMMA, SMOL

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not HAVE_CHROMIUM, reason=f"{CHROMIUM} is missing (`make setup` installs it)")]
TEXT = "Heavy rain flooded the valley road."


def chips(page, model: str) -> list[tuple[int, int, str]]:
    """A model's chips as (first grid column, end column, text), left to right."""
    row = page.locator(f'div.chip[title^="{model}, token"]')
    spans = row.evaluate_all("cs => cs.map(c => [getComputedStyle(c).gridColumnStart, getComputedStyle(c).gridColumnEnd,"
                             " c.innerText])")
    return [(int(a), int(b), t) for a, b, t in spans]


def test_compare_shows_both_models_lines_up_their_tokens_and_stop_keeps_what_finished():
    OUTPUT.mkdir(parents=True, exist_ok=True)
    url = f"/compare?model={SMOL}&model_b={GEMMA}&text={quote(TEXT)}&context=&dtype=float32"
    with streamlit_server() as server, browser_page(1400, 2200) as page:
        run = run_button(page, server.url + url)
        no_traceback(page)
        for model in (SMOL, GEMMA):  # each row covers every byte of the text once, in order
            row = chips(page, model)
            assert row[0][0] == chips(page, SMOL)[0][0] and row[-1][1] - row[0][0] == len(TEXT.encode())
            assert all(a[1] == b[0] for a, b in zip(row, row[1:]))
            assert "".join(t for *_, t in row).replace("␣", " ") == TEXT
        assert page.locator("div.cut").count() >= 1  # the tokenizers cut differently somewhere

        run.click()  # stopped while the second model's beam runs: the first model's figures stay
        page.get_by_text(f"{GEMMA}: beam").first.wait_for()
        page.locator(".st-key-stop button").first.click()
        page.get_by_text(f"Stopped: {GEMMA} kept what it finished").wait_for()
        settle(page)
        no_traceback(page)
        assert page.get_by_test_id("stMetric").filter(has_text="log p(text)").count() >= 1
        page.screenshot(path=str(OUTPUT / "compare-stopped.png"))

        started = time.monotonic()
        page.locator(".st-key-run button").first.click()  # Run again: the first model's beam is kept
        page.get_by_text("Done:").wait_for()
        print(f"second run (first model cached) done {time.monotonic() - started:.1f} s after Run", flush=True)
        settle(page)
        no_traceback(page)
        assert page.locator('[data-testid="stAlertContentError"]').count() == 0
        assert page.get_by_test_id("stMetric").filter(has_text="log p(canonical)").count() == 2
        assert page.get_by_test_id("stMetric").filter(has_text="log p(text)").count() == 2
        assert page.get_by_text("Where each model puts its mass").count() == 1
        page.screenshot(path=str(OUTPUT / "compare.png"))

"""Issue 60, point 4: Stop frees the machine within 2 s on a long text, in a real browser.

The measure is how soon after the click the server's CPU goes idle (bench/stop.py gives the
figure on a 60,000-character text; this test takes half of it, stopped earlier, to stay cheap).
"""

from __future__ import annotations

import re
import time

import pytest

from bench.support.browser import CHROMIUM, HAVE_CHROMIUM, browser_page, idle_after, no_traceback, settle, streamlit_server

GEMMA = "gemma3-270m"  # its context window takes the 30,000-character text; SmolLM2's does not
SENTENCE = "The committee postponed its decision until the next meeting, citing new evidence. "
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not HAVE_CHROMIUM, reason=f"{CHROMIUM} is missing (`make setup` installs chromium)")]


def test_stop_on_a_long_text_frees_the_server():
    """Issue 60, point 4: Running estimates on a 30,000-character text (Gemma 3, lattice k = 1,000),
    stopped a second after Run: the server goes idle (under a quarter of a core over half a second)
    within seconds of the click, and the page says what the run kept. Drawing the sample set once
    converted every off-by-one path to Python tuples in one step (seconds, and gigabytes, that grew
    with the text's length times k; the server stayed busy 20 s and more); it now comes in blocks
    with a stop check between two. A scoring pass under way when Stop lands ends first: the checks
    are between passes, and one pass of this text holds both cores for over a second. The suite's
    other worker shares the cores, so the bound here is 4 s; the issue's 2 s is bench/stop.py's
    figure on a quiet machine (60,000 characters)."""
    text = (SENTENCE * (30_000 // len(SENTENCE) + 1))[:30_000]
    with streamlit_server() as server, browser_page() as page:
        page.goto(f"{server.url}/running?model={GEMMA}&k=1000&methods=lattice&exact=false&context=")
        box = page.get_by_label("Text", exact=True)
        box.wait_for()
        box.fill(text)  # typed: past what a link holds
        box.press("Control+Enter")
        page.get_by_text("Press Run to start scoring").wait_for(timeout=120_000)  # the lattice and the model ready
        settle(page)
        page.locator(".st-key-run button").first.click()
        page.wait_for_timeout(1_000)
        page.locator(".st-key-stop button").first.click()
        clicked = time.monotonic()
        idle = idle_after(server.pid, timeout=60.0)
        # the page is as before Run, or, where a chunk finished before Stop, says what the run kept
        page.get_by_text(re.compile("Press Run to start scoring|Stopped")).first.wait_for(timeout=60_000)
        print(f"the server idle {idle:.1f} s after Stop; the page ready again {time.monotonic() - clicked:.1f} s "
              "after the click", flush=True)
        no_traceback(page)
        assert idle <= 4.0, idle

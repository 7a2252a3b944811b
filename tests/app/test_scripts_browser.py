"""Issue 65 in a real browser (`streamlit run app.py`, Playwright on Debian's Chromium): the app in
other scripts. A Chinese-script prompt typed on What comes next names its top character, and no
character of its chips, text box, sentence, bars or continuations is drawn as an empty box; the
Surprisal strip draws CJK, Devanagari and emoji the same way; an Arabic prompt's chips run right to
left, in reading order. The empty-box check fails where the set-up installed no such fonts (with
only DejaVu it finds 日, 本, の, 首, 都, 🍣, ...): `make setup` installs fonts-noto-cjk, fonts-noto-core
and fonts-noto-color-emoji."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from bench.support.browser import (
    CHROMIUM,
    HAVE_CHROMIUM,
    OUTPUT,
    browser_page,
    missing_glyphs,
    no_traceback,
    settle,
    streamlit_server,
    type_prompt,
)

GEMMA = "gemma3-270m"
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not HAVE_CHROMIUM, reason=f"{CHROMIUM} is missing (`make setup` installs chromium)")]
# What the next page shows that holds the prompt's and the model's characters: the chips, the text
# box, the sentence, the bars' labels and the continuations.
NEXT_TEXT = ("span[title^='token'], textarea, [data-testid='stMarkdownContainer'] p, .js-plotly-plot .xtick text, "
             "td")


def test_a_japanese_prompt_names_its_next_character_and_every_script_draws_its_glyphs():
    """"日本の首" under Gemma 3 (the lesson's example): typed into the box, Run names 都 in the
    sentence and on the bars, and no character on the page is an empty box; then the Surprisal
    strip of CJK, emoji and Devanagari, and an Arabic prompt's chips in reading order."""
    prompt = "日本の首"
    with streamlit_server() as server, browser_page(1400, 1600) as page:
        page.goto(f"{server.url}/next?model={GEMMA}&dtype=float32&chars=2&k=5")
        type_prompt(page, prompt)
        page.locator(".st-key-run button").first.click()
        page.get_by_text("Done:").wait_for()
        settle(page)
        no_traceback(page)
        assert page.get_by_text("most likely “都”").count() == 1
        ticks = page.locator(".js-plotly-plot .xtick text").evaluate_all("ts => ts.map(t => t.textContent)")
        assert ticks[:1] == ["都"], ticks
        seen, boxes = missing_glyphs(page, NEXT_TEXT)
        page.screenshot(path=str(OUTPUT / "next-japanese.png"))
        assert {"日", "本", "の", "首", "都"} <= set(seen), seen
        assert not boxes, f"drawn as empty boxes (no font has them): {boxes}"

        text = "東京の寿司🍣は दिल्ली"
        page.goto(f"{server.url}/surprisal?model={GEMMA}&dtype=float32&unit=char&text={quote(text)}&context=")
        page.locator(".st-key-run button").first.wait_for()
        settle(page)
        page.locator(".st-key-run button").first.click()
        page.get_by_text("Done:").wait_for()
        settle(page)
        no_traceback(page)
        strip = page.locator(".surprisal-strip .region")
        assert strip.count() == len(text)
        seen, boxes = missing_glyphs(page, ".surprisal-strip .region span, .js-plotly-plot .xtick text")
        page.screenshot(path=str(OUTPUT / "surprisal-scripts.png"))
        assert {"東", "寿", "🍣", "ल"} <= set("".join(seen)), seen
        assert not boxes, f"drawn as empty boxes (no font has them): {boxes}"

        arabic = "مرحبا بالعالم"
        page.goto(f"{server.url}/next?model={GEMMA}&text={quote(arabic)}&context=")
        chips = page.locator("span[title^='token']")
        chips.last.wait_for()
        settle(page)
        lefts = chips.evaluate_all("cs => cs.map(c => c.getBoundingClientRect().left)")
        assert len(lefts) >= 2 and lefts == sorted(lefts, reverse=True), lefts  # the first token on the right
        assert not missing_glyphs(page, "span[title^='token']")[1]
        page.screenshot(path=str(OUTPUT / "next-arabic-chips.png"))

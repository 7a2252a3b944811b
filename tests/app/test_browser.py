"""End to end in a real browser: `streamlit run app.py`, driven with Playwright on Chromium.

The test starts the app on a free port of 127.0.0.1, types a text, and waits for its
tokenization, its lattice drawing and a plot; screenshots go to test-output/browser/ (Streamlit
scrolls inside its own container, so the viewport is tall instead of a full-page shot). It uses
Debian's Chromium (/usr/bin/chromium) and is skipped only when that is missing (`make setup`
installs it).

The machinery (server, Chromium, waiting for a page to settle) is bench/support/browser.py, shared
with the benches. The same machinery makes the README screenshots:

    .venv/bin/python -m tests.app.test_browser --screenshots docs/screenshots [--only compare]
"""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import quote

import pytest

from bench.support.browser import (
    CHROMIUM,
    HAVE_CHROMIUM,
    OUTPUT,
    ROOT,
    browser_page,
    chromium,
    new_page,
    no_traceback,
    rss_gib,
    run_button,
    settle,
    streamlit_server,
    wait_until_idle,
)
from marginal_core.viz.surprisal import RANK_COLOURS

SMOL = "smollm2-135m"
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not HAVE_CHROMIUM, reason=f"{CHROMIUM} is missing (`make setup` installs chromium)")]


def test_type_a_text_and_see_its_lattice_and_plots():
    OUTPUT.mkdir(parents=True, exist_ok=True)
    text = " Tokenization is fun."
    with streamlit_server() as server, browser_page() as page:
        base = server.url
        page.goto(f"{base}/?model={SMOL}")
        box = page.get_by_label("Text", exact=True)
        box.wait_for()
        box.fill(text)
        box.press("Control+Enter")
        # The home page shows the new text's canonical tokenization as chips, then its score.
        page.locator("span[title^='token 1:']").first.wait_for()
        page.get_by_text("log p(canonical)").wait_for()
        settle(page)
        chips = page.locator("span[title^='token ']").all_inner_texts()
        assert "".join(c.splitlines()[0] for c in chips).replace("␣", " ") == text
        no_traceback(page)
        page.screenshot(path=str(OUTPUT / "home.png"))

        # The lattice page draws it (the sidebar text survives the page switch).
        page.get_by_test_id("stSidebarNavItems").get_by_role("link", name="Lattice").click()
        svg = page.locator("[data-testid=stGraphVizChart] svg")
        svg.wait_for()
        settle(page)
        assert page.get_by_label("Text", exact=True).input_value() == text
        drawn = svg.text_content()
        assert "capital" not in drawn and "ization" in drawn  # the typed text, not the default
        assert svg.locator("g.edge").count() > 10
        no_traceback(page)
        page.screenshot(path=str(OUTPUT / "lattice.png"))

        # The samplers page plots the lengths of the samples (no model needed for that).
        page.get_by_test_id("stSidebarNavItems").get_by_role("link", name="Samplers").click()
        page.locator("[data-testid=stPlotlyChart] .main-svg").first.wait_for()
        settle(page)
        no_traceback(page)
        page.screenshot(path=str(OUTPUT / "samplers.png"))

        # A shared link opens a page with its settings: a small L greys arcs out.
        page.goto(f"{base}/lattice?model={SMOL}&text={quote(text)}&L=5")
        page.locator("[data-testid=stGraphVizChart] svg").wait_for()
        settle(page)
        assert page.locator("[data-testid=stGraphVizChart] svg g.edge.greyed, "
                            "[data-testid=stGraphVizChart] svg g.edge path[stroke-dasharray]").count() > 0
        no_traceback(page)
        page.screenshot(path=str(OUTPUT / "lattice-L5.png"))

        # Running estimates grow live and stop on request, keeping what was scored.
        run_button(page, f"{base}/running?model={SMOL}&text={quote(text)}&k=600&y=non-canonical+mass").click()
        page.get_by_text("samples scored").first.wait_for()
        page.locator("[data-testid=stPlotlyChart] .scatterlayer .trace").first.wait_for()  # an estimate plotted
        page.locator(".st-key-stop button").first.click()
        stopped = page.get_by_text("Stopped:")
        stopped.wait_for()
        assert "of 600 samples" in stopped.inner_text()
        settle(page)
        no_traceback(page)
        page.screenshot(path=str(OUTPUT / "running-stopped.png"))
        # The stopped computation ends (at its next forward pass), not at the end of its chunk.
        print(f"server idle {wait_until_idle(server.pid):.1f} s after the stop was shown", flush=True)


def test_the_first_request_of_a_fresh_server_may_be_a_subpage():
    """A shared link is often the first request a server gets: it renders that page, with the
    app's navigation and inputs (test_server_starts.py starts a server each way and opens links
    first, as a class does; app.py says why a fresh server could say "Page not found")."""
    OUTPUT.mkdir(parents=True, exist_ok=True)
    text = " Tokenization is fun."
    with streamlit_server() as server, browser_page() as page:
        base = server.url
        page.goto(f"{base}/lattice?model={SMOL}&text={quote(text)}&L=5")
        svg = page.locator("[data-testid=stGraphVizChart] svg")
        svg.wait_for()
        settle(page)
        assert page.locator("h1").first.inner_text() == "The tokenization lattice"
        assert page.get_by_label("Text", exact=True).input_value() == text
        assert "ization" in svg.text_content()
        nav = page.get_by_test_id("stSidebarNavItems")
        assert nav.get_by_role("link", name="Running estimates").count() == 1
        assert nav.get_by_role("link", name="Multiple-choice Q&A").count() == 1
        body = page.locator("body").inner_text()
        assert "Page not found" not in body
        no_traceback(page)
        page.screenshot(path=str(OUTPUT / "first-request-lattice.png"))
        # The next interaction stays in the app's navigation.
        nav.get_by_role("link", name="Samplers").click()
        page.get_by_text("What each sampler draws").wait_for()
        settle(page)
        assert page.get_by_label("Text", exact=True).input_value() == text
        no_traceback(page)


def test_a_text_with_control_characters_draws_its_whole_lattice():
    """Issue 13 item 1: a bell and a tab in the text once cut the browser's drawing short (SVG is
    XML, which forbids the bell) or made `dot` fail; now every node of the window is drawn, the
    bell shown as \\x07, and no exception box appears."""
    from marginal_core import viz
    from marginal_core.lattice.graph import lattice_of
    from marginal_core.models import load_tokenizer

    OUTPUT.mkdir(parents=True, exist_ok=True)
    text = "bell\x07 and tab\there"
    lat = lattice_of(text, load_tokenizer(SMOL))
    window = viz.token_window(lat, 0, viz.fit_window(lat, max_nodes=viz.READABLE_NODES))  # the page's default
    with streamlit_server() as server, browser_page() as page:
        page.goto(f"{server.url}/lattice?model={SMOL}&text=bell%07%20and%20tab%09here")
        svg = page.locator("[data-testid=stGraphVizChart] svg")
        svg.wait_for()
        settle(page)
        no_traceback(page)
        assert page.locator('[data-testid="stAlertContentError"]').count() == 0
        assert svg.locator("g.node").count() == viz.window_nodes(lat, window)
        assert svg.locator("g.edge").count() > 0
        assert "\\x07" in svg.text_content()
        page.screenshot(path=str(OUTPUT / "lattice-control-characters.png"))


def test_a_100000_character_text_is_refused_before_scoring_and_the_server_stays_bounded():
    """Issue 13 item 0: a text past the model's context window (about 16,000 canonical tokens of
    SmolLM2's 8,192) is refused at Run with the counts, before any scoring; after Stop the server
    goes idle and its memory stops growing (it once grew to 21 GB until the OOM killer ended it)."""
    OUTPUT.mkdir(parents=True, exist_ok=True)
    sentence = "The committee postponed its decision until the next meeting. "
    text = (sentence * (100_000 // len(sentence) + 1))[:100_000]
    with streamlit_server() as server, browser_page() as page:
        page.goto(f"{server.url}/running?model={SMOL}&k=5&methods=lattice")
        box = page.get_by_label("Text", exact=True)
        box.wait_for()
        settle(page)
        before = rss_gib(server.pid)
        box.fill(text)  # typed, not in the URL: a 100,000-character URL passes the server's limit
        box.press("Control+Enter")
        run = page.locator(".st-key-run button").first
        page.get_by_text("Press Run to start scoring").wait_for()
        settle(page)
        started = time.monotonic()
        run.click()
        refused = page.get_by_text("Too long for the model")
        refused.wait_for()
        message = refused.inner_text()
        assert "context window of 8,192 tokens" in message and "canonical tokenization has" in message, message
        print(f"refused {time.monotonic() - started:.1f} s after Run", flush=True)
        page.locator(".st-key-stop button").first.click()
        settle(page)
        no_traceback(page)
        assert "Stopped:" not in page.locator("body").inner_text()  # refused, not a stopped run
        page.screenshot(path=str(OUTPUT / "running-too-long.png"))
        print(f"server idle {wait_until_idle(server.pid):.1f} s after Stop", flush=True)
        after = rss_gib(server.pid)
        time.sleep(5)
        settled = rss_gib(server.pid)
        print(f"server memory {before:.2f} GiB before the text, {after:.2f} after Stop, {settled:.2f} 5 s later", flush=True)
        assert settled <= after + 0.1 and settled - before < 6, (before, after, settled)


def test_another_session_renders_its_home_page_while_a_run_is_going():
    """Issue 10: while one session's running-estimates run computes, the server stays
    responsive: another session (another browser context) gets its home page, canonical score
    included, before that run ends."""
    text = quote("The committee postponed its decision until the next meeting.")
    with streamlit_server() as server, chromium() as browser:
        page = new_page(browser)
        run_button(page, f"{server.url}/running?model={SMOL}&text={text}&k=5000&methods=lattice&y=non-canonical+mass").click()
        page.locator("[data-testid=stPlotlyChart] .scatterlayer .trace").first.wait_for()  # its first estimate
        other = new_page(browser)
        started = time.monotonic()
        other.goto(f"{server.url}/?model={SMOL}")
        other.locator("span[title^='token 1:']").first.wait_for()
        other.get_by_text("log p(canonical)").first.wait_for()
        print(f"another session's home page in {time.monotonic() - started:.1f} s during a run", flush=True)
        no_traceback(other)
        assert page.get_by_text("Done:").count() == 0 and "samples scored" in page.locator("body").inner_text()
        page.locator(".st-key-stop button").first.click()
        page.get_by_text("Stopped:").wait_for()
        no_traceback(page)


def test_four_sessions_at_once_take_turns_and_all_finish_within_a_memory_bound():
    """Issue 20: four sessions press Run within a second; their runs take turns on the server
    (one of them is told where it waits), all four finish without an error, and the server's
    memory stays within 1.5 GiB of what it held before the clicks."""
    import threading

    sentences = [" The old lighthouse keeper climbed the stairs.", " A small bakery sells bread before sunrise.",
                 " Children were playing football after school.", " The museum opened a new exhibition."]
    with streamlit_server() as server, chromium() as browser:
        pages, buttons = [], []
        for sentence in sentences:
            page = new_page(browser, 1200, 900)
            buttons.append(run_button(page, f"{server.url}/running?model={SMOL}&text={quote(sentence)}&context="
                                            f"&k=60&methods=lattice&exact=false"))
            pages.append(page)
        wait_until_idle(server.pid)
        before, peak, running = rss_gib(server.pid), [0.0], threading.Event()

        def sample() -> None:
            while not running.is_set():
                peak[0] = max(peak[0], rss_gib(server.pid))
                time.sleep(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        for button in buttons:
            button.click()
        told: set[int] = set()
        deadline = time.monotonic() + 600
        while not all(page.get_by_text("Done:").count() for page in pages):
            assert time.monotonic() < deadline, "not every session finished"
            told |= {i for i, page in enumerate(pages) if page.get_by_text("ahead of yours").count()}
            pages[0].wait_for_timeout(100)
        for page in pages:
            no_traceback(page)
            assert not page.locator('[data-testid="stAlertContentError"]').count()
        running.set()
        sampler.join()
        print(f"server memory {before:.2f} -> peak {peak[0]:.2f} GiB; told where they waited: {sorted(told)}", flush=True)
        assert told
        assert peak[0] - before <= 1.5


TRUNCATED_JS = """els => els.filter(e => [e, ...e.querySelectorAll('*')].some(x => x.scrollWidth > x.clientWidth + 1))
                     .map(e => e.innerText)"""


def test_long_counts_are_not_cut_and_the_whole_lattice_scrolls_at_full_size():
    """Issue 13 items 5d and 5e: the lattice page's counts read "3.62 × 10…", and the whole
    lattice was scaled to the page's width with 4-pixel labels; now the counts have room and the
    drawing keeps its natural size in a box that scrolls."""
    OUTPUT.mkdir(parents=True, exist_ok=True)
    sentence = "The committee postponed its decision until the next meeting. "
    text = quote((sentence * 50)[:3000])
    with streamlit_server() as server, browser_page(width=1280) as page:
        for path in ("lattice", "home"):
            page.goto(f"{server.url}/{path}?model={SMOL}&text={text}")
            page.get_by_text("Tokenizations", exact=True).first.wait_for()
            page.wait_for_timeout(1500)
            values = page.locator('[data-testid="stMetricValue"]')
            assert "× 10^" in " ".join(values.all_inner_texts())
            assert values.evaluate_all(TRUNCATED_JS) == [], path
        short = quote(" The committee postponed its decision.")
        page.goto(f"{server.url}/lattice?model={SMOL}&whole=true&text={short}")
        image = page.locator(".lattice-scroll img")
        image.wait_for()
        settle(page)
        no_traceback(page)
        natural, shown = image.evaluate("i => [i.naturalWidth, i.getBoundingClientRect().width]")
        box = page.locator(".lattice-scroll").evaluate("b => [b.scrollWidth, b.clientWidth]")
        assert shown == pytest.approx(natural, abs=1) and box[0] > box[1], (natural, shown, box)  # full size, scrolls
        page.screenshot(path=str(OUTPUT / "lattice-whole.png"))


def test_a_text_too_long_for_a_link_leaves_a_page_that_reloads():
    """Issue 13 item 5a: 15,000 CJK characters made a URL of about 135 KB, which the server
    answered with HTTP 400 on reload; now the text stays out of the URL and the page reloads."""
    text = ("漢字かな交じり文の例です。" * 2000)[:15_000]
    with streamlit_server() as server, browser_page() as page:
        page.goto(f"{server.url}/lattice?model={SMOL}")
        box = page.get_by_label("Text", exact=True)
        box.wait_for()
        settle(page)
        box.fill(text)
        box.press("Control+Enter")
        page.get_by_text("too long for a link").wait_for()
        settle(page)
        no_traceback(page)
        assert len(page.url) < 1000 and "text=" not in page.url, page.url[:300]
        assert page.reload().status == 200
        page.get_by_label("Text", exact=True).wait_for()
        settle(page)
        no_traceback(page)


def test_the_surprisal_strip_shows_and_a_region_opens_its_lattice_window():
    """Issue 42: Run on /surprisal draws the strip (a column of chips a region, its numbers on
    hover); a click on a region opens the Lattice page on that stretch of the text. Issue 50: the
    naive and canonical prefix rows above the marginal, a marginal chip's hover with the next
    characters the model expected and the rank of the one that came, and colouring by that rank."""
    text = " Paris is nice."
    with streamlit_server() as server, browser_page(1400, 1400) as page:
        run_button(page, f"{server.url}/surprisal?model={SMOL}&text={quote(text)}&context=&dtype=float32").click()
        regions = page.locator(".surprisal-strip .region")
        page.get_by_text("Done:").wait_for()
        settle(page)
        no_traceback(page)
        assert regions.count() == 3  # ␣Paris␣ | is␣ | nice.
        page.get_by_text("values settled at").wait_for()  # both measures of progress, once the search ends
        assert "certified: 3 of 3 words" in page.get_by_text("values settled at").inner_text()
        naive, prefix, marginal = (regions.nth(1).locator("span[title]").nth(i) for i in range(3))
        assert naive.get_attribute("title").startswith("naive canonical")
        assert prefix.get_attribute("title").startswith("canonical prefix")
        marginal.hover()  # what the model expected at "is": its next characters, the rank of "i", the entropy
        note = marginal.get_attribute("title")
        assert "marginal" in note and "next character expected:" in note and "i came at rank" in note
        assert "entropy" in note and "whitespace convention" in note
        page.screenshot(path=str(OUTPUT / "surprisal.png"))
        page.locator(".st-key-colour button").filter(has_text="rank").click()  # GLTR's colours by rank
        page.get_by_text("by the rank of the region's first character").wait_for()
        settle(page)
        no_traceback(page)
        shades = {regions.nth(i).locator("span[title]").nth(2).evaluate("e => e.style.background") for i in range(3)}
        gltr = {page.evaluate("c => { const e = document.createElement('span'); e.style.background = c; "
                              "return e.style.background; }", c) for c in RANK_COLOURS}
        assert shades <= gltr, (shades, gltr)
        assert "colour=rank" in page.url
        page.screenshot(path=str(OUTPUT / "surprisal_rank.png"))
        regions.nth(2).click()
        page.locator("h1").filter(has_text="The tokenization lattice").wait_for()
        assert "first=3" in page.url and "span=2" in page.url, page.url  # ␣nice and .
        settle(page)
        no_traceback(page)


# --------------------------------------------------------------------------------------------
# README screenshots


def _small_png(path: Path) -> None:
    """Quantize a screenshot to 256 colours (a fraction of the size, same look)."""
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as im:
        im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)


def make_screenshots(folder: Path, model: str | None = None, only: str | None = None) -> None:
    """One screenshot per page with the default text, buttons pressed, into folder (only: that page's alone)."""
    folder.mkdir(parents=True, exist_ok=True)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    query = f"model={model}" if model else ""
    shots = [  # (file, URL path, key of the button to press, text to wait for, viewport height)
        ("home", "", "estimate", "Which tokenizations carry the mass", 1550),
        ("lattice", "lattice", None, "Only arcs inside the window", 1000),
        ("samplers", "samplers", "score", "Proxy re-draws", 1250),
        ("mass", "mass", "compute", "Canonical share", 1150),
        ("rank", "rank", "draw", "Spearman ρ", 1000),
        ("running", "running?y=non-canonical+mass", "run", "Done:", 1000),
        ("surprisal", "surprisal", "run", "Done:", 1600),
        ("next", "next?text=The%20capital%20of%20France%20is%20&context=&chars=20", "run", "Done:", 1450),
        ("compare", "compare?text=%20Tokyo&context=", "run", "Done:", 2150),  # the "Two models disagree" example
    ]
    with streamlit_server() as server:
        base = server.url
        for name, path, key, ready, height in [shot for shot in shots if only in (None, shot[0])]:
            with browser_page(1400, height) as page:
                t0 = time.perf_counter()
                sep = "&" if "?" in path else "?"
                page.goto(f"{base}/{path}{sep + query if query else ''}")
                page.locator("h1").first.wait_for()
                settle(page)
                if key:
                    button = page.locator(f".st-key-{key} button")
                    page.locator(f".st-key-{key} button, :text('{ready}')").first.wait_for()
                    if button.count():  # absent when the result is already cached
                        button.first.click()
                page.get_by_text(ready).first.wait_for()
                settle(page, 1500)
                no_traceback(page)
                page.mouse.move(0, 0)  # no button's tooltip over the page
                page.wait_for_timeout(500)
                target = folder / f"{name}.png"
                page.screenshot(path=str(target))
                _small_png(target)
                print(f"{target}: {time.perf_counter() - t0:.1f} s", flush=True)
        if only is not None:
            return
        with chromium() as browser:  # the examples menu open, and projector mode at 1280x720 and 150% zoom
            page = new_page(browser, 1400, 900)
            page.goto(f"{base}/{'?' + query if query else ''}")
            page.locator(".st-key-example").wait_for()
            settle(page)
            page.locator(".st-key-example").click()
            page.get_by_role("option").first.wait_for()
            page.screenshot(path=str(folder / "examples.png"))
            _small_png(folder / "examples.png")
            projector = browser.new_context(viewport={"width": 853, "height": 480}, device_scale_factor=1.5).new_page()
            projector.set_default_timeout(300_000)
            projector.goto(f"{base}/lattice?projector=true{'&' + query if query else ''}")
            projector.locator("[data-testid=stGraphVizChart] svg").wait_for()
            settle(projector, 1500)
            projector.screenshot(path=str(folder / "projector.png"))
            _small_png(folder / "projector.png")
            print(f"{folder / 'examples.png'}, {folder / 'projector.png'}", flush=True)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Make the app's README screenshots.")
    parser.add_argument("--screenshots", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--model", default=None)
    parser.add_argument("--only", default=None, help="one page's screenshot (its file name without .png)")
    args = parser.parse_args()
    make_screenshots(args.screenshots, args.model, args.only)

"""Issue 24, a lesson in ten minutes, in a real browser (one server and one Chromium for the
module): every example loads on every page of the lesson, reached through the pages' own
next-page links; the default text shows at least 1% of its mass off the canonical on the default
model; projector mode at a projector's 1280×720 and 150% zoom puts the lattice drawing on the
first screen with arc labels at least 12 px high."""

from __future__ import annotations

import time
from urllib.parse import quote

import pytest

from bench.support.browser import CHROMIUM, HAVE_CHROMIUM, OUTPUT, chromium, new_page, no_traceback, settle, streamlit_server
from marginal_core.models import DEFAULT_MODEL
from pages._app.ui import lesson
from pages._app.ui.presets import PRESETS

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not HAVE_CHROMIUM, reason=f"{CHROMIUM} is missing (`make setup` installs it)")]
VIEWS = [title for path, title, _ in lesson.ORDER if path not in ("qa", "translation")]
# The walk through every example and view settles about 50 times: a shorter wait after each script
# run has ended (settle still waits for the run to start and to end).
QUICK_MS = 300


@pytest.fixture(scope="module")
def server():
    OUTPUT.mkdir(parents=True, exist_ok=True)
    with streamlit_server(preload=None) as running:  # as `make app` starts it: the default model warms
        yield running


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def clean(page) -> None:
    """No traceback and no error box on the page."""
    no_traceback(page)
    errors = page.locator('[data-testid="stAlertContentError"]')
    assert errors.count() == 0, errors.all_inner_texts()


def test_the_server_warms_the_default_model_while_it_starts(server):
    """`make app`'s server loads the model the sidebar opens on before any page asks for it."""
    deadline = time.monotonic() + 300
    while f"{DEFAULT_MODEL} loaded and warm in" not in server.log.read_text(encoding="utf-8", errors="replace"):
        assert time.monotonic() < deadline, server.log.read_text(encoding="utf-8", errors="replace")[-2000:]
        time.sleep(0.5)
    assert "could not preload" not in server.log.read_text(encoding="utf-8", errors="replace")


def test_every_example_loads_on_every_page_through_the_lesson_links(server, browser):
    """Each example, picked in the sidebar's menu, then every view in the lesson's order by its
    "Next in the lesson" link: the text and context stay, no page shows an error. The downstream
    pages, which do not read the text, once."""
    page = new_page(browser, 1400, 1200)  # room below the sidebar's Example menu for its fourteen options
    page.set_default_timeout(120_000)
    page.goto(server.url)
    settle(page, extra_ms=QUICK_MS)
    for preset in PRESETS:
        page.get_by_test_id("stSidebarNavItems").get_by_role("link", name="Home").click()
        settle(page, extra_ms=QUICK_MS)
        page.locator(".st-key-example").click()
        page.get_by_role("option", name=preset.name, exact=True).click()
        settle(page, extra_ms=QUICK_MS)
        assert page.get_by_label("Text", exact=True).input_value() == preset.text  # trailing whitespace kept
        assert page.get_by_text(preset.look_for[:40]).count() >= 1  # what to look for, in the sidebar and on Home
        if preset.opens == "next":  # a prompt: its own page, the boundary on its chips (the walk is the texts')
            assert page.locator("h1").first.inner_text() == "What comes next?"
            page.get_by_text("What to look for.").first.wait_for()
            if preset.candidates:  # the example fills the Candidates box
                assert page.get_by_label("Candidates (one per line)", exact=True).input_value() == "\n".join(preset.candidates)
            clean(page)
            continue
        if preset.opens:  # an example that opens its own page (Two models disagree: Compare), then the lesson
            assert page.locator("h1").first.inner_text() == "Two models, one text"
            assert page.locator("div.chip").count() >= 2  # both models' tokens, one byte axis
            clean(page)
            page.get_by_test_id("stSidebarNavItems").get_by_role("link", name="Home").click()
            settle(page, extra_ms=QUICK_MS)
        for title in VIEWS[1:]:
            link = page.get_by_role("link", name=f"Next in the lesson: {title}")
            link.wait_for()
            link.click()
            page.locator("h1").first.wait_for()
            settle(page, extra_ms=QUICK_MS)
            clean(page)
            assert page.get_by_label("Text", exact=True).input_value() == preset.text, (preset.name, title)
            assert page.get_by_label("Context (optional)", exact=True).input_value() == preset.context
        page.screenshot(path=str(OUTPUT / f"lesson-{PRESETS.index(preset)}.png"))
    for title in ("Multiple-choice Q&A", "Translation"):
        page.get_by_test_id("stSidebarNavItems").get_by_role("link", name=title).click()
        page.locator("h1").first.wait_for()
        settle(page, extra_ms=QUICK_MS)
        clean(page)
    assert page.get_by_role("link", name="Back to the start: Home").count() == 1


def test_the_default_text_shows_at_least_one_percent_off_the_canonical(server, browser):
    page = new_page(browser, 1400, 1200)
    page.goto(server.url)
    page.locator(".st-key-estimate button").first.wait_for()
    settle(page)
    page.locator(".st-key-estimate button").first.click()
    shown = page.get_by_test_id("stMetric").filter(has_text="Mass off the canonical")
    shown.wait_for()
    settle(page)
    clean(page)
    share = float(shown.get_by_test_id("stMetricValue").inner_text().rstrip("%"))
    print(f"default text: {share}% of the mass off the canonical", flush=True)
    assert share >= 1.0
    page.screenshot(path=str(OUTPUT / "home-default-estimate.png"))


@pytest.mark.parametrize("text", [PRESETS[0].text, " unbelievably"])
def test_projector_mode_puts_the_lattice_first_with_readable_labels(server, browser, text):
    """1280×720 at 150% zoom is a CSS viewport of 853×480 at 1.5 device pixels per pixel: the
    drawing starts on that first screen, and every arc label is at least 12 CSS pixels (18 device
    pixels) high; a drawing wider than the page scrolls instead of shrinking."""
    context = browser.new_context(viewport={"width": 853, "height": 480}, device_scale_factor=1.5)
    page = context.new_page()
    page.set_default_timeout(300_000)
    page.goto(f"{server.url}/lattice?projector=true&text={quote(text)}&context=")
    svg = page.locator("[data-testid=stGraphVizChart] svg")
    svg.wait_for()
    settle(page)
    clean(page)
    top = svg.evaluate("s => s.getBoundingClientRect().top")
    heights = svg.locator("g.edge text").evaluate_all("ts => ts.map(t => t.getBoundingClientRect().height)")
    print(f"{text[:20]!r}: drawing at y = {top:.0f} px; arc labels {min(heights):.1f} to {max(heights):.1f} px high",
          flush=True)
    assert top < 480 - 40, top  # on the first screen, with some of it in view
    assert heights and min(heights) >= 12, heights
    assert page.get_by_text("Settings").count() >= 1  # the controls, folded under the drawing
    page.screenshot(path=str(OUTPUT / f"projector-lattice-{len(text)}.png"))
    context.close()


def test_without_projector_mode_a_fitted_drawing_keeps_its_labels_at_12_px(server, browser):
    """Fitted to a 1280-pixel page, the labels of " unbelievably" were 8 px high (5 px at 150%
    zoom); the drawing now stops shrinking at 12 px and scrolls sideways."""
    page = new_page(browser, 1280, 720)
    page.goto(f"{server.url}/lattice?text={quote(' unbelievably')}&context=")
    svg = page.locator("[data-testid=stGraphVizChart] svg")
    svg.wait_for()
    settle(page)
    clean(page)
    heights = svg.locator("g.edge text").evaluate_all("ts => ts.map(t => t.getBoundingClientRect().height)")
    assert heights and min(heights) >= 12, heights


@pytest.mark.models
def test_projector_mode_folds_introduction_and_settings_and_shows_small_tables_larger():
    """Headless: with projector=true the page's introduction and settings are folded (their
    widgets still work: k from the link is used) and the running summary is an HTML table, which
    the projector's style sets in larger text."""
    from bench.support.apptest import app

    at = app("pages/views/running.py", model="smollm2-135m", text=" unbelievably", context="", dtype="float32", k="7",
             methods="lattice", exact="false", projector="true")  # results are shared: none other tests read
    assert not at.exception and not at.error
    assert at.toggle(key="projector").value is True
    assert {"What this page shows", "Settings"} <= {e.label for e in at.expander}
    at.button(key="run").click().run()
    assert not at.exception and not at.error
    (table,) = at.table
    assert table.value.loc[0, "samples"] == 7 and "log p(text)" in table.value.columns
    assert not at.dataframe  # the grid (a canvas CSS cannot enlarge) is not used for it

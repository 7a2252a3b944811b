"""Issue 51, point 5: every way of starting the server serves links, from its first request on.

A fresh server's first request is often a shared link (``/surprisal?text=...``): it must open that
page, with the link's settings, and no "Page not found" dialog over it (the dialog takes the clicks
until it is closed). A folder named pages/ beside app.py once put a fresh server in Streamlit's
legacy pages/ mode for its first runs, which opened that dialog under a plain ``streamlit run
app.py`` (app.py's docstring says what keeps it out now).

Each server is started once, fresh, the way its command starts it (the commands the Makefile's
targets run, without their setup and with no model warmed): ``make app``'s first request is a
Surprisal link, ``make serve-class``'s a Running estimates link, and ``streamlit run app.py``, as a
user or a hosted service types it (on every interface: class mode), gets twelve of both at once,
as a class opening its links does. Issue 60: each of the four ways (``streamlit run app.py`` with
and without an address too) says its mode once in its log, answers ``/home`` as its first request
and again warm with Home and no dialog, and offers the models its mode offers, with no server path
in a message in class mode. One Chromium serves all three, a context for each visitor (most of the wall time is
Chromium's, drawing twelve pages on two cores). Screenshots go to test-output/browser/, server
logs to test-output/.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from urllib.parse import quote, urlparse

import pytest

from bench.support.browser import (
    CHROMIUM,
    HAVE_CHROMIUM,
    OUTPUT,
    ROOT,
    chromium,
    free_port,
    no_traceback,
    served,
)
from pages._app.runtime.serve import PRELOAD_ENV
from pages._app.runtime.server import SERVE

SMOL = "smollm2-135m"
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not HAVE_CHROMIUM, reason=f"{CHROMIUM} is missing (`make setup` installs chromium)")]

STREAMLIT = Path(sys.executable).with_name("streamlit")  # the venv's `streamlit` command
# Each page's heading, and a setting its link gives that is not the page's default.
TITLES = {"surprisal": "Where in the text is the surprise?", "running": "Running estimates"}
QUERIES = {"surprisal": "unit=char", "running": "k=60&methods=lattice"}
WAIT_MS = 300_000  # a busy 2-core machine: twelve first runs and a model's load at once


def command(way: str, port: int) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of one way of starting the server (the Makefile's, for
    its targets), on a port of this machine."""
    env = dict(os.environ)
    env.setdefault("MARGINAL_CACHE", str(Path.home() / ".cache" / "marginal"))
    env.setdefault(PRELOAD_ENV, "none")  # make app's preload would warm a model no link here uses
    env.pop(SERVE, None)
    if way.startswith("streamlit run app.py"):  # with no address it listens on every interface
        run = [str(STREAMLIT)] if STREAMLIT.exists() else [sys.executable, "-m", "streamlit"]
        address = ["--server.address", "127.0.0.1"] if way.endswith("127.0.0.1") else []
        return [*run, "run", "app.py", "--server.headless", "true", *address, "--server.port", str(port)], env
    host = "127.0.0.1"
    if way == "make serve-class":
        env[SERVE], host = "class", "0.0.0.0"
    return [sys.executable, "-m", "pages._app.runtime.serve", "--server.headless", "true", "--server.address", host,
            "--server.port", str(port), "--browser.gatherUsageStats", "false"], env


@contextlib.contextmanager
def fresh_server(way: str, timeout: float = 180.0):
    """A server started `way` on a free port, answering its health check and nothing else yet."""
    port = free_port()
    with served(*command(way, port), port, timeout) as server:
        yield server


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def open_at_once(browser, base: str, links: list[tuple[str, str]]) -> list:
    """Each (page, text) link opened in a context of its own, one after the other without waiting
    for any page to draw: the server gets them as its first sessions, together."""
    pages = []
    for path, text in links:
        page = browser.new_context(viewport={"width": 1000, "height": 700}).new_page()
        page.set_default_timeout(WAIT_MS)
        page.goto(f"{base}/{path}?model={SMOL}&text={quote(text)}&context=&{QUERIES[path]}", wait_until="commit")
        pages.append(page)
    return pages


def assert_on_its_page(page, path: str, text: str) -> None:
    """The link's page, its settings applied, no dialog over it, and its Run button takes a click."""
    from playwright.sync_api import expect

    run = page.locator(".st-key-run button").first
    expect(run).to_be_enabled(timeout=WAIT_MS)  # drawn after the page's title and settings row
    assert page.get_by_text("Page not found").count() == 0 and page.get_by_role("dialog").count() == 0, path
    run.click(trial=True, timeout=60_000)  # nothing over it takes the click (a dialog would)
    assert urlparse(page.url).path == f"/{path}", page.url
    assert page.locator("h1").first.inner_text() == TITLES[path]
    expect(page.get_by_label("Text", exact=True)).to_have_value(text)  # a loaded server may draw it a moment later
    expect(page.get_by_role("combobox", name="Model", exact=True)).to_have_value(SMOL)
    if path == "surprisal":
        assert page.locator(".st-key-unit [role=radio][aria-checked=true]").inner_text() == "char"
    else:
        assert page.get_by_role("spinbutton", name="Samples k").input_value() == "60"
    no_traceback(page)


def close(pages: list) -> None:
    for page in pages:
        page.context.close()


@pytest.mark.parametrize(("way", "path"), [("make app", "surprisal"), ("make serve-class", "running")])
def test_a_fresh_server_opens_its_first_link_on_its_page(browser, way, path):
    """`make app` and `make serve-class` (class mode, on every interface): a fresh server's first
    request, a page's link, opens that page."""
    text = " The old lighthouse."
    started = time.monotonic()
    with fresh_server(way) as server:
        [page] = open_at_once(browser, server.url, [(path, text)])
        try:
            assert_on_its_page(page, path, text)
            page.screenshot(path=str(OUTPUT / f"first-link-{way.replace(' ', '-')}.png"))
        finally:
            close([page])
    print(f"{way}: /{path} ready {time.monotonic() - started:.1f} s after the start", flush=True)


def test_twelve_students_open_their_links_at_once_on_a_fresh_streamlit_run(browser):
    """`streamlit run app.py`, as a user or a hosted service starts it: a class of twelve opens
    its links (Surprisal and Running estimates, each student a text) as the server's first twelve
    requests, and every one reaches its page with an enabled Run button that takes a click."""
    links = [("surprisal" if i % 2 else "running", f" Student {i} reads a sentence.") for i in range(12)]
    started = time.monotonic()
    with fresh_server("streamlit run app.py") as server:
        pages = open_at_once(browser, server.url, links)
        try:
            for page, (path, text) in zip(pages, links, strict=True):
                assert_on_its_page(page, path, text)
            print(f"twelve pages ready {time.monotonic() - started:.1f} s after the start", flush=True)
            pages[1].screenshot(path=str(OUTPUT / "first-link-streamlit-run.png"))
        finally:
            close(pages)


# Issue 60: how each way of starting offers itself. Class mode wherever others can reach the server.
MODES = {"make app": "open", "make serve-class": "class", "streamlit run app.py": "class",
         "streamlit run app.py --server.address 127.0.0.1": "open"}
HOME_TITLE = "How likely is a text — over *all* its tokenizations?"
SECRET = "/srv/marginal-secret"  # a folder path a visitor types
PATHS = ("lattice", "surprisal", "mass", "samplers", "running", "compare", "rank", "qa", "translation", "results")


def visit(browser, url: str, heading: str | None = None, text: str | None = None):
    """A new visitor's page at url, once its heading (or a text) is drawn and the run has settled."""
    from bench.support.browser import settle

    page = browser.new_context(viewport={"width": 1000, "height": 700}).new_page()
    page.set_default_timeout(120_000)
    page.goto(url)
    if heading is not None:
        page.locator("h1").filter(has_text=heading.replace("*", "")).first.wait_for()
    else:
        page.get_by_text(text or "").first.wait_for()
    settle(page)
    return page


def no_dialog(page, path: str) -> None:
    assert page.get_by_text("Page not found").count() == 0 and page.get_by_role("dialog").count() == 0, path
    no_traceback(page)


@pytest.mark.parametrize("way", list(MODES))
def test_each_way_of_starting_says_its_mode_opens_home_and_offers_its_models(browser, way):
    """The mode is said once in the log; /home, the first request and again on the warm server, is
    Home with no dialog; a class server refuses a folder path, an unknown id and an over-long text,
    each in one line naming no server path, and loads nothing, where an open one tries the folder
    (and says where it looked: the operator's own machine)."""
    text = " The old lighthouse."
    long_text = ("The committee postponed its decision. " * 80)[:2_500]
    with fresh_server(way) as server:
        home = visit(browser, f"{server.url}/home?model={SMOL}&text={quote(text)}&context=", HOME_TITLE)
        no_dialog(home, "/home, first")
        said = [line for line in server.log.read_text().splitlines() if line.startswith("marginal app, ")]
        assert len(said) == 1 and said[0].startswith(f"marginal app, {MODES[way]} mode"), said
        refused = "This server offers only these models: gemma3-270m, smollm2-135m"
        folder = visit(browser, f"{server.url}/lattice?model={quote(SECRET)}&text={quote(text)}",
                       text=f"there is no folder {SECRET}" if MODES[way] == "open" else refused)
        body = folder.locator("[data-testid=stMain]").inner_text()
        if MODES[way] == "class":
            unknown = visit(browser, f"{server.url}/lattice?model=meta-llama/Llama-2-7b&text={quote(long_text)}",
                            text=refused)
            told = unknown.locator("[data-testid=stMain]").inner_text()
            assert "does not offer meta-llama/Llama-2-7b" in told.replace("`", ""), told
            assert "has 2,500 characters; this server takes up to 2,000" in told, told
            for shown in (body, told, unknown.locator("[data-testid=stSidebar]").inner_text()):
                assert str(ROOT) not in shown and str(Path.home()) not in shown, shown  # nor the cache's
            close([unknown])
        again = visit(browser, f"{server.url}/home", HOME_TITLE)
        no_dialog(again, "/home, warm")
        close([home, folder, again])
    print(f"{way}: {said[0][:60]}", flush=True)


def test_every_path_the_app_makes_opens_its_page_on_a_fresh_server(browser):
    """Every page's own path (those of the lesson's links and the results folders' rows among
    them), each the first request of its own visitor on a fresh `streamlit run app.py`."""
    titles = {"lattice": "The tokenization lattice", "surprisal": "Where in the text is the surprise?",
              "mass": "Where the probability mass sits", "samplers": "What each sampler draws",
              "running": "Running estimates", "compare": "Two models, one text",
              "rank": "Rank correlation between p and q", "qa": "Multiple-choice Q&A",
              "translation": "Translation reranking", "results": "Results folders"}
    with fresh_server("streamlit run app.py") as server:
        for path in PATHS:
            page = visit(browser, f"{server.url}/{path}?model={SMOL}&text={quote(' Paris.')}", titles[path])
            no_dialog(page, path)
            assert urlparse(page.url).path == f"/{path}", page.url
            close([page])


def test_the_first_visitors_on_an_empty_cache_watch_one_preparation(browser, tmp_path):
    """Issue 60, point 3: on an empty model cache (a hosted service's first start), the first two
    visitors of a fresh `streamlit run app.py` both see SmolLM2's preparation as a progress bar
    naming its steps, one preparation for both (the server converts once), then Home's log p."""
    env_cache = os.environ.get("MARGINAL_CACHE")
    os.environ["MARGINAL_CACHE"] = str(tmp_path / "cache")  # a cache of its own: the shared one stays warm
    try:
        started = time.monotonic()
        with fresh_server("streamlit run app.py") as server:
            pages, seen = [], [set(), set()]
            for _ in range(2):
                page = browser.new_context(viewport={"width": 1000, "height": 700}).new_page()
                page.goto(f"{server.url}/?model={SMOL}&text={quote(' Paris.')}&context=", wait_until="commit")
                pages.append(page)
            bar = "Preparing smollm2-135m for its first use"
            pages[0].get_by_text(bar).first.wait_for(timeout=120_000)
            shown = time.monotonic() - started
            pages[1].get_by_text(bar).first.wait_for(timeout=60_000)
            pages[1].screenshot(path=str(OUTPUT / "first-visit-preparing.png"))
            while pages[0].get_by_text(bar).count():
                for page, steps in zip(pages, seen, strict=True):
                    text = " ".join(page.get_by_text(bar).all_inner_texts())
                    steps.update(step for step in ("tokenizer", "lattice snapshot", "weights") if f": {step} (" in text)
                time.sleep(0.2)
            for page in pages:
                page.get_by_text("log p(canonical)").first.wait_for(timeout=WAIT_MS)
                no_traceback(page)
            ready = time.monotonic() - started
            pages[1].screenshot(path=str(OUTPUT / "first-visit-empty-cache.png"))
            close(pages)
            log = server.log.read_text()
        print(f"empty cache: the bar {shown:.1f} s after the start, log p {ready:.1f} s; steps seen {seen}", flush=True)
        assert "weights" in seen[0] and "weights" in seen[1], seen  # both watched the long step
        assert log.count("marginal: loaded smollm2-135m") == 1 and log.count("marginal: prepared smollm2-135m") == 1, log
        assert (tmp_path / "cache").is_dir()
    finally:
        if env_cache is None:
            os.environ.pop("MARGINAL_CACHE", None)
        else:
            os.environ["MARGINAL_CACHE"] = env_cache

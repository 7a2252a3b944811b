"""The classroom bench's browser sessions: Chromium at nice 19, a Running-estimates page each.

A monitor in each page clicks Run at a shared moment and times what the page shows; the bench
polls the pages until every session has ended, and reads the browsers' CPU seconds and niceness.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, urlencode

import psutil

from bench.support.browser import CHROMIUM, CHROMIUM_ARGS, new_page, settle

ROOT = Path(__file__).resolve().parents[2]

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

OUTPUT = ROOT / "test-output" / "bench-classroom"
SEED = 0  # the running-estimates page's default seed
POLL_S = 1.0  # how often the bench asks the pages whether their runs have ended
PLOT = "[data-testid=stPlotlyChart] .scatterlayer .trace"  # an estimate plotted (the empty axes have none)

# Installed in every page before the click: records, in seconds from the click, when the first
# estimate is plotted, when "Done:" shows, the first error, and the first queue message seen
# before Done; then clicks Run at the epoch millisecond `at` (the same for every session). It
# looks when the page changes (a MutationObserver), not on a timer: each look at a whole page's
# text costs a page at nice 19 what its drawing lacks, and a change is seen when it is made.
MONITOR_JS = """([at, plot]) => {
  const s = window.__classroom = {clicked: null, first: null, done: null, done_text: null, error: null,
                                  error_at: null, queue: null, queue_at: null};
  const since = () => Date.now() / 1000 - s.clicked;
  const phrases = ["ahead of yours", "in the queue"];
  const shown = el => ["SCRIPT", "STYLE", "NOSCRIPT"].includes(el.tagName) ? "" : (el.textContent ?? "").toLowerCase();
  const deepest = (phrase) => {  // the innermost element whose text holds the phrase
    let el = document.body;
    for (;;) {
      const child = [...el.children].find(c => shown(c).includes(phrase));
      if (!child) return el;
      el = child;
    }
  };
  const check = () => {
    if (s.first === null && document.querySelector(plot)) s.first = since();
    const done = [...document.querySelectorAll("[data-testid=stAlertContentSuccess]")]
      .find(e => e.textContent.includes("Done:"));
    if (done && s.done === null) { s.done = since(); s.done_text = done.textContent.trim(); }
    const error = document.querySelector("[data-testid=stException], [data-testid=stAlertContentError]");
    if (error && s.error === null) { s.error_at = since(); s.error = error.textContent.trim().slice(0, 300); }
    if (s.queue === null && !done) {
      const body = shown(document.body);
      const phrase = phrases.find(p => body.includes(p));
      if (phrase) { s.queue_at = since(); s.queue = deepest(phrase).innerText.trim().slice(0, 300); }
    }
    if (done || error) observer.disconnect();
  };
  const observer = new MutationObserver(check);
  setTimeout(() => {
    s.clicked = Date.now() / 1000;
    observer.observe(document.body, {childList: true, subtree: true, characterData: true});
    document.querySelector(".st-key-run button").click();
  }, Math.max(0, at - Date.now()));
}"""


@dataclass
class Session:
    """One browser session's run: times in seconds from its click (None: not seen)."""

    text: str
    clicked: float | None = None  # epoch seconds of the click
    first: float | None = None  # the first estimate plotted
    done: float | None = None  # "Done:" shown
    done_text: str | None = None
    error: str | None = None  # the first error or exception shown
    error_at: float | None = None
    queue: str | None = None  # the first queue message seen before Done
    queue_at: float | None = None

    @property
    def ended(self) -> float | None:
        """Seconds from the click to Done or to an error, whichever came."""
        return self.done if self.done is not None else self.error_at


@contextlib.contextmanager
def low_priority_chromium() -> Iterator[Browser]:
    """Debian's Chromium under Playwright, headless, started through a wrapper at nice 19. As
    root it also runs without CAP_SYS_NICE: Chromium would otherwise set its processes back to 0
    (-8 for its display threads)."""
    from playwright.sync_api import sync_playwright

    keep_low = "setpriv --bounding-set -sys_nice " if os.geteuid() == 0 else ""
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        wrapper = Path(tmp) / "chromium"
        wrapper.write_text(f'#!/bin/sh\nexec {keep_low}nice -n 19 {CHROMIUM} "$@"\n')
        wrapper.chmod(0o755)
        browser = p.chromium.launch(executable_path=str(wrapper), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def browser_cpu_seconds() -> float:
    """CPU seconds (user and system) used so far by the Chromium processes started by this one."""
    total = 0.0
    for proc in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            if proc.name().startswith("chrom"):
                times = proc.cpu_times()
                total += times.user + times.system
    return total


def browser_niceness() -> set[int]:
    """The niceness of the threads of the Chromium processes started by this one (through
    Playwright's driver)."""
    procs = [p for p in psutil.Process().children(recursive=True) if p.name().startswith("chrom")]
    return {os.getpriority(os.PRIO_PROCESS, t.id) for p in procs for t in p.threads()}


def running_url(base: str, args: argparse.Namespace, text: str) -> str:
    """Running estimates for text alone (no context): the lattice method, k samples, the default seed."""
    query = {"model": args.model, "dtype": args.dtype, "text": text, "context": "", "k": args.samples,
             "seed": SEED, "methods": "lattice", "exact": "false"}
    return f"{base}/running?{urlencode(query, quote_via=quote)}"


def open_sessions(browser: Browser, base: str, args: argparse.Namespace, texts: list[str]) -> list[Page]:
    """One context per text on Running estimates, each settled, with its text and no context."""
    pages = [new_page(browser, 1400, 1000) for _ in texts]
    for page, text in zip(pages, texts):
        page.goto(running_url(base, args, text))
    for page, text in zip(pages, texts):
        page.get_by_text("Press Run to start scoring").wait_for()
        settle(page)
        shown = (page.get_by_label("Text", exact=True).input_value(),
                 page.get_by_label("Context (optional)", exact=True).input_value())
        if shown != (text, ""):
            raise RuntimeError(f"the page shows text and context {shown!r}, not {(text, '')!r}")
    return pages


def click_all(pages: list[Page]) -> None:
    """Install the monitor in every page and have each click Run at the same moment (the
    scheduling takes a round trip per page, so the moment is set that far ahead)."""
    at = (time.time() + 1.0 + 0.1 * len(pages)) * 1000
    for page in pages:
        page.evaluate(MONITOR_JS, [at, PLOT])


def wait_for_ends(pages: list[Page], sessions: list[Session], timeout: float) -> None:
    """Poll the pages' records into sessions until every session has ended (Done or an error)
    or timeout seconds have passed."""
    deadline = time.monotonic() + timeout
    pending = dict(enumerate(pages))
    while pending and time.monotonic() < deadline:
        time.sleep(POLL_S)
        for i, page in list(pending.items()):
            sessions[i] = replace(sessions[i], **page.evaluate("() => window.__classroom"))
            if sessions[i].ended is not None:
                del pending[i]


def screenshot_ends(pages: list[Page]) -> list[str]:
    """Screenshots of the first and the last session; their paths."""
    paths = []
    for i in sorted({0, len(pages) - 1}):
        paths.append(str(OUTPUT / f"n{len(pages)}-session{i + 1}.png"))
        pages[i].screenshot(path=paths[-1])
    return paths

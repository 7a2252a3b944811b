"""The app in a real browser: its server (`python -m pages._app.runtime.serve`, as `make app` starts it)
on a free local port, and Debian's Chromium (/usr/bin/chromium) under Playwright, headless.

Shared by the browser tests (tests/app/test_browser.py, test_lesson.py, test_compare_browser.py) and
the benches that drive the app (bench/app.py, classroom.py, compare.py, compare_render.py,
stop.py). Logs and screenshots go to test-output/browser/.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import NamedTuple

from pages._app.runtime.serve import PRELOAD_ENV

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
HAVE_CHROMIUM = Path(CHROMIUM).exists()
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic", "--disable-dev-shm-usage",
]
OUTPUT = ROOT / "test-output" / "browser"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server(NamedTuple):
    """A running `streamlit run app.py`: its base URL, process id and log file."""

    url: str
    pid: int
    log: Path


def cpu_seconds(pid: int) -> float:
    """CPU time a process has used so far (user and system, all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_after(pid: int, window: float = 0.5, busy: float = 0.25, timeout: float = 120.0) -> float:
    """Seconds until the process uses less than `busy` of a core over a sliding `window` (sampled
    every 0.1 s; counted from the call)."""
    started, samples = time.monotonic(), [(time.monotonic(), cpu_seconds(pid))]
    while time.monotonic() - started < timeout:
        time.sleep(0.1)
        samples.append((time.monotonic(), cpu_seconds(pid)))
        old = next((s for s in reversed(samples) if s[0] <= samples[-1][0] - window), None)
        if old is not None and samples[-1][1] - old[1] < busy * (samples[-1][0] - old[0]):
            return old[0] - started
    raise AssertionError(f"the server was still busy {timeout:.0f} s after Stop")


def rss_gib(pid: int) -> float:
    """Resident memory of a process, in GiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 2**20
    raise AssertionError(f"no VmRSS for process {pid}")


def wait_until_idle(pid: int, timeout: float = 120.0, window: float = 2.0, busy: float = 0.25) -> float:
    """Seconds until a process uses less than `busy` of a core over `window` seconds."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        before = cpu_seconds(pid)
        time.sleep(window)
        if cpu_seconds(pid) - before < busy * window:
            return time.monotonic() - started
    raise AssertionError(f"the server was still computing {timeout:.0f} s later")


@contextlib.contextmanager
def streamlit_server(timeout: float = 120.0, preload: str | None = "none"):
    """The app's server (`python -m pages._app.runtime.serve`, as `make app` starts it) on a free local
    port; yields the Server, stops it afterwards. preload: $MARGINAL_PRELOAD where the environment
    sets none (tests warm no model they may not use; None: the server's default, as users get)."""
    port = free_port()
    env = dict(os.environ)
    env.setdefault("MARGINAL_CACHE", str(Path.home() / ".cache" / "marginal"))
    if preload is not None:
        env.setdefault(PRELOAD_ENV, preload)
    argv = [sys.executable, "-m", "pages._app.runtime.serve", "--server.port", str(port), "--server.address",
            "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false",
            "--server.fileWatcherType", "none"]
    with served(argv, env, port, timeout) as server:
        yield server


@contextlib.contextmanager
def served(argv: list[str], env: dict[str, str], port: int, timeout: float = 120.0):
    """A server process started from argv (listening on port), once it answers its health check;
    yields the Server, stops it afterwards. Its output goes to test-output/streamlit-PORT.log."""
    OUTPUT.mkdir(parents=True, exist_ok=True)
    log = open(OUTPUT.parent / f"streamlit-{port}.log", "w")  # noqa: SIM115 -- closed below
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{' '.join(argv[:3])} exited with {proc.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(base + "/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server did not answer within {timeout:.0f} s; see {log.name}")
            time.sleep(0.3)
        yield Server(base, proc.pid, Path(log.name))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@contextlib.contextmanager
def chromium():
    """Debian's Chromium under Playwright, headless; yields the Browser (one context per session)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def new_page(browser, width: int = 1400, height: int = 1800):
    """A page in a context of its own (a session of its own on the server)."""
    page = browser.new_context(viewport={"width": width, "height": height}).new_page()
    page.set_default_timeout(300_000)
    return page


@contextlib.contextmanager
def browser_page(width: int = 1400, height: int = 1800):
    with chromium() as browser:
        yield new_page(browser, width, height)


def run_button(page, url: str):
    """Open a page with a Run button and return the button once the page has settled."""
    page.goto(url)
    run = page.locator(".st-key-run button").first
    run.wait_for()
    settle(page)
    return run


def type_prompt(page, prompt: str):
    """Type a prompt into the sidebar's text box of What comes next and apply it (Ctrl+Enter):
    once its chips are drawn, the box (a Playwright locator)."""
    box = page.get_by_label("Text", exact=True)
    box.wait_for()
    box.fill(prompt)
    box.press("Control+Enter")
    page.locator("span[title*='the boundary']").wait_for()
    settle(page)
    return box


def settle(page, extra_ms: int = 400) -> None:
    """Wait until the script run is over: Streamlit's app element says its script is not running
    (an action that asks for a rerun changes that at once) and the page shows no skeletons,
    spinners, progress bars or running status; then extra_ms for the last drawing."""
    page.wait_for_timeout(300)
    deadline = time.monotonic() + 600
    busy = ", ".join(
        f'[data-testid="{testid}"]'
        for testid in ("stSkeleton", "stSpinner", "stProgress", "stExpanderIconSpinner",
                       "stStatusWidgetRunningIcon", "stStatusWidgetRunningManIcon")
    )
    busy += ", " + ", ".join(f'[data-testid="stApp"][data-test-script-state="{state}"]'
                             for state in ("initial", "running", "rerunRequested"))
    while time.monotonic() < deadline:
        try:
            if page.locator(busy).count() == 0:
                break
        except Exception:  # noqa: BLE001 -- the page re-renders under us
            pass
        page.wait_for_timeout(200)
    page.wait_for_timeout(extra_ms)


def no_traceback(page) -> None:
    body = page.locator("body").inner_text()
    assert "Traceback" not in body and not page.locator('[data-testid="stException"]').count(), body[:2000]


# Each grapheme of the elements' text (a text box's value) drawn on a canvas in the element's own
# font, beside a code point no font has (U+10FFFD): where no font has a glyph Chromium draws the
# first font's missing-glyph box, so a grapheme (or a letter or symbol in it) drawn exactly as that
# code point is an empty box ("tofu"). ASCII and whitespace are skipped.
_MISSING_GLYPHS_JS = """(els) => {
  const size = 48;
  const canvas = document.createElement('canvas'); canvas.width = 6 * size; canvas.height = 2 * size;
  const ctx = canvas.getContext('2d', {willReadFrequently: true});
  const draw = (font, text) => {
    ctx.clearRect(0, 0, canvas.width, canvas.height); ctx.font = font; ctx.textBaseline = 'top';
    ctx.fillStyle = '#000'; ctx.fillText(text, 4, 4);
    return ctx.getImageData(0, 0, canvas.width, canvas.height).data;
  };
  const same = (a, b) => a.every((v, i) => v === b[i]);
  const graphemes = new Intl.Segmenter(undefined, {granularity: 'grapheme'});
  const seen = new Set(), boxes = new Set();
  for (const el of els) {
    const font = `${size}px ${getComputedStyle(el).fontFamily}`;
    const box = draw(font, '\\u{10FFFD}');
    const text = (el.tagName === 'TEXTAREA' || el.tagName === 'INPUT') ? el.value : el.textContent;
    for (const {segment} of graphemes.segment(text)) {
      if (/^[\\x00-\\x7f\\s]*$/u.test(segment) || seen.has(segment)) continue;
      seen.add(segment);
      const parts = [segment, ...[...segment].filter(c => c.codePointAt(0) > 0x7f && /[\\p{L}\\p{N}\\p{S}\\p{P}]/u.test(c))];
      if (parts.some(p => same(draw(font, p), box))) boxes.add(segment);
    }
  }
  return {seen: [...seen], boxes: [...boxes]};
}"""


def missing_glyphs(page, selector: str) -> tuple[list[str], list[str]]:
    """(the graphemes beyond ASCII that the elements matching selector show, those of them drawn
    as an empty box in the element's font): no font Chromium finds has their glyphs."""
    found = page.evaluate(_MISSING_GLYPHS_JS, page.locator(selector).element_handles())
    return found["seen"], found["boxes"]

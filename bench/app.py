"""Benchmark of the app in a real browser (Playwright on Debian's Chromium).

Prints (a) the seconds from `streamlit run` to a rendered home page (the canonical tokenization
and its log-probability shown) with the model's caches already on disk, and (b) the seconds of a
running-estimates run (lattice and proxy, k samples each) on the default Q&A-sized text, from
the click on Run to "Done:", with each method's own time as the page reports it. Screenshots of
both go to test-output/bench-app/.
Run: .venv/bin/python bench/app.py [--model gemma3-270m] [--samples 1000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the browser machinery lives with the browser test

from tests.test_browser import browser_page, settle, streamlit_server  # noqa: E402

OUTPUT = ROOT / "test-output" / "bench-app"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--samples", type=int, default=1000)
    args = parser.parse_args()
    OUTPUT.mkdir(parents=True, exist_ok=True)
    (ROOT / "test-output" / "browser").mkdir(parents=True, exist_ok=True)  # the server's log

    started = time.perf_counter()
    with streamlit_server() as server, browser_page(1400, 1100) as page:
        base = server.url
        page.goto(f"{base}/?model={args.model}")
        page.locator("span[title^='token 1:']").first.wait_for()
        page.get_by_text("log p(canonical)").first.wait_for()
        home = time.perf_counter() - started
        page.screenshot(path=str(OUTPUT / "home.png"))

        page.goto(f"{base}/running?model={args.model}&k={args.samples}&y=non-canonical+mass")
        run = page.locator(".st-key-run button").first
        run.wait_for()
        settle(page)
        clicked = time.perf_counter()
        run.click()
        done = page.get_by_text("Done:").first
        done.wait_for(timeout=3_600_000)
        running = time.perf_counter() - clicked
        summary = done.inner_text()
        settle(page)
        page.screenshot(path=str(OUTPUT / "running.png"))

    print(f"| model | streamlit run -> home page rendered | running estimates, k = {args.samples} (click -> done) | per method |")
    print("|---|---|---|---|")
    print(f"| {args.model} | {home:.1f} s | {running:.1f} s | {summary.removeprefix('Done: ')} |")
    print(f"screenshots: {OUTPUT / 'home.png'}, {OUTPUT / 'running.png'}")


if __name__ == "__main__":
    main()

"""Benchmark of the app in a real browser (Playwright on Debian's Chromium) against the CLI.

One run, one table. With the model's caches already on disk, for the app's default text and
context, k samples and a seed:

- home: seconds from `streamlit run` (the browser already open) to the home page's canonical
  tokenization on screen, and to its log p(canonical) (which needs the model);
- estimate: Home's "Estimate the marginal" (lattice, k), click to the result on screen;
- first / done: Running estimates (lattice and proxy, k each), click on Run to the first partial
  estimate plotted, and to "Done:";
- CLI: `marginal estimate` with the same text, context, k, seed, methods and dtype in a plain
  process, its own seconds (lattice + proxy; the canonical pass, shared, is not counted, as the
  app's home page has already made it), run before and after the app (the mean is compared, as
  other work on the machine changes), and done / CLI;
- responsive: while a second running-estimates run is going, seconds for another browser
  context (another session) to render the home page.

Screenshots go to test-output/bench-app/.
Run: .venv/bin/python -m bench.app [--model gemma3-270m] [--samples 100] [--dtype auto]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.support.browser import chromium, new_page, run_button, settle, streamlit_server
from pages._app.ui.defaults import DEFAULT_CONTEXT, DEFAULT_TEXT

ROOT = Path(__file__).resolve().parent.parent

OUTPUT = ROOT / "test-output" / "bench-app"
PLOT = "[data-testid=stPlotlyChart] .scatterlayer .trace"  # an estimate plotted (the empty axes have none)


def home_rendered(page, started: float) -> tuple[float, float]:
    """Seconds since started to the home page's canonical chips, and to its log p(canonical)."""
    page.locator("span[title^='token 1:']").first.wait_for()
    chips = time.perf_counter() - started
    page.get_by_text("log p(canonical)").first.wait_for()
    return chips, time.perf_counter() - started


def cli_seconds(model: str, samples: int, seed: int, dtype: str, methods: str = "lattice,proxy") -> dict[str, float]:
    """`marginal estimate`'s own seconds per method (default lattice and proxy) for the app's default inputs."""
    out = subprocess.run(
        [sys.executable, "-m", "marginal_core", "estimate", DEFAULT_TEXT, "--context", DEFAULT_CONTEXT,
         "--methods", methods, "--samples", str(samples), "--seed", str(seed), "--model", model,
         "--dtype", dtype, "--json"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )
    return {name: m["seconds"] for name, m in json.loads(out.stdout)["methods"].items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16"))
    args = parser.parse_args()
    OUTPUT.mkdir(parents=True, exist_ok=True)
    (ROOT / "test-output" / "browser").mkdir(parents=True, exist_ok=True)  # the server's log
    load_before = os.getloadavg()[0]
    query = f"model={args.model}&dtype={args.dtype}&k={args.samples}"
    before = cli_seconds(args.model, args.samples, 1, args.dtype)
    with chromium() as browser:
        page = new_page(browser, 1400, 1100)
        started = time.perf_counter()
        with streamlit_server(preload=None) as server:
            base = server.url
            page.goto(f"{base}/?{query}")
            home = home_rendered(page, started)
            timed = measure(args, browser, page, base)
    after = cli_seconds(args.model, args.samples, 1, args.dtype)
    load_after = os.getloadavg()[0]
    estimate, first, finished, summary, responsive, still_running = timed
    cli = {name: (before[name] + after[name]) / 2 for name in before}
    total = sum(cli.values())
    k = args.samples
    print("| model | k | streamlit run -> home (tokens / log p) | Home estimate | Run -> first estimate | Run -> Done "
          "| per method (app) | CLI (lattice + proxy) | app / CLI | another session's home during a run |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {args.model} ({args.dtype}) | {k} | {home[0]:.1f} / {home[1]:.1f} s | {estimate:.1f} s | {first:.1f} s "
          f"| {finished:.1f} s | {summary} | {total:.1f} s ({cli['lattice']:.1f} + {cli['proxy']:.1f}) "
          f"| {finished / total:.2f}x | {responsive:.1f} s{'' if still_running else ' (the run had ended)'} |")
    print(f"CLI before the app {sum(before.values()):.1f} s, after {sum(after.values()):.1f} s; load average (1 min): "
          f"{load_before:.2f} before, {load_after:.2f} after; screenshots in {OUTPUT}")


def measure(args: argparse.Namespace, browser, page, base: str) -> tuple:
    """Home's estimate, a running-estimates run, and another session's home page during a run."""
    query = f"model={args.model}&dtype={args.dtype}&k={args.samples}"
    button = page.locator(".st-key-estimate button").first
    button.wait_for()
    settle(page)
    clicked = time.perf_counter()
    button.click()
    page.get_by_text("Mass off the canonical").first.wait_for(timeout=3_600_000)
    estimate = time.perf_counter() - clicked
    page.screenshot(path=str(OUTPUT / "home.png"))

    # seed 1: Home's estimate (seed 0) would be a cached result here
    run = run_button(page, f"{base}/running?{query}&seed=1&y=non-canonical+mass")
    clicked = time.perf_counter()
    run.click()
    page.locator(PLOT).first.wait_for()
    first = time.perf_counter() - clicked
    done = page.get_by_text("Done:").first
    done.wait_for(timeout=3_600_000)
    finished = time.perf_counter() - clicked
    summary = done.inner_text().removeprefix("Done: ")
    settle(page)
    page.screenshot(path=str(OUTPUT / "running.png"))

    # Another session opens the home page while a (longer) run is going.
    run_button(page, f"{base}/running?{query.replace(f'k={args.samples}', f'k={10 * args.samples}')}&seed=2").click()
    page.locator(PLOT).first.wait_for()
    other = new_page(browser, 1400, 1100)
    opened = time.perf_counter()
    other.goto(f"{base}/?model={args.model}&dtype={args.dtype}")
    responsive = home_rendered(other, opened)[1]
    still_running = page.get_by_text("Done:").count() == 0
    other.screenshot(path=str(OUTPUT / "home-during-run.png"))
    page.locator(".st-key-stop button").first.click()
    page.get_by_text("Stopped:").first.wait_for()
    return estimate, first, finished, summary, responsive, still_running


if __name__ == "__main__":
    main()

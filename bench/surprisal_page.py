"""The Surprisal page in a real browser (Playwright on Debian's Chromium) against the CLI (issue 49).

For a text and model: seconds from the click on Run to the first strip on screen (its round 0,
the regions' chips with their numbers) and to "Done:", beside `marginal surprisal --json`'s own
seconds for the same text in a plain process (its search alone, the model loaded and warm), run
before and after the page (the mean is compared, as other work on the machine changes), and
Done / CLI. A warm-up text runs first on the server, so the model's load is not timed.
Run: .venv/bin/python -m bench.surprisal_page [--model smollm2-135m] [--text "..."]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

from bench.support.browser import browser_page, run_button, streamlit_server

ROOT = Path(__file__).resolve().parent.parent
TEXT = "Heavy rain flooded the valley road today."  # 41 bytes


def cli_seconds(model: str, text: str) -> float:
    """`marginal surprisal`'s own seconds (the search, after the load and the context's pass)."""
    out = subprocess.run([sys.executable, "-m", "marginal_core", "surprisal", text, "--model", model,
                          "--dtype", "float32", "--json"], cwd=ROOT, capture_output=True, text=True, check=True)
    return float(json.loads(out.stdout)["seconds"])


def page_seconds(url: str, text: str, model: str) -> tuple[float, float]:
    """Seconds from Run to the first strip with numbers, and to Done, on a fresh page."""
    with browser_page(1400, 1400) as page:
        run_button(page, f"{url}/surprisal?model={model}&text={quote(' warm up.')}&context=&dtype=float32").click()
        page.get_by_text("Done:").wait_for(timeout=300_000)
        run = run_button(page, f"{url}/surprisal?model={model}&text={quote(text)}&context=&dtype=float32")
        started = time.perf_counter()
        run.click()
        page.locator(".surprisal-strip .region span[title*='marginal']").first.wait_for(timeout=300_000)
        first = time.perf_counter() - started
        page.get_by_text("Done:").wait_for(timeout=600_000)
        return first, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--text", default=TEXT)
    args = parser.parse_args()
    before = cli_seconds(args.model, args.text)
    with streamlit_server() as server:
        first, done = page_seconds(server.url, args.text, args.model)
    after = cli_seconds(args.model, args.text)
    cli = (before + after) / 2
    print(f"{args.model}, {len(args.text.encode())} bytes, float32; load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| first strip s | Done s | CLI s (before, after) | Done / CLI |")
    print("|---|---|---|---|")
    print(f"| {first:.2f} | {done:.2f} | {cli:.2f} ({before:.2f}, {after:.2f}) | {done / cli:.2f}x |")


if __name__ == "__main__":
    main()

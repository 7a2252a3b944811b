"""Benchmark of the Compare page (issue 34) in a real browser against two `marginal estimate` runs.

For one text and two models (canonical + the anytime beam, float32 unless told):

- CLI: `marginal estimate --methods canonical,beam` per model in a plain process: its own
  seconds (the canonical pass plus the beam's), and the process's wall time (imports and the
  model's load included); run before and after the app (their mean is compared);
- memory: the app's server (started as `make app` starts it) runs a one-model page (Running
  estimates, the beam, model A) on another sentence, then Compare on that sentence (model B loads
  and runs): the server's resident memory after each; target: at most B's weights + 0.5 GiB more;
- page: with both models loaded, Compare's Run on the text, click to "Done:" (both models'
  figures on screen); target: at most 1.2 x the CLI's seconds + 1 s.

Run: .venv/bin/python -m bench.compare [--models smollm2-135m,gemma3-270m] [--text "..."] [--dtype float32]
Screenshots go to test-output/bench-compare/.
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

from bench.support.browser import chromium, new_page, rss_gib, run_button, settle, streamlit_server

ROOT = Path(__file__).resolve().parent.parent

OUTPUT = ROOT / "test-output" / "bench-compare"
MEMORY_TEXT = "The powerhouse of the cell is the mitochondria."


def cli_run(model: str, text: str, dtype: str) -> tuple[float, float]:
    """`marginal estimate` (canonical, anytime beam): its own seconds, and the process's wall seconds."""
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "marginal_core", "estimate", text, "--methods", "canonical,beam", "--model", model,
         "--dtype", dtype, "--device", "cpu", "--json"], cwd=ROOT, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    result = json.loads(out.stdout)
    return sum(m["seconds"] for m in result["methods"].values()), wall


def weights_gib(model: str, dtype: str) -> float:
    """A model's weight bytes as the adapter counts them, in GiB (in a process of its own)."""
    code = ("from marginal_core.models import load_model; "
            f"print(load_model({model!r}, device='cpu', dtype={dtype!r}).weight_bytes)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1]) / 2**30


def click_to_done(page, url: str) -> float:
    """Open a page, press Run, wait for "Done:"; seconds from the click."""
    run = run_button(page, url)
    clicked = time.perf_counter()
    run.click()
    page.get_by_text("Done:").first.wait_for(timeout=3_600_000)
    return time.perf_counter() - clicked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="smollm2-135m,gemma3-270m")
    parser.add_argument("--text", default="Heavy rain flooded the valley road.")
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()
    a, b = args.models.split(",")
    OUTPUT.mkdir(parents=True, exist_ok=True)
    (ROOT / "test-output" / "browser").mkdir(parents=True, exist_ok=True)  # the server's log
    load_before = os.getloadavg()[0]
    before = {m: cli_run(m, args.text, args.dtype) for m in (a, b)}
    query = f"dtype={args.dtype}&context=&Wauto=true"
    with chromium() as browser, streamlit_server(preload="none") as server:
        page = new_page(browser, 1400, 2200)
        click_to_done(page, f"{server.url}/running?model={a}&text={quote(MEMORY_TEXT)}&methods=beam&{query}")
        settle(page)
        one_model = rss_gib(server.pid)
        click_to_done(page, f"{server.url}/compare?model={a}&model_b={b}&text={quote(MEMORY_TEXT)}&{query}")
        settle(page)
        two_models = rss_gib(server.pid)
        page_s = click_to_done(page, f"{server.url}/compare?model={a}&model_b={b}&text={quote(args.text)}&{query}")
        settle(page)
        done = page.get_by_text("Done:").first.inner_text()
        page.screenshot(path=str(OUTPUT / "compare.png"))
        after_run = rss_gib(server.pid)
    after = {m: cli_run(m, args.text, args.dtype) for m in (a, b)}
    load_after = os.getloadavg()[0]
    own = sum((before[m][0] + after[m][0]) / 2 for m in (a, b))
    wall = sum((before[m][1] + after[m][1]) / 2 for m in (a, b))
    weights_b = weights_gib(b, args.dtype)
    print(f"text: {args.text!r}; models {a} (A), {b} (B); {args.dtype}; canonical + anytime beam")
    print("| Compare: Run -> Done | CLI own seconds (A + B) | target 1.2 x CLI + 1 s | page / CLI | CLI wall (A + B) |")
    print("|---|---|---|---|---|")
    print(f"| {page_s:.1f} s ({done.removeprefix('Done: ')}) | {own:.1f} s | {1.2 * own + 1:.1f} s | "
          f"{page_s / own:.2f}x | {wall:.1f} s |")
    print()
    print(f"memory text: {MEMORY_TEXT!r}")
    print("| server RSS: one-model page | Compare, both models | more than one model | target: B's weights + 0.5 GiB "
          "| after the timed run |")
    print("|---|---|---|---|---|")
    print(f"| {one_model:.2f} GiB | {two_models:.2f} GiB | {two_models - one_model:.2f} GiB | "
          f"{weights_b + 0.5:.2f} GiB ({weights_b:.2f} + 0.5) | {after_run:.2f} GiB |")
    print(f"load average (1 min): {load_before:.2f} before, {load_after:.2f} after; screenshots in {OUTPUT}")


if __name__ == "__main__":
    main()

"""Benchmark of Stop on a long text: how soon the server's CPU is idle after the click.

One `streamlit run app.py` and one Chromium page on Running estimates (lattice, k samples) with
a text of `--chars` characters typed into the sidebar (past what a link holds); Run, then Stop
`--after` seconds later. It prints the seconds from the Stop click to "Stopped" on screen, to
the server using less than a quarter of a core over half a second (sampled every 0.1 s), and
the server's CPU seconds in the 2 s after the click.

Run: .venv/bin/python -m bench.stop [--model gemma3-270m] [--chars 60000] [--after 20] [--samples 1000] [--dtype auto]
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from pathlib import Path

from bench.support.browser import chromium, cpu_seconds, idle_after, new_page, settle, streamlit_server

ROOT = Path(__file__).resolve().parent.parent

SENTENCE = "The committee postponed its decision until the next meeting, citing new evidence. "


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--chars", type=int, default=60_000)
    parser.add_argument("--after", type=float, default=20.0, help="seconds between Run and Stop")
    parser.add_argument("--samples", type=int, default=1_000)
    parser.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16"))
    args = parser.parse_args()
    text = (SENTENCE * (args.chars // len(SENTENCE) + 1))[: args.chars]
    load = os.getloadavg()[0]
    with streamlit_server() as server, chromium() as browser:
        page = new_page(browser, 1400, 1000)
        page.goto(f"{server.url}/running?model={args.model}&dtype={args.dtype}&k={args.samples}"
                  f"&methods=lattice&exact=false&context=")
        box = page.locator(".stSidebar textarea").first
        box.wait_for()
        box.fill(text)
        box.press("Control+Enter")
        settle(page)
        page.locator(".st-key-run button").first.click()
        page.wait_for_timeout(args.after * 1000)
        page.locator(".st-key-stop button").first.click()
        clicked, cpu_at_click = time.monotonic(), cpu_seconds(server.pid)
        cpu_2s: list[float] = []  # read 2 s after the click, whether the server is idle by then or not
        timer = threading.Timer(2.0, lambda: cpu_2s.append(cpu_seconds(server.pid) - cpu_at_click))
        timer.start()
        idle = idle_after(server.pid)
        timer.join()
        page.get_by_text("Stopped:").first.wait_for(timeout=120_000)
        shown = time.monotonic() - clicked
    print(f"{args.model}, {args.chars:,} characters, lattice k = {args.samples}, dtype {args.dtype}, "
          f"Stop {args.after:.0f} s after Run; load {load:.2f} -> {os.getloadavg()[0]:.2f}")
    print("| Stop → 'Stopped' on screen | Stop → server CPU idle | server CPU in the 2 s after Stop |\n|---|---|---|")
    print(f"| {shown:.1f} s | {idle:.1f} s | {cpu_2s[0]:.2f} s |")


if __name__ == "__main__":
    main()

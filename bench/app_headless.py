"""Benchmark of the Running page driven headless (Streamlit's AppTest, no browser: what a GPU
machine without Chromium runs) against the CLI, the lattice method alone (issue 44's app target).

For the app's default text and context, k samples and a seed:

- CLI: `marginal estimate --methods lattice` in a plain process, its own seconds for the lattice
  (the canonical pass, shared with Home in the app, not counted), run before and after the app
  (the mean is compared);
- app: the Running page opened by AppTest with the same model, dtype, text, context, k, seed and
  method, warmed by one run at another seed (the model loaded, kernels chosen); then Run → the
  end of that script run (Done), and its first live result, from the app's own log (seconds
  after the click's script run started).

Run: .venv/bin/python -m bench.app_headless [--model gemma3-270m] [--samples 1000] [--dtype auto]
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import time

from bench.app import cli_seconds
from bench.support.apptest import app
from pages._app.ui.defaults import DEFAULT_CONTEXT, DEFAULT_TEXT

RUNNING = "pages/views/running.py"


class FirstResults(logging.Handler):
    """The app's "first result … s after its start" log lines, as seconds."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        found = re.search(r"first result ([\d.]+) s after its start", record.getMessage())
        if found:
            self.seconds.append(float(found.group(1)))


def app_run(model: str, samples: int, seed: int, dtype: str, firsts: FirstResults) -> tuple[float, float, str]:
    """Run → Done seconds, the first result's seconds and the Done line of one Running-page run."""
    at = app(RUNNING, model=model, dtype=dtype, text=DEFAULT_TEXT, context=DEFAULT_CONTEXT, k=str(samples),
             seed=str(seed), methods="lattice")
    seen = len(firsts.seconds)
    clicked = time.perf_counter()
    at.button(key="run").click().run()
    finished = time.perf_counter() - clicked
    if at.exception:
        raise RuntimeError(at.exception[0].value)
    done = next((s.value for s in at.success if "Done:" in s.value), "no Done line")
    first = firsts.seconds[seen] if len(firsts.seconds) > seen else float("nan")
    return finished, first, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--dtype", default="auto", choices=("auto", "float32", "float16", "bfloat16"))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    firsts = FirstResults()
    logging.getLogger("marginal.runs").addHandler(firsts)
    load_before = os.getloadavg()[0]
    before = cli_seconds(args.model, args.samples, args.seed, args.dtype, "lattice")["lattice"]
    app_run(args.model, args.samples, args.seed + 1, args.dtype, firsts)  # warm-up: another seed, not cached
    finished, first, done = app_run(args.model, args.samples, args.seed, args.dtype, firsts)
    after = cli_seconds(args.model, args.samples, args.seed, args.dtype, "lattice")["lattice"]
    cli = (before + after) / 2
    print("| model | dtype | k | Run -> first result | Run -> Done (app) | CLI lattice | app / CLI | Done line |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {args.model} | {args.dtype} | {args.samples} | {first:.2f} s | {finished:.2f} s | {cli:.2f} s "
          f"| {finished / cli:.2f}x | {done} |")
    print(f"CLI before {before:.2f} s, after {after:.2f} s; load average (1 min) {load_before:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()

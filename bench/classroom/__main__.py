"""Benchmark of the app serving a class: N browser sessions press Run at once on one server.

For each size N (`--sessions 1,8,16,32` runs each in turn, each against a fresh server):

- one `streamlit run app.py` (bench/support/browser.py's server; `--env KEY=VALUE` adds to its
  environment) and one headless Chromium at `nice -n 19`, every process and thread of it, so the
  browsers get what is left, as on the students' own machines; each session is a browser
  context of its own;
- each session opens Running estimates with a different sentence, no context, the lattice
  method alone (no exact line), k samples and the page's default seed 0; once every page has
  settled and the server is idle (the model loaded in the background), every session clicks
  Run at the same moment (a click scheduled in each page);
- per session, timed in the page itself when the page changes (a MutationObserver, so the
  timing costs the page nothing while it waits): seconds from its click to the first estimate
  plotted and to "Done:", the first error or exception shown, and the first queue message seen
  while it waited (an element saying "ahead of yours" or "in the queue");
- the same two moments on the server's side, from its log (pages/_app/runtime/machine.py logs when each
  run first showed a result and when it ended): the browsers at nice 19 on the server's cores
  draw late while the server is busy, which a student's own machine would not, so the server's
  times are what a class sees, less its own browser's drawing;
- the server's memory (RSS of the streamlit process and its children, every 0.2 s): just
  before the clicks and the peak until every session has ended;
- the CPU seconds the server and the browsers used from the clicks to the last end (the
  browsers, drawing every session's page on the server's own cores, take what would be the
  students' machines' work);
- the serial reference, after the server has stopped: the same N estimates one after another
  in this process with the model loaded once (the library's ``Marginalizer(lm, text).estimate``
  in one chunk, which scores the canonical path too, as the app's run does), summed wall
  seconds and the CPU seconds they used (beside the server's), under the server's environment
  and the app's thread settings (OMP_WAIT_POLICY=PASSIVE; with OpenMP's default, at a load of 3
  to 4, one SmolLM2 estimate took 14 s instead of 3.7 s).
  The CLI (`marginal estimate`) is not run: it would load the model once per estimate.

One markdown table with a row per N. Screenshots of the first and last session go to
test-output/bench-classroom/, the server's log to test-output/streamlit-PORT.log.

Run: .venv/bin/python -m bench.classroom [--sessions 1,8,16,32] [--model gemma3-270m]
     [--dtype float32] [--samples 100] [--timeout 900] [--env KEY=VALUE ...] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

from bench.classroom.measure import run_size
from bench.classroom.report import print_report
from bench.classroom.sentences import SENTENCES
from bench.classroom.sessions import OUTPUT, SEED


def sizes(text: str) -> list[int]:
    """--sessions: comma-separated sizes, each 1 to len(SENTENCES)."""
    try:
        values = [int(n) for n in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not comma-separated numbers: {text!r}") from None
    if not all(1 <= n <= len(SENTENCES) for n in values):
        raise argparse.ArgumentTypeError(f"each size must be 1 to {len(SENTENCES)}: {text!r}")
    return values


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.classroom", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", dest="sizes", type=sizes, default="8", metavar="N[,N...]",
                        help=f"Sizes N, comma-separated (e.g. 1,8,16,32), each 1 to {len(SENTENCES)}.")
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--dtype", default="float32", choices=("auto", "float32", "bfloat16"))
    parser.add_argument("--samples", type=int, default=100, help="Lattice samples k per session.")
    parser.add_argument("--timeout", type=float, default=900.0, help="Seconds each size may take after the clicks.")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                        help="An environment variable for the server and the serial reference (repeatable).")
    parser.add_argument("--json", type=Path, help="Write every session's numbers here.")
    args = parser.parse_args()
    if not all("=" in kv for kv in args.env):
        parser.error("--env takes KEY=VALUE")
    return args


def main() -> None:
    args = parse_args()
    env = dict(kv.split("=", 1) for kv in args.env)
    os.environ.update(env)  # the server copies this environment; the serial reference runs in it
    OUTPUT.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    sizes = {}
    for n in args.sizes:
        print(f"N = {n}…", file=sys.stderr, flush=True)
        sizes[n] = run_size(n, args)
    print_report(args, sizes, load_before, os.getloadavg())
    if args.json:
        dump = {"model": args.model, "dtype": args.dtype, "samples": args.samples, "seed": SEED, "env": env,
                "sizes": {n: {**asdict(s), "browser_nice": sorted(s.browser_nice), "makespan": s.makespan,
                              "click_spread": s.click_spread}
                          for n, s in sizes.items()}}
        args.json.write_text(json.dumps(dump, indent=2))


if __name__ == "__main__":
    main()

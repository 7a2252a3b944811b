"""A class pressing Run on the same Q&A setup at once (marginal_core.tasks.writer): N sessions as
threads taking turns on one device, as the app's task pages run them.

Two ways, in one run: each session in a results folder of its own (what N runs of one setup cost
before a folder had one writer: every session scored every item), and all in the one folder the
app gives that setup (one run writes it, the others follow and score what it leaves). Prints
per way the makespan, click→done min/median/max, and the items scored in all.

    .venv/bin/python -m bench.one_setup --sessions 8 [--model smollm2-135m --limit 4 --samples 8]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from functools import partial
from pathlib import Path

from bench.batching import at_once  # N sessions' runs started together on one Turns
from marginal_core.models import load_model
from marginal_core.serving.turns import Turns
from marginal_core.tasks.qa import run_qa
from marginal_core.tasks.store import read_sessions

METHODS = ("canonical", "lattice")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--dataset", default="arc-easy")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--limit", type=int, default=4, help="questions per run")
    parser.add_argument("--samples", type=int, default=8, help="lattice samples per answer")
    args = parser.parse_args()
    lm = load_model(args.model, dtype=args.dtype)

    def run(folder: Path) -> None:
        run_qa(args.dataset, folder, lm=lm, limit=args.limit, samples=args.samples, methods=METHODS,
               show_bar=False, following=lambda *state: None)

    root = Path(tempfile.mkdtemp(prefix="one-setup-"))
    print(f"{args.sessions} sessions, {args.dataset} × {args.limit} questions, {args.model} {args.dtype}, "
          f"k = {args.samples}, methods {', '.join(METHODS)}\n")
    print("| way | makespan | click→done min / median / max | items scored |")
    print("|---|---:|---|---:|")
    ways = {"a folder each (before)": [root / f"own-{i}" for i in range(args.sessions)],
            "one folder, the others follow": [root / "shared"] * args.sessions}
    for way, folders in ways.items():
        makespan, _, done = at_once(Turns(), [partial(run, folder) for folder in folders])
        scored = sum(s["items_done"] for folder in set(folders) for s in read_sessions(folder))
        print(f"| {way} | {makespan:.1f} s | {min(done):.1f} / {statistics.median(done):.1f} / {max(done):.1f} s "
              f"| {scored} |", flush=True)


if __name__ == "__main__":
    main()

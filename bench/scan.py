"""Benchmark of `marginal scan` against a loop of CLI calls and a library loop, on one file of texts.

The texts are bench/estimators.py's 30: 20 short Q&A answers after their questions and 10 plain
sentences, written to a .jsonl file (text, context). Three ways to score them all by canonical
and beam under one model, each in a fresh process, wall seconds from start to exit (Python
start-up, imports and the model's load included):

- scan: `marginal scan FILE --out DIR --methods canonical,beam`;
- library loop: one process that loads the model once and runs ``Marginalizer(lm, text,
  context).estimate`` for each text and method (what one would write by hand);
- CLI calls: `marginal estimate TEXT --context C --methods canonical,beam --json` once per text.

It prints one table, and the largest difference between the scan's log marginal and the CLI's
(the same text, method, seed and dtype).

Run: .venv/bin/python -m bench.scan [--model gemma3-270m] [--dtype float32] [--limit 30]
     [--beam-width auto|W]   (the same width in all three; auto is the scan's and the CLI's default)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.estimators import text_sets
from marginal_core.estimators.beam_width import parse_width

ROOT = Path(__file__).resolve().parent.parent

METHODS = "canonical,beam"


def texts(limit: int) -> list[tuple[str, str]]:
    """(context, text) pairs: the bench's answers and sentences ('' for no context)."""
    pairs = [(c or "", t) for group in text_sets().values() for c, t in group]
    return pairs[:limit]


def timed(argv: list[str]) -> tuple[float, str]:
    """Wall seconds of a command and its standard output (it must succeed)."""
    start = time.perf_counter()
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True, env={**os.environ})
    return time.perf_counter() - start, out.stdout


def library_loop(path: str, model: str, dtype: str, width: int | None) -> None:
    """The hand-written loop: load once, estimate each text by each method."""
    from marginal_core.estimators.marginalizer import Marginalizer
    from marginal_core.models import load_model

    lm = load_model(model, dtype=dtype)
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        m = Marginalizer(lm, record["text"], record["context"] or None)
        for method in METHODS.split(","):
            m.estimate(method, samples=100, seed=0, beam_width=width)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="gemma3-270m")
    parser.add_argument("--dtype", default="float32", choices=("auto", "float32", "bfloat16"))
    parser.add_argument("--limit", type=int, default=30, help="how many of the 30 texts")
    parser.add_argument("--beam-width", default="auto", help="the beam's width in all three (default: auto)")
    parser.add_argument("--loop", help=argparse.SUPPRESS)  # internal: run the library loop on this file
    args = parser.parse_args()
    if args.loop:
        library_loop(args.loop, args.model, args.dtype, parse_width(args.beam_width))
        return
    pairs = texts(args.limit)
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "texts.jsonl"
        file.write_text("".join(json.dumps({"text": t, "context": c}) + "\n" for c, t in pairs), encoding="utf-8")
        model_args = ["--dtype", args.dtype, "--beam-width", args.beam_width]
        scan_s, _ = timed([py, "-m", "marginal_core", "scan", str(file), "--out", f"{tmp}/scan", "--models", args.model,
                           "--methods", METHODS, *model_args, "--json"])
        loop_s, _ = timed([py, "-m", "bench.scan", "--loop", str(file), "--model", args.model, "--dtype", args.dtype,
                           "--beam-width", args.beam_width])
        cli_s, worst = 0.0, 0.0
        import pandas as pd

        table = pd.read_csv(f"{tmp}/scan/scan.csv", keep_default_na=False)
        for context, text in pairs:
            seconds, out = timed([py, "-m", "marginal_core", "estimate", text, "--context", context, "--model", args.model,
                                  "--methods", METHODS, *model_args, "--json"])
            cli_s += seconds
            got = table[table["text"] == text].set_index("method")["log_marginal"]
            for method, row in json.loads(out)["methods"].items():
                worst = max(worst, abs(got[method] - row["log_marginal"]))
    load = os.getloadavg()[0]
    print(f"| model | texts | methods | scan (one process) | library loop (one process) | {len(pairs)} CLI calls "
          "| CLI calls / scan | scan / loop | max abs diff, scan vs CLI log p |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    print(f"| {args.model} ({args.dtype}) | {len(pairs)} | {METHODS} (W = {args.beam_width}) "
          f"| {scan_s:.1f} s | {loop_s:.1f} s | {cli_s:.1f} s "
          f"| {cli_s / scan_s:.2f}x | {scan_s / loop_s:.2f}x | {worst:.1e} |")
    print(f"Wall seconds from process start to exit, model load included; load average (1 min) at the end: {load:.2f}")


if __name__ == "__main__":
    main()

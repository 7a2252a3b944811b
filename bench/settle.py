"""How a long text's surprisal settles and certifies over time (issue 59): the search's two
measures of progress after every round, against the long-run values, per model.

Per model, after a warm-up: one search of the text's word regions with ``--long`` seconds of
budget gives the long-run values; after every round of it, the seconds, the words within --near
nats of the long-run values, the words certified (interval within the tolerance), whether the
values had settled (``search_stop``), the prefixes scored, and the certificate's front: the first
word left open and the mass still open before it (the unscored exits ending there) beside
P(s<its end), which the word's interval needs well under its tolerance. Then the default stop
(``time_budget="auto"``) on the same text: when it ended, the words certified then and within
--near of the long run.
float32 on the CPU.
Run: .venv/bin/python -m bench.settle [--models gemma3-270m,smollm2-135m] [--text bench/paragraph.txt]
     [--long 90] [--near 0.02]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from bench.surprisal import WARM_UP, machine
from marginal_core.estimators.marginalizer import Marginalizer
from marginal_core.models import load_model
from marginal_core.search.surprisal.stream import surprisal_stream

PARAGRAPH = Path(__file__).with_name("paragraph.txt")


def values(s) -> np.ndarray:  # noqa: ANN001 -- a Surprisal
    """Each word's point value."""
    return np.array([r.surprisal for r in s.regions])


def front(s) -> str:  # noqa: ANN001 -- a Surprisal
    """The first region left open, and log(open mass before its start / P(s<its end))."""
    if not s.open_regions:
        return "-"
    region = s.open_regions[0]
    a, c = s.cuts[region.index], s.cuts[region.index + 1]
    lo, up = s.prefix_lower, s.prefix_upper
    open_before = up[a] + np.log(-np.expm1(lo[a] - up[a])) if up[a] > lo[a] else -np.inf
    return f"{region.text!r} (word {region.index + 1}): {open_before - lo[c]:+.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="gemma3-270m,smollm2-135m")
    parser.add_argument("--text", type=Path, default=PARAGRAPH)
    parser.add_argument("--long", type=float, default=90.0, help="seconds of the long run")
    parser.add_argument("--near", type=float, default=0.02, help="nats: a word's value counts as settled within this")
    parser.add_argument("--auto", action="store_true", help="also run the default stop")
    args = parser.parse_args()
    text = args.text.read_text(encoding="utf-8").strip()
    print(f"{machine()}\n{len(text.encode())} bytes\n", flush=True)
    for model in args.models.split(","):
        lm = load_model(model, device="cpu", dtype="float32")
        Marginalizer(lm, WARM_UP).surprisal()
        m = Marginalizer(lm, text)
        m.canonical_score()
        rounds = list(surprisal_stream(m, time_budget=args.long))
        final = values(rounds[-1])
        print(f"## {model}: long run {rounds[-1].seconds:.1f} s, {rounds[-1].rounds} rounds, "
              f"{rounds[-1].scored:,} prefixes, ended: {rounds[-1].ended}, KV store peak "
              f"{rounds[-1].kv_peak_bytes / 2**20:.1f} MiB\n")
        print(f"| round | s | words within {args.near} of the long run | certified | values settled at | prefixes "
              "| the front: first open word, log(open mass before it / P(s<its end)) |")
        print("|---|---|---|---|---|---|---|")
        for s in rounds:
            near = int(np.sum(np.abs(values(s) - final) <= args.near))
            settled = "-" if s.settled_at is None else f"{s.settled_at:.1f} s"
            print(f"| {s.rounds} | {s.seconds:.1f} | {near}/{len(final)} | {s.certified}/{len(final)} | {settled} "
                  f"| {s.scored:,} | {front(s)} |", flush=True)
        if args.auto:
            auto = list(surprisal_stream(Marginalizer(lm, text), time_budget="auto"))[-1]
            near = int(np.sum(np.abs(values(auto) - final) <= args.near))
            print(f"\ndefault stop: ended after {auto.seconds:.1f} s ({auto.ended}), {auto.progress}, "
                  f"{near}/{len(final)} within {args.near} of the long run, {len(auto.open_regions)} left open\n",
                  flush=True)


if __name__ == "__main__":
    main()

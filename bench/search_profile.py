"""Where a prefix search's time goes (issue 59): cProfile over one search of a text's word regions
with a budget of prefixes, with its KV kept across rounds or fed again (--kv-bytes 0), after a
warm-up; prints the seconds, prefixes, rounds, the KV store's peak and the top functions by their
own time and by cumulative time.
Run: .venv/bin/python -m bench.search_profile [--model smollm2-135m] [--text TEXT] [--prefixes 1500]
     [--kv-bytes 0]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

from bench.surprisal import WARM_UP, machine
from marginal_core.estimators.marginalizer import Marginalizer
from marginal_core.models import load_model
from marginal_core.search.rounds import Regions, search_rounds
from marginal_core.search.settings import KV_BYTES, SearchSettings

TEXT = "We shared a café au lait and a crème brûlée at the corner bistro."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--text", default=TEXT)
    parser.add_argument("--prefixes", type=int, default=1500, help="the search's budget of prefixes")
    parser.add_argument("--kv-bytes", type=int, default=KV_BYTES, help="the KV kept across rounds (0: none)")
    parser.add_argument("--top", type=int, default=14)
    args = parser.parse_args()
    print(machine(), flush=True)
    lm = load_model(args.model, device="cpu", dtype="float32")
    Marginalizer(lm, WARM_UP).surprisal()
    m = Marginalizer(lm, args.text)
    state = m.context_state()
    cuts = Marginalizer(lm, args.text).surprisal(time_budget=0).cuts
    profile = cProfile.Profile()
    started = time.perf_counter()
    profile.enable()
    *_, last = search_rounds(lm, m.lattice, state, SearchSettings(budget=args.prefixes, kv_bytes=args.kv_bytes), Regions(cuts))
    profile.disable()
    print(f"{args.model}, {args.text!r}: {time.perf_counter() - started:.1f} s, {last.scored:,} prefixes, "
          f"{last.rounds} rounds, ended {last.ended}, KV peak {last.kv_peak_bytes / 2**20:.1f} MiB")
    for order in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats(order).print_stats(args.top)
        print("\n".join(line for line in out.getvalue().splitlines()[6:] if line.strip()))


if __name__ == "__main__":
    main()

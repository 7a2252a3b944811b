"""Every estimator against exact, and against genlm-bytes: which one buys the most mass a second.

Short texts (the Q&A answers whose paths can all be scored): "mass recall", the share of the
exact non-canonical mass each method finds, beside its seconds and the paths it scored. Longer
texts (the sentences): each bound against seconds, and its gap to the best bound any method
found on that text. Methods: canonical alone, the one-token splits alone (Algorithm 1's first
samples), Algorithm 1 at each k, the beam at each W, the proxy at each k (an estimate, not a
bound: its recall can pass 100%) and, with --peer genlm, genlm-bytes at each K. Each method's
run is its own, on the same Marginalizer (context prefilled, canonical scored outside every clock).
Where Algorithm 1 fails (issue 21): the longer texts are the bench sentences, the harder ones of
bench/hard_sentences.txt (numbers, names, rare words, URLs, code) and the ARC question texts of
paper Table 1 (--paper N of about 50 and of about 100 characters). Per model it prints on how many
texts each method falls more than 0.1 and 1 nat below the best bound, the seconds each needs to
come within 0.01 nats of it (a beam's bound is read at each step that completed paths, so the
anytime beam's time is that of the round that got there), the anytime beam against genlm-bytes'
widest K text by text, a per-text table, and the worst case: the tokenizations the best method
found that Algorithm 1 at its largest k or the W = 32 beam missed, and where the beam pruned them.
Run: .venv/bin/python -m bench.study [--models gemma3-270m,smollm2-135m] [--peer genlm]
     [--short-limit N] [--long-limit N] [--paper N] [--device cuda] [--dtype auto]
"""

from __future__ import annotations

import argparse
import math
import os
import pickle
import platform
import time

from bench.estimators import text_sets
from bench.peers.genlm_peer import GenlmPeer
from bench.study.points import Budgets, long_texts, run_text
from bench.study.report import explain, report
from marginal_core.cli.model_commands import add_device_arguments
from marginal_core.estimators.beam_width import DEFAULT_BEAM_WIDTH, parse_width
from marginal_core.estimators.marginalizer import Marginalizer
from marginal_core.ground.errors import TooManyPathsError
from marginal_core.models import load_model


def _machine() -> str:
    load = os.getloadavg()[0]
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load {load:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.study", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="gemma3-270m,smollm2-135m")
    parser.add_argument("--short-limit", type=int, default=None, help="Q&A answers per model (default all)")
    parser.add_argument("--long-limit", type=int, default=5,
                        help="longer texts of each set per model: bench sentences, hard_sentences.txt, ARC")
    parser.add_argument("--paper", type=int, default=0, help="ARC question texts of each length, 50 and 100 characters")
    parser.add_argument("--match", default="",
                        help="keep only the texts (answers and longer texts) holding one of these |-separated strings")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="start no longer text after this many seconds of a model's longer texts")
    parser.add_argument("--lattice-ks", default="10,100,1000")
    parser.add_argument("--beam-widths", default=f"1,4,16,{DEFAULT_BEAM_WIDTH},auto",
                        help="widths, auto for the anytime beam (default: 1,4,16,32,auto)")
    parser.add_argument("--proxy-ks", default="10,100,1000")
    parser.add_argument("--peer", choices=["genlm"], help="run genlm-bytes' beam too (own venv, built once)")
    parser.add_argument("--peer-widths", default="4,16")
    parser.add_argument("--exact-budget", type=int, default=5000, help="most paths a short text may have")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", help="pickle each model's points to SAVE.<model>.pkl")
    add_device_arguments(parser)
    args = parser.parse_args()
    ints = lambda s: tuple(int(x) for x in s.split(",") if x)  # noqa: E731
    widths = tuple(parse_width(w) for w in args.beam_widths.split(",") if w)
    budgets = Budgets(ints(args.lattice_ks), widths, ints(args.proxy_ks),
                      ints(args.peer_widths) if args.peer else ())
    started = time.perf_counter()
    print(f"machine: {_machine()}", flush=True)
    for model in args.models.split(","):
        lm = load_model(model, device=args.device, dtype=args.dtype)
        print(f"{model}: {lm.loaded.device}, {str(lm.dtype).removeprefix('torch.')}", flush=True)
        peer = GenlmPeer(model, lm.tokenizer) if args.peer else None
        warm = Budgets(budgets.lattice[:1], budgets.beam[-1:], budgets.proxy[:1], budgets.peer[:1])
        run_text(Marginalizer(lm, "A warm-up text."), warm, args.seed, peer)  # kernels and caches, off the clock
        short, exact, canonical = [], [], []
        for context, text in text_sets()["qa"][: args.short_limit]:
            if args.match and not any(part in text for part in args.match.split("|")):
                continue
            m = Marginalizer(lm, text, context)
            try:
                x = m.exact(budget=args.exact_budget).log_noncanonical
            except TooManyPathsError:
                continue
            if math.isfinite(x):  # a single path has no non-canonical mass to recall
                short.append(run_text(m, budgets, args.seed, peer))
                exact.append(x)
                canonical.append(m.canonical_score().log_p)
                print(f"  short {len(short)}: {text!r} ({_machine()})", flush=True)
        cases, long, begun = long_texts(args.long_limit, args.paper), [], time.perf_counter()
        if args.match:
            cases = [c for c in cases if any(part in c[2] for part in args.match.split("|"))]
        for name, context, text in cases:
            if args.budget_s and time.perf_counter() - begun > args.budget_s:
                print(f"  cut: the time budget ({args.budget_s:.0f} s) ran out after {len(long)} of "
                      f"{len(cases)} longer texts", flush=True)
                cases = cases[: len(long)]
                break
            t0 = time.perf_counter()
            long.append(run_text(Marginalizer(lm, text, context), budgets, args.seed, peer))
            print(f"  long {len(long)}/{len(cases)} {name}: {text[:40]!r} {time.perf_counter() - t0:.0f} s "
                  f"({_machine()})", flush=True)
        if peer:
            peer.close()
        if args.save:  # every point, found paths included, for a later look (pickle)
            with open(f"{args.save}.{model}.pkl", "wb") as f:
                pickle.dump({"cases": cases, "long": long, "short": short, "budgets": budgets}, f)
        report(model, short, exact, canonical, long, budgets)
        explain(model, lm, cases, long, budgets)
    print(f"\nmachine at the end: {_machine()}; wall {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()

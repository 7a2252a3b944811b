"""Every estimator against exact, and against genlm-bytes: which one buys the most mass a second.

Short texts (the Q&A answers whose paths can all be scored): "mass recall", the share of the
exact non-canonical mass each method finds, beside its seconds and the paths it scored. Longer
texts (the sentences): each bound against seconds, and its gap to the best bound any method
found on that text. Methods: canonical alone, the one-token splits alone (Algorithm 1's first
samples), Algorithm 1 at each k, the beam at each W, the proxy at each k (an estimate, not a
bound: its recall can pass 100%) and, with --peer genlm, genlm-bytes at each K. Each method's
run is its own, on the same Marginalizer (context prefilled, canonical scored outside every clock).
Run: .venv/bin/python bench/study.py [--models gemma3-270m,smollm2-135m] [--peer genlm]
     [--short-limit N] [--long-limit N] [--device cuda] [--dtype auto]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from estimators import text_sets
from peers.genlm_peer import GenlmPeer

from marginal_core.beam_width import DEFAULT_BEAM_WIDTH, parse_width
from marginal_core.errors import TooManyPathsError
from marginal_core.estimators import Estimate, Marginalizer
from marginal_core.models import load_model
from marginal_core.models.cli import add_device_arguments


@dataclass(frozen=True)
class Budgets:
    """The settings each method runs at."""

    lattice: tuple[int, ...]
    beam: tuple[int | None, ...]  # None: the anytime beam
    proxy: tuple[int, ...]
    peer: tuple[int, ...]


@dataclass(frozen=True)
class Point:
    """One method at one setting on one text: what it found and what it cost."""

    method: str
    setting: str
    log_noncanonical: float
    seconds: float
    paths: int
    bound: bool = True


def _point(method: str, setting: str, e: Estimate, bound: bool = True) -> Point:
    return Point(method, setting, e.log_noncanonical, e.seconds, e.num_distinct, bound)


def run_text(m: Marginalizer, budgets: Budgets, seed: int, peer: GenlmPeer | None) -> list[Point]:
    """Every method at every setting on one text."""
    canonical = m.canonical_score()
    points = [Point("canonical", "-", -math.inf, canonical.seconds, 1)]
    splits = len(m.lattice.off_by_one())
    if splits:  # Algorithm 1's first samples are these splits: k = their count takes them alone
        points.append(_point("one-token splits", "all", m.lattice_estimate(splits, seed=seed)))
    points += [_point("Algorithm 1", f"k={k}", m.lattice_estimate(k, seed=seed)) for k in budgets.lattice]
    points += [_point("beam", f"W={w or 'auto'}", m.beam(w)) for w in budgets.beam]
    points += [_point("proxy", f"k={k}", m.proxy(k, seed=seed), bound=False) for k in budgets.proxy]
    for run in peer.run(m, budgets.peer) if peer else []:
        points.append(Point("genlm-bytes", f"K={run.width}", run.bound, run.seconds, run.num_noncanonical))
    return points


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _grouped(texts: list[list[Point]]) -> dict[tuple[str, str], list[tuple[int, Point]]]:
    """Each (method, setting)'s (text index, point) over the texts, in the order the methods ran
    (a text with a single path has no one-token splits, so groups can skip texts)."""
    groups: dict[tuple[str, str], list[tuple[int, Point]]] = defaultdict(list)
    for i, points in enumerate(texts):
        for p in points:
            groups[(p.method, p.setting)].append((i, p))
    return groups


def recall_table(model: str, texts: list[list[Point]], exact: list[float], canonical: list[float]) -> list[str]:
    """Rows of the short-text table: mean, worst and best recall of the non-canonical mass, the mean
    and worst gap of log p(x) (canonical included) to exact, mean seconds and paths per text."""
    rows = []
    for (method, setting), group in _grouped(texts).items():
        points = [p for _, p in group]
        recall = [math.exp(p.log_noncanonical - exact[i]) for i, p in group]
        gaps = [np.logaddexp(canonical[i], p.log_noncanonical) - np.logaddexp(canonical[i], exact[i]) for i, p in group]
        rows.append(
            f"| {model} | {method} | {setting} | {_pct(statistics.mean(recall))} | {_pct(min(recall))} "
            f"| {_pct(max(recall))} | {statistics.mean(gaps):+.1e} / {min(gaps):+.1e} "
            f"| {statistics.mean(p.seconds for p in points):.2f} | {statistics.mean(p.paths for p in points):.0f} |"
        )
    return rows


RECALL_HEAD = [
    "| model | method | setting | recall of non-canonical mass, mean % | worst % | best % "
    "| log p(x) gap to exact, mean / worst (nats) | seconds / text | paths / text |",
    "|---|---|---|---:|---:|---:|---:|---:|---:|",
]


def bounds_table(model: str, texts: list[list[Point]]) -> list[str]:
    """Rows of the long-text table: mean log bound, mean and worst gap to the best bound found on
    each text (bounds only: the proxy is not one), mean seconds and paths per text."""
    best = [max(p.log_noncanonical for p in points if p.bound) for points in texts]
    rows = []
    for (method, setting), group in _grouped(texts).items():
        points = [p for _, p in group]
        gaps = [p.log_noncanonical - best[i] for i, p in group]
        rows.append(
            f"| {model} | {method} | {setting} | {statistics.mean(p.log_noncanonical for p in points):.3f} "
            f"| {statistics.mean(gaps):+.3f} | {min(gaps):+.3f} "
            f"| {statistics.mean(p.seconds for p in points):.2f} | {statistics.mean(p.paths for p in points):.0f} |"
        )
    return rows


BOUNDS_HEAD = [
    "| model | method | setting | log non-canonical, mean | gap to best bound, mean (nats) | worst gap "
    "| seconds / text | paths / text |",
    "|---|---|---|---:|---:|---:|---:|---:|",
]


def versus(model: str, group: str, texts: list[list[Point]], ours: str, theirs: str) -> str:
    """On how many texts our beam's bound reaches the peer's and in no more time."""
    pairs = [(next(p for p in t if p.setting == ours and p.method == "beam"),
              next(p for p in t if p.setting == theirs and p.method == "genlm-bytes")) for t in texts]
    reach = sum(a.log_noncanonical >= b.log_noncanonical - 1e-6 for a, b in pairs)
    quicker = sum(a.seconds <= b.seconds for a, b in pairs)
    worst = min(a.log_noncanonical - b.log_noncanonical for a, b in pairs)
    seconds = sum(a.seconds for a, _ in pairs), sum(b.seconds for _, b in pairs)
    return (f"| {model} | {group} | {len(pairs)} | {reach}/{len(pairs)} | {worst:+.1e} | {quicker}/{len(pairs)} "
            f"| {seconds[0]:.1f} | {seconds[1]:.1f} |")


def _machine() -> str:
    load = os.getloadavg()[0]
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load {load:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="gemma3-270m,smollm2-135m")
    parser.add_argument("--short-limit", type=int, default=None, help="Q&A answers per model (default all)")
    parser.add_argument("--long-limit", type=int, default=5, help="sentences per model")
    parser.add_argument("--lattice-ks", default="10,100,1000")
    parser.add_argument("--beam-widths", default=f"1,4,16,{DEFAULT_BEAM_WIDTH},auto",
                        help="widths, auto for the anytime beam (default: 1,4,16,32,auto)")
    parser.add_argument("--proxy-ks", default="10,100,1000")
    parser.add_argument("--peer", choices=["genlm"], help="run genlm-bytes' beam too (own venv, built once)")
    parser.add_argument("--peer-widths", default="4,16")
    parser.add_argument("--exact-budget", type=int, default=5000, help="most paths a short text may have")
    parser.add_argument("--seed", type=int, default=0)
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
        print(f"{model}: {lm.device}, {str(lm.dtype).removeprefix('torch.')}", flush=True)
        peer = GenlmPeer(model, lm.tokenizer) if args.peer else None
        warm = Budgets(budgets.lattice[:1], budgets.beam[-1:], budgets.proxy[:1], budgets.peer[:1])
        run_text(Marginalizer(lm, "A warm-up text."), warm, args.seed, peer)  # kernels and caches, off the clock
        short, exact, canonical = [], [], []
        for context, text in text_sets()["qa"][: args.short_limit]:
            m = Marginalizer(lm, text, context)
            try:
                x = m.exact(budget=args.exact_budget).log_noncanonical
            except TooManyPathsError:
                continue
            if math.isfinite(x):  # a single path has no non-canonical mass to recall
                short.append(run_text(m, budgets, args.seed, peer))
                exact.append(x)
                canonical.append(m.canonical_score().log_p)
                print(f"  short {len(short)}: {text!r}", flush=True)
        long = []
        for context, text in text_sets()["sentences"][: args.long_limit]:
            long.append(run_text(Marginalizer(lm, text, context), budgets, args.seed, peer))
            print(f"  long {len(long)}: {text[:40]!r}", flush=True)
        if peer:
            peer.close()
        report(model, short, exact, canonical, long, budgets)
    print(f"\nmachine at the end: {_machine()}; wall {time.perf_counter() - started:.0f} s")


def report(model: str, short: list[list[Point]], exact: list[float], canonical: list[float],
           long: list[list[Point]], budgets: Budgets) -> None:
    """One model's tables, printed as soon as its runs end."""
    if short:
        print("\nShort texts, against exact (the proxy is an estimate, not a bound):")
        print("\n".join(RECALL_HEAD + recall_table(f"{model} ({len(short)} answers)", short, exact, canonical)))
    if long:
        print("\nLonger texts, each bound against seconds (gap: its bound minus the best bound found on the text):")
        print("\n".join(BOUNDS_HEAD + bounds_table(f"{model} ({len(long)} sentences)", long)))
    if budgets.peer and (None in budgets.beam or DEFAULT_BEAM_WIDTH in budgets.beam):
        ours, theirs = f"W={'auto' if None in budgets.beam else DEFAULT_BEAM_WIDTH}", f"K={max(budgets.peer)}"
        print(f"\nOur beam {ours} against genlm-bytes {theirs}, text by text:")
        print("| model | texts | n | bound >= genlm's | worst gap (nats) | seconds <= genlm's | beam s (total) "
              "| genlm s (total) |\n|---|---|---:|---:|---:|---:|---:|---:|")
        print("\n".join(versus(model, name, texts, ours, theirs)
                        for name, texts in (("Q&A answers", short), ("sentences", long)) if texts), flush=True)


if __name__ == "__main__":
    main()

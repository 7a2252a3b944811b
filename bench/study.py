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
import statistics
import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from bench.estimators import text_sets
from bench.paper_tables import table1_sentences
from bench.peers.genlm_peer import GenlmPeer
from marginal_core import beam as beam_module
from marginal_core.beam_width import DEFAULT_BEAM_WIDTH, parse_width
from marginal_core.errors import TooManyPathsError
from marginal_core.estimators import Estimate, Marginalizer
from marginal_core.models import load_model
from marginal_core.models.model_commands import add_device_arguments


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
    trace: tuple[tuple[float, float], ...] = ()  # (seconds, bound) as the run went; else its end alone
    found: dict[tuple[int, ...], float] = field(default_factory=dict, compare=False)  # path: log p
    note: str = ""  # the anytime beam's widths, the last one pruned

    @property
    def name(self) -> str:
        return f"{self.method} {self.setting}"

    def seconds_to(self, target: float) -> float | None:
        """The seconds the run took to reach a bound of target, None if it never did."""
        return next((s for s, b in self.trace or ((self.seconds, self.log_noncanonical),) if b >= target), None)


def _found(paths: list[tuple[int, ...]], log_p: np.ndarray) -> dict[tuple[int, ...], float]:
    return dict(zip(map(tuple, paths), np.asarray(log_p, dtype=float).tolist(), strict=True))


def _point(method: str, setting: str, e: Estimate, bound: bool = True) -> Point:
    trace = ()
    if e.method == "beam":  # checkpoints count the paths completed when the walk yielded
        trace = tuple((s, float(e.running[n - 1])) for n, s in e.run.checkpoints if n)
    note = ",".join(f"{r.width}" + ("" if r.pruned else " exact") for r in e.rounds)
    return Point(method, setting, e.log_noncanonical, e.seconds, e.num_distinct, bound, trace,
                 _found(e.paths.tolist(), e.log_p) if bound else {}, note)


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
        other = [p != m.lattice.canonical for p in run.paths]
        found = _found([p for p, o in zip(run.paths, other, strict=True) if o], run.log_p[np.array(other, dtype=bool)])
        points.append(Point("genlm-bytes", f"K={run.width}", run.bound, run.seconds, run.num_noncanonical,
                            found=found))
    return points


HARD = Path(__file__).with_name("hard_sentences.txt")


def long_texts(limit: int, paper: int) -> list[tuple[str, str | None, str]]:
    """(set, context, text) of the longer texts, at most limit of each set, taken in turn from each
    set (so that a run cut short by --budget-s still has some of each): the harder sentences of
    bench/hard_sentences.txt, the bench sentences, and paper Table 1's ARC question texts of about
    50 and 100 characters (paper of each, alternating)."""
    hard = [line.strip() for line in HARD.read_text(encoding="utf-8").splitlines() if line.strip()]
    arc = [q for pair in zip(*(table1_sentences(paper)[n] for n in (50, 100)), strict=True) for _, q in pair] \
        if paper else []
    sets = {"hard": hard[:limit], "bench": [t for _, t in text_sets()["sentences"]][:limit], "ARC": arc[:limit]}
    turns = max(map(len, sets.values()))
    return [(name, None, texts[i]) for i in range(turns) for name, texts in sets.items() if i < len(texts)]


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


TOLERANCE = 0.01  # nats: "reaches" a bound within this


def _find(points: list[Point], name: str) -> Point | None:
    return next((p for p in points if p.name == name), None)


def versus(model: str, group: str, texts: list[list[Point]], ours: str, theirs: str) -> str:
    """On how many texts our beam's bound reaches the peer's (within 0.01 nats), in no more time (its
    whole run), both, and by the peer's seconds (anytime: the bound it had when the peer finished,
    which a --time-budget of the peer's seconds returns), and the worst gap."""
    pairs = [(_find(t, f"beam {ours}"), _find(t, f"genlm-bytes {theirs}")) for t in texts]
    reach = [a.log_noncanonical >= b.log_noncanonical - TOLERANCE for a, b in pairs]
    quicker = [a.seconds <= b.seconds for a, b in pairs]
    by_then = [(s := a.seconds_to(b.log_noncanonical - TOLERANCE)) is not None and s <= b.seconds for a, b in pairs]
    worst = min(a.log_noncanonical - b.log_noncanonical for a, b in pairs)
    seconds = sum(a.seconds for a, _ in pairs), sum(b.seconds for _, b in pairs)
    both = sum(r and q for r, q in zip(reach, quicker, strict=True))
    n = len(pairs)
    return (f"| {model} | {group} | {n} | {sum(reach)}/{n} | {worst:+.3f} | {sum(quicker)}/{n} | {both}/{n} "
            f"| {sum(by_then)}/{n} | {seconds[0]:.1f} | {seconds[1]:.1f} |")


def _best(points: list[Point]) -> Point:
    return max((p for p in points if p.bound), key=lambda p: p.log_noncanonical)


def shortfall_table(model: str, texts: list[list[Point]]) -> list[str]:
    """Per method: on how many texts its bound is more than 0.1 and more than 1 nat below the best
    bound found on the text, and how long it takes to come within 0.01 nats of it."""
    best = [_best(points).log_noncanonical for points in texts]
    rows = []
    for (method, setting), group in _grouped(texts).items():
        if not group[0][1].bound:
            continue
        gaps = [best[i] - p.log_noncanonical for i, p in group]
        reach = [p.seconds_to(best[i] - TOLERANCE) for i, p in group]
        got = [s for s in reach if s is not None]
        median = f"{statistics.median(got):.1f}" if got else "-"
        rows.append(f"| {model} | {method} | {setting} | {len(group)} | {sum(g > 0.1 for g in gaps)} "
                    f"| {sum(g > 1 for g in gaps)} | {-max(gaps):+.3f} | {len(got)} | {median} "
                    f"| {statistics.mean(p.seconds for _, p in group):.1f} |")
    return rows


SHORTFALL_HEAD = [
    "| model | method | setting | texts | > 0.1 nat below best | > 1 nat below | worst gap (nats) "
    "| within 0.01 of best | median s to get there | mean s / text |",
    "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
]


def _cell(p: Point | None, best: float) -> str:
    if p is None:
        return "-"
    note = f", W {p.note}" if p.note else ""
    return f"{p.log_noncanonical - best:+.3f} ({p.seconds:.1f} s{note})"


def per_text_table(sets: list[str], texts: list[list[Point]], names: list[str], labels: list[str]) -> list[str]:
    """A row per text: the best bound and the method that found it, then each named method's gap to
    it (nats) and seconds."""
    rows = ["| set | text | best log bound | found by | " + " | ".join(names) + " |",
            "|---|---|---:|---|" + "---:|" * len(names)]
    for name, label, points in zip(sets, labels, texts, strict=True):
        best = _best(points)
        cells = " | ".join(_cell(_find(points, n), best.log_noncanonical) for n in names)
        rows.append(f"| {name} | {label} | {best.log_noncanonical:.3f} | {best.name} | {cells} |")
    return rows


def _piece(m: Marginalizer, token: int) -> str:
    vocab = m.lattice.vocab
    if vocab.surfaces[token] is None and token in vocab.byte_tokens:
        return f"<0x{vocab.byte_tokens.index(token):02X}>"
    return vocab.surface(token).decode("utf-8", "backslashreplace")


def _spans(m: Marginalizer, path: tuple[int, ...]) -> list[tuple[int, int, int]]:
    """(start byte, end byte, token) of each token of a path."""
    spans, at = [], 0
    for t in path:
        n = len(m.lattice.path_bytes((t,)))
        spans.append((at, at + n, t))
        at += n
    return spans


def _difference(m: Marginalizer, path: tuple[int, ...]) -> str:
    """Where a tokenization leaves the canonical one: its tokens there, and the canonical ones."""
    ours, theirs = _spans(m, path), _spans(m, tuple(m.lattice.canonical))
    same = {(a, b) for a, b, _ in ours} & {(a, b) for a, b, _ in theirs}
    regions: list[list[int]] = []  # runs of our token indices off the canonical spans
    for i, (a, b, _) in enumerate(ours):
        if (a, b) not in same:
            if regions and regions[-1][-1] == i - 1:
                regions[-1].append(i)
            else:
                regions.append([i])
    out = []
    for region in regions:
        lo, hi = ours[region[0]][0], ours[region[-1]][1]
        mine = "·".join(_piece(m, ours[i][2]) for i in region)
        canon = "·".join(_piece(m, t) for a, b, t in theirs if lo <= a and b <= hi)
        out.append(f"`{mine}` for `{canon}`".replace("\n", " "))
    return "; ".join(out)


@contextmanager
def traced_choices(log: list[tuple[tuple[int, ...], int, float, bool]]):
    """While open, every beam step appends (prefix tokens, automaton state, log p, extended?) for
    each prefix that competed for a state's budget (bench only: wraps marginal_core.beam._choose)."""
    choose = beam_module._choose

    def traced(beam, lp, tables, extended, width):
        complete, chosen, dropped = choose(beam, lp, tables, extended, width)
        tok, nxt = tables.tokens[beam.state], tables.next_state[beam.state]
        valid = torch.isfinite(lp) & (nxt >= 0)
        rows, cols = (valid & ~tables.final[nxt.clamp(min=0)]).nonzero(as_tuple=True)
        kept = set(zip(chosen[0].tolist(), chosen[1].tolist(), strict=True))
        prefixes = beam.tokens[rows].tolist()
        for r, c, prefix, state, value in zip(rows.tolist(), cols.tolist(), prefixes, nxt[rows, cols].tolist(),
                                              (beam.log_p[rows] + lp[rows, cols]).tolist(), strict=True):
            log.append(((*prefix, int(tok[r, c])), state, value, (r, c) in kept))
        return complete, chosen, dropped

    beam_module._choose = traced
    try:
        yield
    finally:
        beam_module._choose = choose


def _pruned_at(log: list[tuple[tuple[int, ...], int, float, bool]], path: tuple[int, ...]) -> str:
    """Where a beam dropped a path: its first pruned prefix, and what the state's budget went to."""
    seen = {entry[0]: entry for entry in log}
    for n in range(1, len(path)):
        entry = seen.get(path[:n])
        if entry is None:
            return f"prefix of {n} tokens never reached"
        if not entry[3]:
            _, state, value, _ = entry
            rivals = [(len(e[0]), e[2]) for e in log if e[1] == state and e[3]]
            earlier = [v for k, v in rivals if k < n]
            weaker = sum(v < value for k, v in rivals)
            return (f"pruned after {n} tokens (log p {value:.2f}); the state's {len(rivals)} slots went "
                    f"{len(earlier)} to prefixes of fewer tokens; {weaker} of the {len(rivals)} were less probable")
    return "not pruned"


def worst_case(model: str, m: Marginalizer, points: list[Point], weaker: list[str], width: int, top: int = 8) -> None:
    """The best method's tokenizations that the weaker methods missed, largest first, with their
    share of the best bound's mass, and where the beam of the given width pruned each."""
    best = _best(points)
    print(f"\nWorst case, {model}: {m.text!r}; best bound {best.log_noncanonical:.3f} by {best.name} "
          f"({len(best.found)} paths)")
    log: list[tuple[tuple[int, ...], int, float, bool]] = []
    with traced_choices(log):
        m.beam(width)
    for name in weaker:
        other = _find(points, name)
        if other is None:
            continue
        missed = sorted(((lp, p) for p, lp in best.found.items() if p not in other.found), reverse=True)
        share = math.exp(np.logaddexp.reduce([lp for lp, _ in missed]) - best.log_noncanonical) if missed else 0.0
        print(f"\n{name}: bound {other.log_noncanonical - best.log_noncanonical:+.3f} nats from the best, "
              f"{len(other.found)} paths; it missed {len(missed)} of the best's, {100 * share:.1f}% of its mass. "
              f"Largest missed (pruning: the W = {width} beam's, replayed):")
        print("| share of best mass % | tokens (canonical) | where it leaves the canonical tokenization "
              f"| W = {width} beam |\n|---:|---:|---|---|")
        for lp, p in missed[:top]:
            print(f"| {100 * math.exp(lp - best.log_noncanonical):.2f} | {len(p)} ({len(m.lattice.canonical)}) "
                  f"| {_difference(m, p)} | {_pruned_at(log, p)} |")


def _machine() -> str:
    load = os.getloadavg()[0]
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load {load:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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


def _names(budgets: Budgets) -> list[str]:
    """The methods of the per-text table: Algorithm 1 at its largest k, the default beam, the anytime
    beam, genlm at its widest K (those that ran)."""
    names = [f"Algorithm 1 k={max(budgets.lattice)}"] if budgets.lattice else []
    names += [f"beam W={DEFAULT_BEAM_WIDTH}"] * (DEFAULT_BEAM_WIDTH in budgets.beam)
    names += ["beam W=auto"] * (None in budgets.beam)
    return names + ([f"genlm-bytes K={max(budgets.peer)}"] if budgets.peer else [])


def report(model: str, short: list[list[Point]], exact: list[float], canonical: list[float],
           long: list[list[Point]], budgets: Budgets) -> None:
    """One model's tables, printed as soon as its runs end."""
    if short:
        print("\nShort texts, against exact (the proxy is an estimate, not a bound):")
        print("\n".join(RECALL_HEAD + recall_table(f"{model} ({len(short)} answers)", short, exact, canonical)))
    if long:
        print("\nLonger texts, each bound against seconds (gap: its bound minus the best bound found on the text):")
        print("\n".join(BOUNDS_HEAD + bounds_table(f"{model} ({len(long)} sentences)", long)))
    groups = [(name, texts) for name, texts in (("Q&A answers", short), ("longer texts", long)) if texts]
    print("\nHow often each method falls short of the best bound found on the text, and the seconds it "
          "needs to come within 0.01 nats of it (a beam: at the step its bound got there):")
    print("\n".join(SHORTFALL_HEAD + [row for name, texts in groups for row in shortfall_table(f"{model}, {name}", texts)]))
    if budgets.peer and (None in budgets.beam or DEFAULT_BEAM_WIDTH in budgets.beam):
        ours, theirs = f"W={'auto' if None in budgets.beam else DEFAULT_BEAM_WIDTH}", f"K={max(budgets.peer)}"
        print(f"\nOur beam {ours} against genlm-bytes {theirs}, text by text (reaches: bound >= genlm's - 0.01 nats):")
        print("| model | texts | n | reaches genlm's | worst gap (nats) | seconds <= genlm's | both "
              "| reached by genlm's seconds | beam s (total) | genlm s (total) |\n"
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        print("\n".join(versus(model, name, texts, ours, theirs) for name, texts in groups), flush=True)


def explain(model: str, lm, cases: list[tuple[str, str | None, str]], long: list[list[Point]], budgets: Budgets) -> None:
    """The per-text table of the longer texts, then the worst case: the text where Algorithm 1 at
    its largest k or the default beam falls furthest below the best bound, and what they missed."""
    if not long:
        return
    names = _names(budgets)
    labels = [f"{text[:38]}…" if len(text) > 39 else text for _, _, text in cases]
    print(f"\nPer text, {model}: each method's bound minus the best (nats), and its seconds:")
    print("\n".join(per_text_table([name for name, _, _ in cases], long, names, labels)))
    weaker = [n for n in names[:2] if not n.endswith("auto")]

    def shortfall(points: list[Point]) -> float:
        return _best(points).log_noncanonical - min(_find(points, n).log_noncanonical for n in weaker)

    if weaker:
        i = max(range(len(long)), key=lambda i: shortfall(long[i]))
        _, context, text = cases[i]
        worst_case(model, Marginalizer(lm, text, context), long[i], weaker, DEFAULT_BEAM_WIDTH)


if __name__ == "__main__":
    main()

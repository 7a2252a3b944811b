"""The study's report: the tables it prints for each model from the points.

Recall against exact, bounds against the best one found, shortfalls, the beam against
genlm-bytes, per text, then the worst case (bench.study.worst_case).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict

import numpy as np

from bench.study.points import Budgets, Point, best_point, find_point
from bench.study.worst_case import worst_case
from marginal_core.estimators.beam_width import DEFAULT_BEAM_WIDTH
from marginal_core.estimators.marginalizer import Marginalizer


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


def versus(model: str, group: str, texts: list[list[Point]], ours: str, theirs: str) -> str:
    """On how many texts our beam's bound reaches the peer's (within 0.01 nats), in no more time (its
    whole run), both, and by the peer's seconds (anytime: the bound it had when the peer finished,
    which a --time-budget of the peer's seconds returns), and the worst gap."""
    pairs = [(find_point(t, f"beam {ours}"), find_point(t, f"genlm-bytes {theirs}")) for t in texts]
    reach = [a.log_noncanonical >= b.log_noncanonical - TOLERANCE for a, b in pairs]
    quicker = [a.seconds <= b.seconds for a, b in pairs]
    by_then = [(s := a.seconds_to(b.log_noncanonical - TOLERANCE)) is not None and s <= b.seconds for a, b in pairs]
    worst = min(a.log_noncanonical - b.log_noncanonical for a, b in pairs)
    seconds = sum(a.seconds for a, _ in pairs), sum(b.seconds for _, b in pairs)
    both = sum(r and q for r, q in zip(reach, quicker, strict=True))
    n = len(pairs)
    return (f"| {model} | {group} | {n} | {sum(reach)}/{n} | {worst:+.3f} | {sum(quicker)}/{n} | {both}/{n} "
            f"| {sum(by_then)}/{n} | {seconds[0]:.1f} | {seconds[1]:.1f} |")


def shortfall_table(model: str, texts: list[list[Point]]) -> list[str]:
    """Per method: on how many texts its bound is more than 0.1 and more than 1 nat below the best
    bound found on the text, and how long it takes to come within 0.01 nats of it."""
    best = [best_point(points).log_noncanonical for points in texts]
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
        best = best_point(points)
        cells = " | ".join(_cell(find_point(points, n), best.log_noncanonical) for n in names)
        rows.append(f"| {name} | {label} | {best.log_noncanonical:.3f} | {best.name} | {cells} |")
    return rows


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
        return best_point(points).log_noncanonical - min(find_point(points, n).log_noncanonical for n in weaker)

    if weaker:
        i = max(range(len(long)), key=lambda i: shortfall(long[i]))
        _, context, text = cases[i]
        worst_case(model, Marginalizer(lm, text, context), long[i], weaker, DEFAULT_BEAM_WIDTH)

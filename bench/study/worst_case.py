"""The study's worst case: the tokenizations the best method found that a weaker one missed.

For each: where it leaves the canonical tokenization, and where the beam pruned it (its steps replayed).
"""

from __future__ import annotations

import math
from contextlib import contextmanager

import numpy as np
import torch

from bench.study.points import Point, best_point, find_point
from marginal_core.estimators import beam as beam_module
from marginal_core.estimators.marginalizer import Marginalizer


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
    each prefix that competed for a state's budget (bench only: wraps marginal_core.estimators.beam._choose)."""
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
    best = best_point(points)
    print(f"\nWorst case, {model}: {m.text!r}; best bound {best.log_noncanonical:.3f} by {best.name} "
          f"({len(best.found)} paths)")
    log: list[tuple[tuple[int, ...], int, float, bool]] = []
    with traced_choices(log):
        m.beam(width)
    for name in weaker:
        other = find_point(points, name)
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

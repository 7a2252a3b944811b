"""The study's measurement: its texts, and each method's Point on a text.

A Point is the bound a method found, its seconds and paths, how its bound grew and the paths it found.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.estimators import text_sets
from bench.paper_tables.runs import table1_sentences
from bench.peers.genlm_peer import GenlmPeer
from marginal_core.estimators.estimate_result import Estimate
from marginal_core.estimators.marginalizer import Marginalizer


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


HARD = Path(__file__).resolve().parents[1] / "hard_sentences.txt"


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


def find_point(points: list[Point], name: str) -> Point | None:
    return next((p for p in points if p.name == name), None)


def best_point(points: list[Point]) -> Point:
    return max((p for p in points if p.bound), key=lambda p: p.log_noncanonical)

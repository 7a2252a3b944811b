"""Prefix probabilities of a text at every byte, summed over tokenizations, by a best-first search
in rounds (docs/design.md, "Surprisal"): each round one batched trie pass over a set of prefixes
(token paths ending at lattice nodes), chosen without running the model on them.

A scored prefix adds, for each byte j ahead of its node, its log p plus the log mass of the
tokens that cover the bytes to j (``heads``), and its next-byte masses; it leaves **exits**, the
arcs from its node whose extension is not scored, each with its mass. The prefixes below an exit
add at most its mass to any P(s<j) past the exit's node, so ``upper(j) = lower(j) +`` the mass of
the exits ending before j, after every round and after a Stop (``tree``).

Round 0 is every prefix of the canonical tokenization and each one-token split's prefixes up to
where it rejoins the canonical path, as one trie. Each later round scores the heaviest exits, up
to a number of rows that doubles each round, within a server's cap (``ways``: ways on). What the
tolerance is about is the search's goal: the regions of a text (:class:`Regions`) or the byte
after it (:class:`NextByte`). A search ends as ``clock.why_ended`` says.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from marginal_core.lattice.graph import Lattice
from marginal_core.lm.adapter import LM
from marginal_core.lm.contexts import ContextState
from marginal_core.search.clock import Deadline, SearchClock, why_ended
from marginal_core.search.counts import bounding_pays, check_exact
from marginal_core.search.ending import Ended
from marginal_core.search.feeding import HeadFeeder
from marginal_core.search.heads import node_tables
from marginal_core.search.kv import KeptKV
from marginal_core.search.masses import ByteStep, PrefixMasses, interval_widths
from marginal_core.search.memory import PrefixMemory
from marginal_core.search.settings import SearchSettings
from marginal_core.search.tree import NodeArrays, ScoredTree
from marginal_core.search.ways import Step, Ways, with_ways

FIRST_ROWS = 64  # the most exits the first round after round 0 scores; each round doubles it
# An exit lighter than this beside the prefix probability at its node (or below a bounded prefix)
# gets a bounding head: its share of any P(s<j) is too small to count but for the certificate.
BOUND_BELOW = 1e-7


@dataclass(frozen=True)
class Regions:
    """The tolerance is on the surprisal intervals of the regions between ``cuts`` (lattice bytes,
    0 and the end included; None: every byte). ``exact`` scores every prefix; ``bound_below``: the
    relative mass below which an exit gets a bounding head (0: never; None: BOUND_BELOW where
    bounding heads pay on the model)."""

    cuts: Sequence[int] | np.ndarray | None = None
    exact: bool = False
    bound_below: float | None = None
    past_end: ClassVar[bool] = False

    def measure(self, masses: PrefixMasses, cuts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each region's point value (nats) and interval width."""
        return masses.lower[cuts[:-1]] - masses.lower[cuts[1:]], interval_widths(masses.lower, masses.upper, cuts)


@dataclass(frozen=True)
class NextByte:
    """Past the text's end: the complete paths are prefixes too, and the tolerance is on the next
    byte's 257 probabilities (``ByteStep``). No bounding heads: a bounded prefix's mass would stay
    open at the last byte."""

    exact: bool = False
    bound_below: ClassVar[float] = 0.0
    past_end: ClassVar[bool] = True

    def measure(self, masses: PrefixMasses, cuts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each outcome's point value and interval width."""
        step = ByteStep.past_end(masses)
        return step.point, step.upper - step.lower


Goal = Regions | NextByte


def search_rounds(lm: LM, lattice: Lattice, context: Sequence[int] | ContextState, settings: SearchSettings,
                  goal: Goal = Regions(), memory: PrefixMemory | None = None,
                  deadline: Deadline | None = None) -> Iterator[PrefixMasses]:
    """The bounds after every round of the search; the last is final (``ended`` set). ``memory``:
    what searches of texts this one begins with kept, under this model and context (their
    prefixes are this search's round 0 too); it keeps this search's (its KV store replaces
    ``settings.kv_bytes``). ``deadline``: the time this search lies within (a call's; default its
    own, from the settings' time budget)."""
    if goal.exact:
        check_exact(lattice, settings.budget)
    search = _Search(lm, lattice, lm.state_of(context), settings, goal, memory, deadline)
    yield from search.rounds()


class _Search:
    """One search's rounds: its tree, feeder, clock and the choice of each round's prefixes."""

    def __init__(self, lm: LM, lattice: Lattice, ctx: ContextState, settings: SearchSettings, goal: Goal,
                 memory: PrefixMemory | None, deadline: Deadline | None) -> None:
        self.settings, self.goal, self.memory = settings, goal, memory
        self.clock = SearchClock(settings.tolerance, Deadline(settings.time_budget, deadline))
        bound_below = goal.bound_below
        if bound_below is None:
            bound_below = BOUND_BELOW if bounding_pays(lm) else 0.0
        tables = node_tables(lattice, lm.device)
        arrays = NodeArrays(lattice, *(t.cpu().numpy() for t in (tables.tokens, tables.next_state, tables.width,
                                                                  tables.final)))
        self.tree = ScoredTree(lattice, arrays, goal.past_end, 0.0 if goal.exact else bound_below)
        kv = memory.kv if memory is not None else KeptKV(settings.kv_bytes)
        self.feeder = HeadFeeder(lm, ctx, tables, self.tree, memory, kv)
        self.ways = Ways(lattice, lm.text_tokenizer, arrays.node, arrays.next, arrays.width, arrays.final, arrays.col)
        self.cuts = np.asarray(goal.cuts if isinstance(goal, Regions) and goal.cuts is not None
                               else range(lattice.end + 1), dtype=np.int64)
        self.first_splits: list[int] = []  # round 0's splits of the first canonical token (prefix ids)
        self.per_row: float | None = None  # seconds a prefix took in the last round (round 0 aside)

    def rounds(self) -> Iterator[PrefixMasses]:
        """Score round 0, then the heaviest exits round after round, until the search ends."""
        settings, tree, clock = self.settings, self.tree, self.clock
        started = clock.deadline.started
        steps, rows = self.seed(), FIRST_ROWS
        widths: np.ndarray | None = None
        while True:
            began = clock.deadline.seconds()
            pids = tree.open(steps)
            tree.close(pids, steps, self.feeder.heads(pids, settings.progress))
            if tree.rounds > 1:  # round 0 scores the whole canonical tokenization: not a later round's rate
                self.per_row = (clock.deadline.seconds() - began) / max(len(steps), 1)
            now = tree.masses(started, False)
            before = widths
            values, widths = self.goal.measure(now, self.cuts)
            clock.round(now.seconds, values, widths)
            steps, room = self.next_steps(now, rows)
            rows *= 2
            # past the end, a round may leave a heavy exit's interval as wide as before: only the widths count
            ended = why_ended(self.goal.exact, bool(steps), room > 0, widths, None if self.goal.past_end else before,
                              clock, settings.stopped)
            if ended is not None:
                yield self._timed(tree.masses(started, True), ended)
                return
            yield self._timed(now, None)

    def next_steps(self, now: PrefixMasses, rows: int) -> tuple[list[Step], int]:
        """The next round's prefixes (at most ``rows``, the server's cap and what the time left
        holds) and the prefix budget's room left. Every exit can widen the last region's bottom
        end against the text's end (the mass below an exit may run through every byte after it):
        the rest must be small beside P(s<end)."""
        settings, tree = self.settings, self.tree
        room = settings.budget - len(tree)
        if self.goal.exact:
            return tree.choose(None, -math.inf), room
        slack = math.log(math.expm1(settings.tolerance) / 4) + float(now.lower[-1])
        cap = self.clock.rows(now.seconds, max(0, min(rows, settings.max_rows, room)), self.per_row)
        steps = tree.choose(cap, slack)
        if self.goal.past_end:
            return self.ways_on(steps, cap - len(steps)), room
        if tree.rounds == 1:
            return self.first_ways(steps, min(settings.max_rows, room) - len(steps)), room
        return steps, room

    def seed(self) -> list[Step]:
        """Round 0: the empty prefix, the prefixes the memory kept, every prefix of the canonical
        tokenization, and each one-token split's two prefixes that leave it (the split's first
        token, and both where the second does not end the text), parents first. A split's way on
        along the canonical tokens is left to the rounds after, by mass: it would make round 0
        quadratic in the text's length; only the first token's heavy splits go on, in round 1
        (``first_ways``)."""
        tree, lattice, steps = self.tree, self.tree.lattice, [(-1, -1)]
        a = tree.a
        ids: dict[tuple[int, ...], tuple[int, int]] = {(): (0, 0)}  # a path -> its prefix id and node state

        def add(path: list[int]) -> None:
            """Every prefix of path that ends before the end of the text (or at it, past the end)."""
            for i in range(1, len(path) + 1):
                if tuple(path[:i]) in ids:
                    continue
                parent, state = ids[tuple(path[: i - 1])]
                col = a.col.get((state, path[i - 1]))
                if col is None or a.final[a.next[state, col]] and not tree.past_end:
                    return  # a kept path this lattice trimmed, or one that ends the text
                ids[tuple(path[:i])] = (len(steps), int(a.next[state, col]))
                steps.append((parent, col))

        for path in self.memory.paths() if self.memory is not None else ():
            add(list(path))
        canonical, nodes = list(lattice.canonical), list(lattice.canonical_nodes)
        add(canonical)
        tree.canonical_covers = dict.fromkeys(ids[tuple(canonical[:i])][0] for i in range(len(canonical)))
        for i, (u, v) in enumerate(zip(nodes[:-1], nodes[1:], strict=True)):
            for arc in lattice.out_arcs(u):
                m = int(lattice.arc_end[arc])
                second = lattice.out_arcs(m) if m < v else range(0)
                for b in (b for b in second if int(lattice.arc_end[b]) == v):
                    add([*canonical[:i], int(lattice.arc_token[arc]), int(lattice.arc_token[b])])
                    if i == 0 and (split := ids.get((int(lattice.arc_token[arc]), int(lattice.arc_token[b])))):
                        self.first_splits.append(split[0])
        return steps

    def ways_on(self, steps: list[Step], room: int) -> list[Step]:
        """Past the end: the chosen exits, then, heaviest first while ``room`` lasts, each one's way
        on to the end (docs/design.md, "Ways on")."""
        tree = self.tree
        order = sorted(range(len(steps)), key=lambda i: -tree.exits[steps[i]])
        starts = [(len(tree) + i, int(tree.a.next[tree.state[steps[i][0]], steps[i][1]])) for i in order]
        return with_ways(steps, starts, len(tree), tree.scored, self.ways, room, tree.past_end)

    def first_ways(self, steps: list[Step], room: int) -> list[Step]:
        """After round 0, the chosen exits, then the first token's splits on to the end while
        ``room`` lasts (docs/design.md, "The search": after the context their mass runs on)."""
        starts = [(p, self.tree.state[p]) for p in self.first_splits]
        return with_ways(steps, starts, len(self.tree), self.tree.scored, self.ways, room, self.tree.past_end)

    def _timed(self, masses: PrefixMasses, ended: Ended | None) -> PrefixMasses:
        """The bounds with the clock's measures, why the search ended, its work and its KV peak."""
        clock = self.clock
        return replace(masses, settled_at=clock.settled_at, ends_at=clock.deadline.ends_at, ended=ended,
                       cancelled=ended == Ended.STOPPED, fed=self.feeder.stats.tokens_fed,
                       kv_peak_bytes=self.feeder.kv.peak_bytes)

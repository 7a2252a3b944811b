"""What comes next after a prompt, as whole characters (docs/design.md, "What comes next"): the
byte steps of the prompt's state (``PrefixState.steps``) composed into characters, a character of
several bytes by one more step on the prompt's lattice extended by its first bytes, beside the
canonical and healed token views. One driver serves the table and the continuations."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from marginal_core.search.char_keys import healed_masses, key_groups, key_masses, total_variation
from marginal_core.search.clock import Deadline
from marginal_core.search.ending import Ended
from marginal_core.search.masses import NO_BYTE, ByteStep, PrefixMasses
from marginal_core.search.next.results import (
    CERTIFIED,
    Candidate,
    NextCharacters,
    character_rows,
    finished,
)
from marginal_core.search.state import PrefixState, Steps


@dataclass
class Call:
    """One call's run over the prompt's byte steps: its ``deadline`` (the one clock every step's
    search lies within) and, for a continuation, that a step pauses once its values have settled
    (``settle``) or, greedy, once its most probable byte is certified (``top``)."""

    deadline: Deadline
    settle: bool = False
    top: bool = False

    def over(self, p: PrefixState) -> bool:
        """Whether Stop was pressed or the call's seconds are spent."""
        return p.settings.stopped() or self.deadline.over()

    def enough(self, step: ByteStep, masses: PrefixMasses | None) -> bool:
        """Whether a step may pause here: its values settled, or, greedy, its top byte certified."""
        return _settled(masses) or (self.top and _top_certified(step))


def _top_certified(step: ByteStep) -> bool:
    """Whether the most probable outcome's lower bound passes every other outcome's upper bound."""
    top = int(np.argmax(step.point))
    return bool(step.lower[top] > np.delete(step.upper, top).max())


def _settled(masses: PrefixMasses | None) -> bool:
    """Whether a step's values have settled (an empty prompt's first step is exact)."""
    return masses is None or masses.settled_at is not None


@dataclass
class Found:
    """The byte steps so far: the first (``b""``) and, for each character prefix resolved, the
    step after it; which have settled; each step's rounds and prefixes scored; the first step's
    end (``ended``, ``settled_at``)."""

    steps: dict[bytes, ByteStep] = field(default_factory=dict)
    settled: set[bytes] = field(default_factory=set)
    work: dict[bytes, tuple[int, int]] = field(default_factory=dict)
    ended: Ended | None = None
    settled_at: float | None = None
    final: bool = False

    @property
    def rounds(self) -> int:
        return sum(r for r, _ in self.work.values())

    @property
    def scored(self) -> int:
        return sum(n for _, n in self.work.values())

    def add(self, prefix: bytes, step: ByteStep, masses: PrefixMasses | None) -> None:
        """A step's latest round."""
        self.steps[prefix] = step
        (self.settled.add if _settled(masses) else self.settled.discard)(prefix)
        if masses is not None:
            self.work[prefix] = (masses.rounds, masses.scored)
        if not prefix:
            self.ended, self.settled_at = (masses.ended, masses.settled_at) if masses is not None else (Ended.EXACT, 0.0)

    def chars(self) -> dict[bytes, Candidate]:
        """Every outcome found (b"": no byte; a prefix not resolved: every character it begins),
        each with the product of its bytes' probabilities and of their intervals' ends."""
        first, whole = self.steps[b""], b"" in self.settled
        out = {b"": (float(first.point[NO_BYTE]), float(first.lower[NO_BYTE]), float(first.upper[NO_BYTE]), whole)}
        todo = [(b"", 1.0, 1.0, 1.0, whole)]
        while todo:
            prefix, point, lower, upper, settled = todo.pop()
            step = self.steps[prefix]
            lo, hi = (0, 256) if not prefix else (0x80, 0xC0)  # after a lead byte: its continuation bytes
            for c in (lo + np.flatnonzero(step.point[lo:hi] > 0)).tolist():
                b = prefix + bytes([c])
                value = (point * float(step.point[c]), lower * float(step.lower[c]), min(1.0, upper * float(step.upper[c])))
                after = self.steps.get(b)
                if finished(b) or after is None or not after.point[0x80:0xC0].any():
                    out[b] = (*value, settled)  # a prefix whose step found no continuation yet stays a range
                else:
                    todo.append((b, *value, settled and b in self.settled))
        return out

    def unresolved(self, k: int) -> bytes | None:
        """The most probable of the k most probable outcomes that is not a whole character yet and
        has no byte step (None: the k are whole, or their steps are under way)."""
        chars = self.chars()
        return next((b for b in sorted(chars, key=lambda b: -chars[b][0])[:k]
                     if b and not finished(b) and b not in self.steps), None)


Until = Callable[[ByteStep, PrefixMasses | None], bool]  # whether a step may pause after this round


def _advance(found: Found, prefix: bytes, steps: Steps, call: Call, until: Until) -> Iterator[Found]:
    """Run one step's search on, a round at a time (``found`` after each), until ``until`` says
    it may pause (it goes on later from there), it ends, or the call's seconds are spent."""
    for step, masses in steps:
        found.add(prefix, step, masses)
        yield found
        if until(step, masses) or call.deadline.over():
            return


def search_characters(p: PrefixState, k: int, call: Call) -> Iterator[Found]:
    """What comes next, after every round of every byte step; the last has ``final`` set.

    The first step runs until its values settle. Then, best first, each prefix among the k most
    probable outcomes that is not a whole character yet takes its byte step (the prompt's
    lattice extended by it) for one round, so that the k rows are whole characters early; then
    those steps run on until they settle; then every step, the first first, runs on to its end
    (a continuation's, ``settle``: not), and a prefix that the certificate moves into the k is
    resolved in turn (docs/design.md, "Characters")."""
    found, paused = Found(), dict[bytes, Steps]()

    def resolve() -> Iterator[Found]:
        while not call.over(p) and (prefix := found.unresolved(k)) is not None:
            paused[prefix] = p.steps(prefix, call.deadline)
            yield from _advance(found, prefix, paused[prefix], call, call.enough if call.settle else lambda *_: True)
        for prefix in [b for b in paused if b not in found.settled]:
            if not call.over(p):
                yield from _advance(found, prefix, paused[prefix], call, call.enough)

    paused[b""] = p.steps(b"", call.deadline)
    yield from _advance(found, b"", paused[b""], call, call.enough)
    yield from resolve()
    if not call.settle:
        call.deadline.settle(call.deadline.seconds())  # the k rows are whole and settled: the certificate's share
    while paused and not call.settle and not call.over(p):
        prefix = next(iter(paused))
        yield from _advance(found, prefix, paused.pop(prefix), call, lambda *_: False)
        yield from resolve()
    found.final = True
    yield found


def characters_stream(p: PrefixState, k: int) -> Iterator[NextCharacters]:
    """The k most probable next characters after the state's text, after every round of every byte
    step, beside the token views folded by character (on what the search's first round kept);
    the last is the result. Stop keeps what was found."""
    started = time.perf_counter()
    call = Call(Deadline(p.settings.time_budget, started=started))
    groups = key_groups(p.vocab, p.lm.vocab)
    tokens = tuple(p.vocab.surface(t) for t in p.canonical())
    p.want_views()
    tv: dict[str, float] = {}
    stopped, tolerance = p.settings.stopped, p.settings.tolerance
    for found in search_characters(p, k, call):
        first = found.steps[b""].point
        if not tv:
            views = p.views()
            canonical = key_masses(views.canonical, groups)
            healed = healed_masses(p.vocab, groups, views.tail, views.before, views.heads)
        if not tv or found.final:
            tv = {"canonical": total_variation(first, canonical.by_byte()),
                  "healed": total_variation(first, healed.by_byte())}
        rows, rest = character_rows(found.chars(), k, tolerance, canonical, healed)
        ended = Ended.STOPPED if stopped() else (call.deadline.reason() if found.final and call.deadline.over()
                                                  else found.ended)
        yield NextCharacters(p.text, p.lm.name, p.context, rows, tokens, tv, time.perf_counter() - started,
                             found.rounds, found.scored, found.final and not stopped() and not rest
                             and all(r.status == CERTIFIED for r in rows), stopped(), tolerance, ended,
                             found.settled_at, rest)

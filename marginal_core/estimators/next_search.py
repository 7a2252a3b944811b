"""What comes next after a prompt, over every tokenization (docs/design.md, "What comes next"): the
prefix search carried past the prompt's last byte (its complete paths scored as prefixes) gives
P(next byte | prompt), certified; a character of several bytes takes one more byte step on the
prompt's lattice extended by its first bytes; the canonical and healed token views sit beside it.
Continuations extend the prompt one character at a time from the marginal, beside ``generate``'s.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from marginal_core.estimators.beam_width import DEFAULT_TOLERANCE
from marginal_core.estimators.generated import generated
from marginal_core.estimators.next_chars import (
    CERTIFIED,
    MAX_K,
    NO_BYTE,
    ByteStep,
    Candidate,
    Continuation,
    Continuations,
    NextCharacters,
    character_rows,
    finished,
    healed_masses,
    key_groups,
    key_masses,
    total_variation,
)
from marginal_core.estimators.next_prompt import Prompt
from marginal_core.estimators.prefix_bounds import PrefixMasses, end_probabilities
from marginal_core.estimators.prefix_kv import KV_BYTES
from marginal_core.estimators.prefix_memory import PrefixMemory
from marginal_core.estimators.prefix_search import MAX_ROWS, prefix_masses
from marginal_core.estimators.search_stop import (
    AUTO,
    AUTO_CAP_S,
    CERTIFY_FLOOR_S,
    CERTIFY_SHARE,
    TimeBudget,
    check_time_budget,
)
from marginal_core.ground.errors import MarginalError
from marginal_core.ground.progress import Progress, StopCheck
from marginal_core.lattice.graph import DEFAULT_ENUMERATION_BUDGET, extended
from marginal_core.lm.adapter import LM

HOWS = ("greedy", "sample")


def step_of(masses: PrefixMasses) -> ByteStep:
    """The next byte after the text from the search past its end."""
    return ByteStep(*end_probabilities(masses))


@dataclass
class _Settings:
    """The search's settings for every byte step of one call: ``time_budget`` as a caller gave it
    (None, seconds for the whole call, or "auto": each step's default stop, ``search_stop``, and
    the call at most AUTO_CAP_S); ``memory``: what each step keeps for the next (every step's
    text begins with the prompt); ``settle``: each step ends once its values have settled (a
    continuation's steps); ``top``: or once its most probable byte is certified to be (a greedy
    continuation's)."""

    tolerance: float
    max_rows: int
    budget: int
    time_budget: TimeBudget
    should_stop: StopCheck | None
    progress: Progress | None
    memory: PrefixMemory
    settle: bool = False
    top: bool = False
    started: float = field(default_factory=time.perf_counter)
    certify_until: float = math.inf  # the default stop's end, once the k rows are whole and settled

    def stopped(self) -> bool:
        return self.should_stop is not None and bool(self.should_stop())

    def late(self) -> bool:
        """Whether the call's seconds are spent: an explicit budget, or the default stop's (its
        cap, and the certificate's share once the rows settled: ``certify_from_now``)."""
        now = time.perf_counter() - self.started
        if self.time_budget == AUTO:
            return now > min(AUTO_CAP_S, self.certify_until)
        return isinstance(self.time_budget, float) and now > self.time_budget

    def certify_from_now(self) -> None:
        """The k rows are whole and their values settled: under the default stop the certificate
        gets its share of the seconds so far, as one search's does (``search_stop``)."""
        now = time.perf_counter() - self.started
        self.certify_until = min(self.certify_until, now + max(CERTIFY_FLOOR_S, CERTIFY_SHARE * now))

    def step_budget(self) -> TimeBudget:
        """One step's time budget: what is left of the call's seconds, or the call's own word."""
        if isinstance(self.time_budget, float):
            return max(0.0, self.started + self.time_budget - time.perf_counter())
        return self.time_budget


Steps = Iterator[tuple[ByteStep, PrefixMasses | None]]


def byte_steps(p: Prompt, tail: bytes, s: _Settings) -> Steps:
    """The next byte after the prompt's bytes and ``tail`` (the first bytes of an unfinished
    character) after every round of the search past their end; an empty prompt's first byte is
    its context's own next token (one step, no search)."""
    if p.lattice is None and not tail:
        first = p.views(s.memory).canonical
        point = key_masses(first, key_groups(p.vocab, p.lm.vocab)).by_byte()
        yield ByteStep(point, point, point), None
        return
    lattice = extended(p.lattice, tail, p.vocab) if tail else p.lattice
    assert lattice is not None  # an empty prompt has a tail here
    yield from ((step_of(masses), masses) for masses in prefix_masses(
        p.lm, lattice, p.state, tolerance=s.tolerance, max_rows=s.max_rows, budget=s.budget,
        time_budget=s.step_budget(), should_stop=s.should_stop, progress=s.progress, past_end=True, memory=s.memory))


def _top_certified(step: ByteStep) -> bool:
    """Whether the most probable outcome's lower bound passes every other outcome's upper bound."""
    top = int(np.argmax(step.point))
    return bool(step.lower[top] > np.delete(step.upper, top).max())


def _settled(masses: PrefixMasses | None) -> bool:
    """Whether a step's values have settled (an empty prompt's first step is exact)."""
    return masses is None or masses.settled_at is not None


def _enough(step: ByteStep, masses: PrefixMasses | None, s: _Settings) -> bool:
    """Whether a step may pause here (a continuation's: end): its values settled, or, greedy, its
    most probable byte certified."""
    return _settled(masses) or (s.top and _top_certified(step))


def last_step(p: Prompt, tail: bytes, s: _Settings) -> ByteStep:
    """A byte step run until its search ends, or with ``settle`` until it is enough."""
    for step, masses in byte_steps(p, tail, s):
        if s.settle and _enough(step, masses, s):
            break
    return step


@dataclass
class _Found:
    """The byte steps so far: the first (``b""``) and, for each character prefix resolved, the
    step after it; which have settled; each step's rounds and prefixes scored; the first step's
    end (``ended``, ``settled_at``)."""

    steps: dict[bytes, ByteStep] = field(default_factory=dict)
    settled: set[bytes] = field(default_factory=set)
    work: dict[bytes, tuple[int, int]] = field(default_factory=dict)
    ended: str = ""
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
            self.ended, self.settled_at = (masses.ended, masses.settled_at) if masses is not None else ("exact", 0.0)

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


def _advance(found: _Found, prefix: bytes, steps: Steps, s: _Settings, until: Until) -> Iterator[_Found]:
    """Run one step's search on, a round at a time (``found`` after each), until ``until`` says
    it may pause (it goes on later from there), it ends, or the call's seconds are spent."""
    for step, masses in steps:
        found.add(prefix, step, masses)
        yield found
        if until(step, masses) or s.late():
            return


def _search(p: Prompt, k: int, s: _Settings) -> Iterator[_Found]:
    """What comes next, after every round of every byte step; the last has ``final`` set.

    The first step runs until its values settle. Then, best first, each prefix among the k most
    probable outcomes that is not a whole character yet takes its byte step (the prompt's
    lattice extended by it) for one round, so that the k rows are whole characters early; then
    those steps run on until they settle; then every step, the first first, runs on to its end
    (a continuation's, ``settle``: not), and a prefix that the certificate moves into the k is
    resolved in turn (docs/design.md, "Characters")."""
    found, paused = _Found(), dict[bytes, Steps]()

    def enough(step: ByteStep, masses: PrefixMasses | None) -> bool:
        return _enough(step, masses, s)

    def over() -> bool:
        return s.stopped() or s.late()

    def resolve() -> Iterator[_Found]:
        while not over() and (prefix := found.unresolved(k)) is not None:
            paused[prefix] = byte_steps(p, prefix, s)
            yield from _advance(found, prefix, paused[prefix], s, enough if s.settle else lambda *_: True)
        for prefix in [b for b in paused if b not in found.settled]:
            if not over():
                yield from _advance(found, prefix, paused[prefix], s, enough)

    paused[b""] = byte_steps(p, b"", s)
    yield from _advance(found, b"", paused[b""], s, enough)
    yield from resolve()
    if not s.settle:
        s.certify_from_now()
    while paused and not s.settle and not over():
        prefix = next(iter(paused))
        yield from _advance(found, prefix, paused.pop(prefix), s, lambda *_: False)
        yield from resolve()
    found.final = True
    yield found


def next_characters_stream(lm: LM, prompt: str, context: str | None = None, k: int = 10, *,
                           tolerance: float = DEFAULT_TOLERANCE, time_budget: TimeBudget = None,
                           max_rows: int = MAX_ROWS, budget: int = DEFAULT_ENUMERATION_BUDGET,
                           kv_bytes: int = KV_BYTES, should_stop: StopCheck | None = None,
                           progress: Progress | None = None) -> Iterator[NextCharacters]:
    """The k most probable next characters after the prompt, after every round of the search past
    its end (until every next byte's interval is within ``tolerance``, the time budget, or
    should_stop), then after each byte step that finishes a character of several bytes (on what
    the first step kept, ``prefix_memory``; ``kv_bytes`` bounds its KV); the last is the result.
    Stop keeps what was found. Bad input is refused before any work."""
    if not 1 <= k <= MAX_K:
        raise MarginalError(f"k must be between 1 and {MAX_K}, not {k}")
    started = time.perf_counter()
    settings = _Settings(tolerance, max_rows, budget, check_time_budget(time_budget), should_stop, progress,
                         PrefixMemory(kv_bytes), started=started)
    return _characters(Prompt.of(lm, prompt, context), k, settings, started)


def _characters(p: Prompt, k: int, s: _Settings, started: float) -> Iterator[NextCharacters]:
    """next_characters_stream's results, beside the token views folded by character (on what the
    search's first round kept)."""
    groups = key_groups(p.vocab, p.lm.vocab)
    tokens = tuple(p.vocab.surface(t) for t in p.canonical())
    p.want_views(s.memory)
    tv: dict[str, float] = {}
    for found in _search(p, k, s):
        first = found.steps[b""].point
        if not tv:
            views = p.views(s.memory)
            canonical = key_masses(views.canonical, groups)
            healed = healed_masses(p.vocab, groups, views.tail, views.before, views.heads)
        if not tv or found.final:
            tv = {"canonical": total_variation(first, canonical.by_byte()),
                  "healed": total_variation(first, healed.by_byte())}
        rows, rest = character_rows(found.chars(), k, s.tolerance, canonical, healed)
        ended = "stopped" if s.stopped() else (_late_reason(s) if found.final and s.late() else found.ended)
        yield NextCharacters(p.text, p.lm.name, p.context, rows, tokens, tv, time.perf_counter() - started,
                             found.rounds, found.scored, found.final and not s.stopped() and not rest
                             and all(r.status == CERTIFIED for r in rows), s.stopped(), s.tolerance, ended,
                             found.settled_at, rest)


def _late_reason(s: _Settings) -> str:
    """Why a call whose seconds are spent ended, in search_stop's words."""
    return "default stop" if s.time_budget == AUTO else "time budget"


# ------------------------------------------------------------------- continuations


def continuations_stream(lm: LM, prompt: str, context: str | None = None, chars: int = 20, how: str = "greedy",
                         seed: int | None = None, *, tolerance: float = DEFAULT_TOLERANCE, max_rows: int = MAX_ROWS,
                         budget: int = DEFAULT_ENUMERATION_BUDGET, time_budget: TimeBudget = None,
                         kv_bytes: int = KV_BYTES, should_stop: StopCheck | None = None,
                         progress: Progress | None = None) -> Iterator[Continuations]:
    """The prompt continued ``chars`` characters from the marginal (``how``: greedy takes the most
    probable character, sample draws one byte by byte with ``seed``), beside generate's
    continuation from the canonical tokens and from token healing with the same settings: after
    generate's, then after each of the marginal's characters; the last is the result. Each
    character's search begins with what the ones before kept (``prefix_memory``; ``kv_bytes``
    bounds its KV). Stop and the time budget keep the characters found so far. Bad input is
    refused before any work."""
    if how not in HOWS:
        raise MarginalError(f"how must be one of {', '.join(HOWS)}, not {how!r}")
    if chars < 0:
        raise MarginalError(f"the continuation's length must be 0 or more characters, not {chars}")
    started = time.perf_counter()
    s = _Settings(tolerance, max_rows, budget, check_time_budget(time_budget), should_stop, progress,
                  PrefixMemory(kv_bytes), settle=True, top=how == "greedy", started=started)
    first = Prompt.of(lm, prompt, context, ahead=1 + 4 * chars)  # a character is at most four byte tokens
    return _continued(first, chars, how, seed, s, started)


def _continued(first: Prompt, chars: int, how: str, seed: int | None, s: _Settings,
               started: float) -> Iterator[Continuations]:
    """continuations_stream's work, once the prompt is checked: the marginal's characters each from
    the search after the prompt and the characters chosen so far."""
    canonical, healed = generated(first, chars, how, seed)
    s = replace(s, started=time.perf_counter())  # the time budget is the marginal's: generate's time is not in it
    rng = np.random.default_rng(seed)
    text, probs, p, ended = "", list[float](), first, False

    def now() -> Continuations:
        return Continuations(first.text, first.lm.name, how, seed, Continuation(text, tuple(probs), ended), canonical,
                             healed, time.perf_counter() - started, s.stopped())

    yield now()
    while len(probs) < chars and not ended and not s.stopped() and not s.late():
        chosen, prob = _greedy(p, s) if how == "greedy" else _sampled(p, rng, s)
        if s.stopped() or (chosen and not finished(chosen)):  # a character's bytes are written whole or not at all
            break
        if not chosen:
            ended = True
        else:
            text, probs = text + chosen.decode("utf-8", errors="replace"), [*probs, prob]
            p = Prompt.of(p.lm, first.text + text, first.context, ahead=0)
        yield now()


def _greedy(p: Prompt, s: _Settings) -> tuple[bytes, float]:
    """The most probable next character (b"": no byte) and its probability."""
    chars = deque(_search(p, 1, s), maxlen=1).pop().chars()
    top = max(chars, key=lambda b: chars[b][0])
    return top, chars[top][0]


def _sampled(p: Prompt, rng: np.random.Generator, s: _Settings) -> tuple[bytes, float]:
    """A next character drawn from the marginal byte by byte (b"": no byte), and its probability."""
    chosen, prob = b"", 1.0
    while (not chosen or not finished(chosen)) and not s.stopped():
        step = last_step(p, chosen, s)
        weights = step.point if not chosen else np.where(np.arange(257) // 64 == 2, step.point, 0.0)
        if weights.sum() <= 0:
            return b"", prob
        c = int(rng.choice(257, p=weights / weights.sum()))
        prob *= float(weights[c] / weights.sum())
        if c == NO_BYTE:
            return b"", prob
        chosen += bytes([c])
    return chosen, prob

"""The prompt continued one whole character at a time from the marginal (docs/design.md, "What comes
next"): greedy takes the most probable character, sample draws one byte by byte; each character's
search begins with what the ones before kept (the state's memory). ``generate``'s two
continuations sit beside it (``generated``)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator

import numpy as np

from marginal_core.ground.errors import MarginalError
from marginal_core.search.clock import Deadline
from marginal_core.search.masses import NO_BYTE, ByteStep
from marginal_core.search.next.characters import Call, search_characters
from marginal_core.search.next.generated import generated
from marginal_core.search.next.results import Continuation, Continuations, finished
from marginal_core.search.state import PrefixState

HOWS = ("greedy", "sample")


def check_continuation(chars: int, how: str) -> None:
    """Refuse a bad length or way of choosing before any work."""
    if how not in HOWS:
        raise MarginalError(f"how must be one of {', '.join(HOWS)}, not {how!r}")
    if chars < 0:
        raise MarginalError(f"the continuation's length must be 0 or more characters, not {chars}")


def continuations_of(first: PrefixState, chars: int, how: str, seed: int | None) -> Iterator[Continuations]:
    """The state's text continued ``chars`` characters from the marginal, beside generate's from the
    canonical tokens and from token healing: after generate's, then after each of the marginal's
    characters; the last is the result. Stop and the time budget keep the characters found so
    far (the budget is the marginal's: generate's time is not in it)."""
    started = time.perf_counter()
    canonical, healed = generated(first, chars, how, seed)
    call = Call(Deadline(first.settings.time_budget), settle=True, top=how == "greedy")
    rng = np.random.default_rng(seed)
    text, probs, p, ended = "", list[float](), first, False
    stopped = first.settings.stopped

    def now() -> Continuations:
        return Continuations(first.text, first.lm.name, how, seed, Continuation(text, tuple(probs), ended), canonical,
                             healed, time.perf_counter() - started, stopped())

    yield now()
    while len(probs) < chars and not ended and not call.over(first):
        chosen, prob = _greedy(p, call) if how == "greedy" else _sampled(p, rng, call)
        if stopped() or (chosen and not finished(chosen)):  # a character's bytes are written whole or not at all
            break
        if not chosen:
            ended = True
        else:
            text, probs = text + chosen.decode("utf-8", errors="replace"), [*probs, prob]
            p = first.extended(text, ahead=0)
        yield now()


def greedy_characters(first: PrefixState) -> Iterator[str]:
    """The greedy continuation from the marginal, one whole character at a time (each character's
    search as continue_text's, on what the ones before kept), until the end of the string, Stop or
    the time budget."""
    call = Call(Deadline(first.settings.time_budget), settle=True, top=True)
    text, p = "", first
    while not call.over(first):
        chosen, _ = _greedy(p, call)
        if first.settings.stopped() or not chosen or not finished(chosen):
            return
        character = chosen.decode("utf-8", errors="replace")
        text += character
        yield character
        p = first.extended(text, ahead=0)


def _greedy(p: PrefixState, call: Call) -> tuple[bytes, float]:
    """The most probable next character (b"": no byte) and its probability."""
    chars = deque(search_characters(p, 1, call), maxlen=1).pop().chars()
    top = max(chars, key=lambda b: chars[b][0])
    return top, chars[top][0]


def _sampled(p: PrefixState, rng: np.random.Generator, call: Call) -> tuple[bytes, float]:
    """A next character drawn from the marginal byte by byte (b"": no byte), and its probability."""
    chosen, prob = b"", 1.0
    while (not chosen or not finished(chosen)) and not p.settings.stopped():
        step = _settled_step(p, chosen, call)
        weights = step.point if not chosen else np.where(np.arange(257) // 64 == 2, step.point, 0.0)
        if weights.sum() <= 0:
            return b"", prob
        c = int(rng.choice(257, p=weights / weights.sum()))
        prob *= float(weights[c] / weights.sum())
        if c == NO_BYTE:
            return b"", prob
        chosen += bytes([c])
    return chosen, prob


def _settled_step(p: PrefixState, tail: bytes, call: Call) -> ByteStep:
    """A byte step after the text and ``tail``, run until its values settle (or its search ends)."""
    for step, masses in p.steps(tail, call.deadline):
        if call.enough(step, masses):
            break
    return step

"""Taking turns on a shared device: many runs' model work, one run at a time, fairly ordered
(docs/design.md, "Turns").

The library wraps each unit of model work (a forward pass, a chunk of the LM head) in
``serving_hooks.unit``, the one place it asks about runs. Outside a run that a :class:`Turns`
admitted (the CLI, the tests, a script), a unit does nothing. Inside one, a run's first unit
waits for its **turn**: the device is its own, for its units and the work between them, until
its units have used ``slice_s`` of it while another run waits (checked as each unit starts),
until it reaches a checkpoint (``serving_hooks.checkpoint``: a natural break, such as the end
of a chunk of samples) while another run waits, or until it stays out of a unit for ``idle_s``
(it is drawing, or done). Until a run's first checkpoint (its first estimate) its turns may use
``first_slice_s``: a newcomer's first turn ends with something to show, however much the other
sessions' page code slows its own. The next turn goes to the waiting run that has used the
device least so far (round-robin by service time), so a run that starts last gets its first
turn within a round, and no run costs the others more than its share. One run at a time, rather
than one unit at a time, keeps the work between units from fighting the holder for the cores. A
run's stop check is polled while it waits and before each unit; True gives it
:class:`TurnCancelled`.

Runs beyond ``max_runs`` wait to be admitted, in arrival order, and their waiting callback
hears where they stand. The holder may use :meth:`Turns.scratch` for buffers that only a unit
needs (the LM head's logits block): one per device, not one per run. Every duration is read from
the Turns' ``clock`` (``time.perf_counter`` unless another is given, as tests do).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

from marginal_core.ground import hooks as serving_hooks
from marginal_core.ground.errors import MarginalError
from marginal_core.ground.progress import StopCheck

__all__ = ["Clock", "Place", "Run", "TurnCancelled", "Turns"]

# Seconds between a waiting run's stop checks and reports of its place.
POLL_S = 0.2
# A turn: the seconds a run keeps the device while others wait (about what a live run's first
# estimate costs on a CPU, so that its first turn shows one), and how long it may stay out of a
# unit before another run may take the device (a waiter checks that often).
SLICE_S = 0.5
IDLE_S = 0.5
# The device seconds a run's turns may use before its first checkpoint (a canonical score and a
# first chunk of a few samples take well under this on a CPU).
FIRST_SLICE_S = 2.0
# The seconds a run is assumed to take before any has finished (the queue's wait estimate).
FIRST_GUESS_S = 2.0


class TurnCancelled(MarginalError):
    """A run's stop check answered True while it waited for, or was about to take, its turn."""


@dataclass(frozen=True)
class Place:
    """Where a waiting run stands: runs that will use the device before it, and about how many
    seconds until its turn; ``admitted`` is False while it waits beyond the cap."""

    ahead: int
    seconds: float
    admitted: bool

    def describe(self) -> str:
        """'3 runs ahead of yours, about 12 s' (or 'the machine is full; ...' beyond the cap)."""
        runs = f"{self.ahead} run{'s' if self.ahead != 1 else ''} ahead of yours, about {max(1, round(self.seconds))} s"
        return runs if self.admitted else f"the machine is full; {runs}"


Clock = Callable[[], float]
"""Seconds since some fixed moment (``time.perf_counter``, or a test's fake clock)."""

Waiting = Callable[[Place | None], None]
"""Told, a few times a second, where a waiting run stands, and None when its turn came (it may
raise to leave the queue)."""


@dataclass(eq=False)
class Run:
    """One admitted or queued run: its owner, hooks, arrival and the device seconds it used."""

    owner: Hashable
    should_stop: StopCheck | None
    waiting: Waiting | None
    arrived: float = field(default_factory=time.perf_counter)  # on its Turns' clock
    served: float = 0.0  # seconds it held the device in turns that ended
    admitted: bool = False
    wants: bool = False
    turn_began: float = 0.0
    turn_used: float = 0.0  # seconds inside its units in its current turn
    checkpointed: bool = False  # it has reached a checkpoint (shown an estimate)
    in_unit: bool = False
    left_unit: float = 0.0
    first_asked: float | None = None  # when it first asked for the device (clock seconds)
    first_given: float | None = None  # when its first turn began

    def first_turn(self) -> tuple[float, float] | None:
        """Seconds from its arrival to its first ask for the device, and to its first turn."""
        if self.first_asked is None or self.first_given is None:
            return None
        return self.first_asked - self.arrived, self.first_given - self.arrived

    def order(self) -> tuple[float, float]:
        return self.served, self.arrived

    def stopped(self) -> bool:
        return self.should_stop is not None and bool(self.should_stop())


class Turns:
    """One device's turns: at most one unit at a time, the least-served waiting run next, at most
    ``max_runs`` runs admitted (the rest wait in arrival order), every duration read from ``clock``."""

    def __init__(self, max_runs: int = 16, slice_s: float = SLICE_S, idle_s: float = IDLE_S,
                 first_slice_s: float = FIRST_SLICE_S, clock: Clock = time.perf_counter) -> None:
        if max_runs < 1:
            raise MarginalError("max_runs must be at least 1")
        self.max_runs, self.slice_s, self.idle_s, self.first_slice_s = max_runs, slice_s, idle_s, first_slice_s
        self.clock = clock
        self._cond = threading.Condition()
        self._holder: Run | None = None
        self._admitted: list[Run] = []
        self._queue: list[Run] = []
        self._run_seconds: list[float] = []  # device seconds of recently finished runs
        self._scratch: dict[str, Any] = {}

    # ------------------------------------------------------------------ runs

    @contextlib.contextmanager
    def run(self, owner: Hashable, should_stop: StopCheck | None = None,
            waiting: Waiting | None = None) -> Iterator[Run]:
        """The block in which owner's model work takes turns (nested blocks join the outer run);
        it yields the run, whose :meth:`Run.first_turn` says how long its first turn took to come."""
        outer = serving_hooks.held()
        if outer is not None and outer[0] is self:
            yield outer[1]
            return
        entry = Run(owner, should_stop, waiting, arrived=self.clock())
        with self._cond:
            self._queue.append(entry)
            self._admit()
        try:
            with serving_hooks.entered(self, entry):
                yield entry
        finally:
            with self._cond:
                self._leave(entry)

    def _admit(self) -> None:
        """Let queued runs in while there is room (lock held)."""
        while self._queue and len(self._admitted) < self.max_runs:
            entry = self._queue.pop(0)
            entry.admitted = True
            self._admitted.append(entry)
        self._cond.notify_all()

    def _leave(self, entry: Run) -> None:
        """Forget a run that ended, however it ended (lock held)."""
        if entry in self._queue:
            self._queue.remove(entry)
        if self._holder is entry:
            self._end_turn(self.clock())
        if entry in self._admitted:
            self._admitted.remove(entry)
            if entry.served > 0:  # a run that never used the device says nothing of a run's length
                self._run_seconds = [*self._run_seconds[-31:], entry.served]
        self._admit()

    # ------------------------------------------------------------------ units

    @contextlib.contextmanager
    def unit(self, entry: Run, eager: bool = False) -> Iterator[None]:
        """One unit of entry's work in entry's turn (waiting for one first; a turn held past its
        slice while others wait is handed on first); a unit inside a unit is part of it. An
        ``eager`` unit (a shared pass, which others wait on) takes the device as soon as no unit
        runs, without leaving an idle holder its grace."""
        if entry.in_unit:
            yield
            return
        if entry.stopped():  # in its turn or not, a stopped run starts no more work
            raise TurnCancelled("stopped")
        with self._cond:
            if self._holder is entry and entry.turn_used >= self._slice(entry) and self._waiters(entry):
                self._end_turn(self.clock())
            held = self._holder is entry
            entry.in_unit = held
        if not held:
            self._take(entry, eager)
        began = self.clock()
        try:
            yield
        finally:
            with self._cond:
                entry.in_unit, entry.left_unit = False, self.clock()
                entry.turn_used += entry.left_unit - began
                self._cond.notify_all()

    def _slice(self, entry: Run) -> float:
        """The device seconds entry's turn may use while others wait."""
        return self.slice_s if entry.checkpointed else self.first_slice_s

    def pause(self, entry: Run) -> None:
        """A natural break in entry's work: if it holds the device and another run waits, its
        turn ends here (a newcomer's first estimate need not wait for the holder's slice)."""
        with self._cond:
            entry.checkpointed = True
            if self._holder is entry and not entry.in_unit and self._waiters(entry):
                self._end_turn(self.clock())

    def release(self, entry: Run) -> None:
        """entry waits on others' work now (a shared pass): if it holds the device between its
        units, its turn ends here, so the pass need not wait out its idle grace."""
        with self._cond:
            if self._holder is entry and not entry.in_unit:
                self._end_turn(self.clock())

    @contextlib.contextmanager
    def aside(self, entry: Run) -> Iterator[None]:
        """entry waits on something other than the device (another run's results): it gives up
        its turn and its admission (or its place in the queue) meanwhile, so a run that needs
        the machine takes its place, and queues again after (admitted at once where there is
        room)."""
        with self._cond:
            if self._holder is entry:
                self._end_turn(self.clock())
            if entry in self._queue:
                self._queue.remove(entry)
            if entry in self._admitted:
                self._admitted.remove(entry)
                entry.admitted = False
                self._admit()
        try:
            yield
        finally:
            with self._cond:
                if not entry.admitted and entry not in self._queue:
                    self._queue.append(entry)
                self._admit()

    def charge(self, payer: Run, payee: Run, seconds: float) -> None:
        """Move seconds of device time from payer's account to payee's (payer ran payee's share
        of a shared pass in its own turn)."""
        with self._cond:
            payer.served -= seconds
            payee.served += seconds

    def _waiters(self, entry: Run) -> bool:
        """Whether another admitted run waits for the device (lock held)."""
        return any(r.wants for r in self._admitted if r is not entry)

    def _end_turn(self, at: float) -> None:
        """The holder's turn ends at `at`: its seconds count as served (lock held)."""
        holder = self._holder
        if holder is not None:
            holder.served += max(at - holder.turn_began, 0.0)
            self._holder = None
            self._cond.notify_all()

    def _take(self, entry: Run, eager: bool = False) -> None:
        """Wait until entry is admitted and the next to use the device, then begin its turn in
        a unit."""
        if entry.first_asked is None:
            entry.first_asked = self.clock()
        try:
            self._wait_until(entry, lambda: self._took(entry, eager))
        finally:
            entry.wants = False

    def admitted(self, entry: Run) -> None:
        """Return once entry is admitted (at once if it is), telling it where it stands meanwhile."""
        def now_admitted() -> bool:
            with self._cond:
                if not entry.admitted:
                    self._cond.wait(POLL_S)
                return entry.admitted

        self._wait_until(entry, now_admitted)

    def _wait_until(self, entry: Run, ready: Callable[[], bool]) -> None:
        """Poll ready (which waits a little itself) until True, hearing entry's stop check and
        telling it where it stands; a run told where it stood is told None when ready."""
        told, shown = self.clock(), None
        while not ready():
            with self._cond:
                place = self._place(entry)
            if entry.stopped():
                raise TurnCancelled("stopped while waiting for its turn")
            if entry.waiting is not None and self.clock() - told >= POLL_S and place.describe() != shown:
                told, shown = self.clock(), place.describe()
                entry.waiting(place)
        if shown is not None and entry.waiting is not None:
            entry.waiting(None)

    def _took(self, entry: Run, eager: bool) -> bool:
        """Begin entry's turn if it is next, else wait a little for a change (False)."""
        with self._cond:
            entry.wants = True
            if not self._is_next(entry, eager):
                self._cond.wait(min(POLL_S, self.idle_s))
                if not self._is_next(entry, eager):
                    return False
            now = self.clock()
            if self._holder is not None:  # it stayed out of its units too long: its turn ends
                self._end_turn(self._holder.left_unit)
            self._holder, entry.wants, entry.in_unit, entry.turn_began, entry.turn_used = entry, False, True, now, 0.0
            if entry.first_given is None:
                entry.first_given = now
            return True

    def _is_next(self, entry: Run, eager: bool) -> bool:
        """Whether entry may take the device now: it is admitted, the device is free (or its
        holder idle for idle_s, or out of its units for an eager unit) and entry has used it
        least of the waiting runs (lock held)."""
        holder = self._holder
        if not entry.admitted or holder is entry:
            return False
        if holder is not None and (holder.in_unit or (not eager and self.clock() - holder.left_unit < self.idle_s)):
            return False
        waiting = [r for r in self._admitted if r.wants]
        return min(waiting, key=Run.order) is entry

    def _place(self, entry: Run) -> Place:
        """Where entry stands now (lock held): the runs whose turns come first, a slice each."""
        if entry.admitted:
            ahead = sum(1 for r in self._admitted if r.wants and r.order() < entry.order())
            ahead += self._holder is not None
            return Place(ahead, ahead * self.slice_s, True)
        position = self._queue.index(entry)
        mean = sum(self._run_seconds) / len(self._run_seconds) if self._run_seconds else FIRST_GUESS_S
        # the admitted runs share the device, so the first of them ends after about
        # (runs) x (the least work any has left); each later place waits one run more
        least_left = min((max(mean - r.served, 0.0) for r in self._admitted), default=0.0)
        return Place(len(self._admitted) + position, len(self._admitted) * least_left + position * mean, False)

    # ------------------------------------------------------------------ what the holder shares

    def scratch(self) -> dict[str, Any]:
        """Buffers that only the device's current unit uses (one set per device, not per run)."""
        return self._scratch

    def status(self) -> dict[str, int]:
        """How many runs are admitted, queued, and whether one holds the device."""
        with self._cond:
            return {"admitted": len(self._admitted), "queued": len(self._queue), "busy": int(self._holder is not None)}


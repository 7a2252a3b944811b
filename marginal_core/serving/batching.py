"""Shared passes: many runs' requests for the same kind of work gathered into one call on the
device (docs/design.md, "Turns").

Where a :class:`~marginal_core.serving.turns.Turns` has a :class:`Batcher` (made on it), a run hands it a request
(a key, a payload, its size, the most size a batch of its key may carry, and the function that
runs a list of payloads of one key) instead
of running the work in its own turn. The first request to arrive while no batch forms leads:
it takes the device in its run's turn (an eager unit), waits for more requests until none has
come for ``gather_s`` (at most ``max_gather_s``), and runs the requests of one key together, up
to the key's limit in all (at least one request), taking first those of the runs that have used
the device least (as turns go). The others
wait for their results (told where they stand while a batch they are not in runs) and are each
charged their share of the batch's device seconds. A batch
that raises is rerun one request at a time, so a failing request fails only its own run; Stop
takes a waiting request out at once. Outside a run, or with no Batcher, work runs alone. The
Batcher registers with ``serving_hooks`` (``attach_batcher``), where scoring finds it
(``serving_hooks.batcher``).

The trie scorer is the client (``marginal_core.scoring.trie_scoring``): the canonical scores and the first
chunks of a class's sessions are small, and one pass over all of them costs a fraction of one
pass each (the LM head reads its whole output layer however few rows it gets).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from marginal_core.ground import hooks as serving_hooks
from marginal_core.serving.turns import POLL_S, Place, Run, TurnCancelled, Turns

__all__ = ["Batcher"]

P = TypeVar("P")
R = TypeVar("R")

# How long a batch's leader waits for more requests after the last one came, and at most.
GATHER_S = 0.02
MAX_GATHER_S = 0.2
# The share of a pass that a batch led by a run that has shown nothing yet may fill: a class's
# first estimates then come in a few small passes, the first sessions' early, not all in one
# pass at the end (on a CPU the LM head's product grows with the rows; the weights' read is
# the smaller part).
FIRST_SHARE = 0.25


@dataclass(eq=False)
class _Request(Generic[P, R]):
    """One run's request and, once its batch ran, its result or error."""

    key: Hashable
    payload: P
    size: int
    limit: int
    run_batch: Callable[[list[P]], list[R]]
    entry: Run | None
    done: bool = False
    result: R | None = None
    error: BaseException | None = None


class Batcher:
    """One device's shared passes: requests of one key run together, up to the key's limit. Made
    on a Turns, it takes that Turns' runs' scoring from then on."""

    def __init__(self, turns: Turns, gather_s: float = GATHER_S, max_gather_s: float = MAX_GATHER_S) -> None:
        self.turns, self.gather_s, self.max_gather_s = turns, gather_s, max_gather_s
        serving_hooks.attach_batcher(turns, self)
        self._cond = threading.Condition()
        self._pending: list[_Request[Any, Any]] = []
        self._running: list[_Request[Any, Any]] = []
        self._leading = False
        self._last_arrival = 0.0
        self.batches = 0  # batches run so far
        self.requests = 0  # requests they carried

    def submit(self, key: Hashable, payload: P, size: int, limit: int, run_batch: Callable[[list[P]], list[R]]) -> R:
        """Run payload with the other waiting payloads of key, at most limit in size together
        (run_batch maps a list of payloads to their results, in order) and return its result (or
        raise its error)."""
        place = serving_hooks.held()
        entry = place[1] if place is not None and place[0] is self.turns else None
        if entry is not None:
            self.turns.admitted(entry)
        request: _Request[P, R] = _Request(key, payload, size, limit, run_batch, entry)
        with self._cond:
            self._pending.append(request)
            self._last_arrival = time.perf_counter()
            self._cond.notify_all()
        if entry is not None:
            self.turns.release(entry)
        try:
            self._until_done(request)
        finally:
            with self._cond:
                if request in self._pending:
                    self._pending.remove(request)
        if request.error is not None:
            raise request.error
        return request.result  # type: ignore[return-value]

    def _until_done(self, request: _Request[Any, Any]) -> None:
        """Wait for request's batch, leading one whenever none forms; Stop leaves the wait."""
        entry, told, shown = request.entry, time.perf_counter(), None
        while True:
            with self._cond:
                if request.done:
                    break
                lead = not self._leading
                if lead:
                    self._leading = True
                else:
                    self._cond.wait(POLL_S)
                place = self._place(request)
            if lead:
                try:
                    self._lead(entry)
                finally:
                    with self._cond:
                        self._leading = False
                        self._cond.notify_all()
                continue
            if entry is None:
                continue
            if entry.stopped():
                raise TurnCancelled("stopped while its request waited for a shared pass")
            if entry.waiting is not None and place is not None and time.perf_counter() - told >= POLL_S \
                    and place.describe() != shown:
                told, shown = time.perf_counter(), place.describe()
                entry.waiting(place)
        if shown is not None and entry is not None and entry.waiting is not None:
            entry.waiting(None)

    def _place(self, request: _Request[Any, Any]) -> Place | None:
        """Where a request that no running batch carries stands: the runs whose work goes first
        (the running batch's, and older requests of other keys), a slice each (lock held)."""
        if request not in self._pending or not self._running:  # taken, done or stopped
            return None
        older = self._pending[: self._pending.index(request)]
        ahead = len({r.entry for r in self._running}) + len({r.entry for r in older if r.key != request.key})
        return Place(ahead, ahead * self.turns.slice_s, True)

    def _lead(self, entry: Run | None) -> None:
        """Take the device, gather, and run one batch."""
        with self.turns.unit(entry, eager=True) if entry is not None else nullcontext():
            self._gather()
            batch = self._take()
            if batch:
                try:
                    self._run(batch, entry)
                finally:
                    with self._cond:
                        self._running = []

    def _gather(self) -> None:
        """Wait until no request has come for gather_s (counted from the last arrival, or from
        now if that was earlier: others may be about to ask), or max_gather_s passed; a lone run
        waits for nobody."""
        began = time.perf_counter()
        if self.turns.status()["admitted"] <= 1:
            return
        with self._cond:
            while True:
                now = time.perf_counter()
                quiet = max(self._last_arrival, began) + self.gather_s - now
                if quiet <= 0 or now - began >= self.max_gather_s:
                    return
                self._cond.wait(min(quiet, began + self.max_gather_s - now))

    def _take(self) -> list[_Request[Any, Any]]:
        """The pending requests of the first one's key, within its limit, in the order of their
        runs' device time so far (least first, as turns go: a newcomer's first estimate does
        not wait behind others' later chunks), then arrival."""
        with self._cond:
            if not self._pending:
                return []
            order = sorted(self._pending, key=lambda r: r.entry.served if r.entry is not None else 0.0)
            first, size = order[0], 0
            limit = first.limit if first.entry is None or first.entry.checkpointed else int(first.limit * FIRST_SHARE)
            batch: list[_Request[Any, Any]] = []
            for request in [r for r in order if r.key == first.key]:
                if batch and size + request.size > limit:
                    break
                batch.append(request)
                size += request.size
            for request in batch:
                self._pending.remove(request)
            self._running = batch
            return batch

    def _run(self, batch: list[_Request[Any, Any]], leader: Run | None) -> None:
        """Run a batch (one request at a time if it raises), charge each run its share, and
        wake the waiters."""
        began = time.perf_counter()
        try:
            _run_together(batch)
        except Exception:  # noqa: BLE001 - whose request failed is found by running them alone
            for request in batch:
                _run_together([request])
        finally:
            seconds, total = time.perf_counter() - began, sum(r.size for r in batch)
            with self._cond:
                for request in batch:
                    if not request.done:  # interrupted before its result came
                        request.error = TurnCancelled("the shared pass carrying it was interrupted")
                    request.done = True
                self.batches += 1
                self.requests += len(batch)
                self._cond.notify_all()
            if leader is not None:
                for request in batch:
                    if request.entry is not None and request.entry is not leader:
                        self.turns.charge(leader, request.entry, seconds * request.size / max(total, 1))


def _run_together(batch: list[_Request[Any, Any]]) -> None:
    """Run the batch's payloads in one call; a lone request keeps its error as its result."""
    try:
        results = batch[0].run_batch([r.payload for r in batch])
    except Exception as err:
        if len(batch) > 1:
            raise
        batch[0].error, batch[0].done = err, True
        return
    for request, result in zip(batch, results, strict=True):
        request.result, request.done = result, True


"""What a server run changes in the library, and the one place the library asks about it
(docs/design.md, "Architecture"): the turn a unit of model work waits for, the checkpoint at a
stream's chunk end, the step aside while a run waits on another's results, the device's one
logits block, and the batcher that gathers runs' small scoring calls into shared passes.

A server (the app's ``pages/_app/runtime/machine.py``) enters a run with ``turns.Turns.run``, which
records here the run the code executes in (:func:`entered`), and may make a
``batching.Batcher`` on its Turns, which registers here (:func:`attach_batcher`). The library
(the LM adapter, scoring, the proxy walk, the estimators' streams, the tasks' evaluator) calls
the hooks below and imports neither ``turns`` nor ``batching``. Outside a run every hook does
nothing: the CLI, scripts, notebooks and tests compute exactly what they would without it.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Hashable, Iterator
from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar

__all__ = ["Device", "SharedPasses", "aside", "attach_batcher", "batcher", "checkpoint", "entered",
           "head_scratch", "held", "unit"]

P = TypeVar("P")
R = TypeVar("R")


class Device(Protocol):
    """What the hooks call on one device's turns (``turns.Turns``); a run is its ``turns.Run``."""

    def unit(self, entry: Any, eager: bool = False) -> AbstractContextManager[None]: ...

    def pause(self, entry: Any) -> None: ...

    def aside(self, entry: Any) -> AbstractContextManager[None]: ...

    def scratch(self) -> dict[str, Any]: ...


class SharedPasses(Protocol):
    """What scoring calls on a device's shared passes (``batching.Batcher``)."""

    def submit(self, key: Hashable, payload: P, size: int, limit: int,
               run_batch: Callable[[list[P]], list[R]]) -> R: ...


# The device and the run this code executes in (set by Turns.run), and each device's batcher.
_RUN: ContextVar[tuple[Device, Any] | None] = ContextVar("marginal_turn", default=None)
_BATCHERS: weakref.WeakKeyDictionary[Device, SharedPasses] = weakref.WeakKeyDictionary()


# ---------------------------------------------------------------- set by the server


@contextlib.contextmanager
def entered(device: Device, entry: Any) -> Iterator[None]:
    """The with-block, and the code it calls in this thread, runs as entry's run on device."""
    token = _RUN.set((device, entry))
    try:
        yield
    finally:
        _RUN.reset(token)


def attach_batcher(device: Device, shared: SharedPasses) -> None:
    """From now on, small scoring calls of device's runs go to shared (one per device)."""
    _BATCHERS[device] = shared


def held() -> tuple[Device, Any] | None:
    """The device and the run this code executes in; None outside a run."""
    return _RUN.get()


# ---------------------------------------------------------------- asked by the library


def unit() -> AbstractContextManager[None]:
    """One unit of model work (a forward pass, a chunk of the head): inside a run it waits for
    the run's turn on the device (``Turns.unit``); outside one it does nothing."""
    return _in_current_run(lambda device, entry: device.unit(entry))


def aside() -> AbstractContextManager[None]:
    """A wait on something other than the device (another run's results): inside a run, the
    run's admission goes to others meanwhile (``Turns.aside``); outside one nothing."""
    return _in_current_run(lambda device, entry: device.aside(entry))


def checkpoint() -> None:
    """A natural break in a run's model work (a stream's chunk end): inside a run, another run
    that waits goes first (``Turns.pause``); outside one nothing."""
    place = held()
    if place is not None:
        place[0].pause(place[1])


def head_scratch(own: dict[str, Any]) -> dict[str, Any]:
    """Where the LM head keeps its logits block: the caller's own scratch, or inside a run the
    device's one (only the unit holding the device uses it, so waiting runs hold none)."""
    place = held()
    return own if place is None else place[0].scratch()


def batcher() -> SharedPasses | None:
    """The shared passes of the run this code executes in; None outside a run, where its device
    has none, or inside a unit (a shared pass's own work, or a unit that holds the device)."""
    place = held()
    if place is None or place[1].in_unit:
        return None
    return _BATCHERS.get(place[0])


@contextlib.contextmanager
def _in_current_run(block: Callable[[Device, Any], AbstractContextManager[None]]) -> Iterator[None]:
    """block(device, run) around the with-block for the run this code executes in, if any."""
    place = held()
    if place is None:
        yield
        return
    with block(*place):
        yield

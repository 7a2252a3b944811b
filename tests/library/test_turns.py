"""The device's turns (marginal_core.serving.turns) with fake units, no model: order, fairness, the cap,
stopping while queued, and a failing unit failing only its own run.

Time is a fake clock that moves only when a test moves it: a unit "takes" UNIT_S by advancing
it, a run "draws" between units by advancing it, so slices, idle graces and device seconds are
exact and nothing sleeps. Threads still stand for runs (a run waiting for its turn blocks), and
the tests wait for each other's states, never for time to pass.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from marginal_core.ground import hooks as serving_hooks
from marginal_core.ground.errors import MarginalError
from marginal_core.serving.turns import POLL_S, Place, Run, TurnCancelled, Turns

UNIT_S = 1.0  # fake seconds, exact in binary, so that sums of units meet slices exactly


class FakeClock:
    """Seconds that pass only when advanced (only a run inside its unit, or the test, moves it)."""

    def __init__(self) -> None:
        self.now = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


def _turns(**settings: float) -> tuple[Turns, FakeClock]:
    clock = FakeClock()
    return Turns(clock=clock, **settings), clock


def _wait_for(predicate: Callable[[], object], seconds: float = 10.0) -> None:
    """Wait until another thread has brought predicate about (a state, not a duration)."""
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        threading.Event().wait(0.001)


class Worker:
    """A run in its own thread: ``units`` units, each logging its owner and taking UNIT_S of the
    fake clock; ``during(i)`` runs inside unit i (where the test may hold the device)."""

    def __init__(self, t: Turns, clock: FakeClock, owner: str, units: int, log: list[str],
                 during: Callable[[int], None] | None = None, **hooks) -> None:
        self.run: Run | None = None
        self.error: BaseException | None = None

        def work() -> None:
            try:
                with t.run(owner, **hooks) as run:
                    self.run = run
                    for i in range(units):
                        with serving_hooks.unit():
                            log.append(owner)
                            clock.advance(UNIT_S)
                            if during is not None:
                                during(i)
            except BaseException as err:  # noqa: BLE001 - the test reads it
                self.error = err

        self.thread = threading.Thread(target=work, name=owner)

    def start(self) -> Worker:
        self.thread.start()
        return self

    def wants(self) -> bool:
        """Whether it is waiting for the device."""
        return self.run is not None and self.run.wants

    def join(self) -> None:
        self.thread.join(10)
        assert not self.thread.is_alive(), f"{self.thread.name} did not finish"


def _queued_then_released(t: Turns, clock: FakeClock, units: int, names: str) -> list[str]:
    """Runs named by names, of units units each, queued behind a holder in that order (each
    arrives after the last) until all wait for the device; then the holder lets go. Their log."""
    log: list[str] = []
    blocker, release = _hold(t, clock)
    workers = [Worker(t, clock, name, units, log) for name in names]
    for worker in workers:
        clock.advance(0.25)
        before = sum(t.status()[k] for k in ("admitted", "queued"))
        worker.start()
        _wait_for(lambda before=before: sum(t.status()[k] for k in ("admitted", "queued")) > before)
    _wait_for(lambda: all(w.wants() for w in workers))
    release.set()
    for w in [blocker, *workers]:
        w.join()
    return log


def _hold(t: Turns, clock: FakeClock) -> tuple[Worker, threading.Event]:
    """A run that holds the device in one unit until the returned event is set."""
    release, log = threading.Event(), []
    blocker = Worker(t, clock, "blocker", 1, log, during=lambda i: release.wait(10)).start()
    _wait_for(lambda: log == ["blocker"])
    return blocker, release


def test_outside_a_run_a_unit_is_free_and_nested_runs_join_the_outer_one():
    with serving_hooks.unit():
        assert serving_hooks.held() is None
    t, _ = _turns()
    with t.run("a") as outer:
        with t.run("a-again") as inner, serving_hooks.unit(), serving_hooks.unit():  # a unit inside a unit is part of it
            assert inner is outer and serving_hooks.held() == (t, outer)
            assert t.status() == {"admitted": 1, "queued": 0, "busy": 1}
    assert t.status() == {"admitted": 0, "queued": 0, "busy": 0}
    assert serving_hooks.held() is None


def test_a_runs_device_seconds_are_read_from_its_clock():
    """Served seconds and the first turn's wait are the Turns' clock's, to the fake second."""
    t, clock = _turns()
    log: list[str] = []
    clock.advance(5)
    with t.run("r") as run:
        clock.advance(2)  # page code before its first unit
        for _ in range(3):
            with serving_hooks.unit():
                log.append("r")
                clock.advance(UNIT_S)
        assert run.arrived == 5 and run.first_turn() == (2, 2)
    assert run.served == 3 * UNIT_S and log == ["r"] * 3


def test_waiting_runs_take_the_device_in_rounds():
    """Three runs queued behind a holder then share the device one turn each per round (with
    no slice, a turn is one unit), least served first."""
    t, clock = _turns(slice_s=0, first_slice_s=0)
    log = _queued_then_released(t, clock, 6, "abc")
    assert log == list("abc" * 6), log


def test_a_run_that_arrives_late_gets_its_first_unit_at_once():
    """A lone run keeps the device; a run that arrives while it works gets the device after the
    unit under way, and keeps it while it has used the device least."""
    t, clock = _turns(slice_s=0, first_slice_s=0)
    log: list[str] = []
    late = Worker(t, clock, "late", 3, log)

    def arrive(i: int) -> None:
        if i == 9:  # inside early's tenth unit, late arrives and waits
            late.start()
            _wait_for(late.wants)

    early = Worker(t, clock, "early", 40, log, during=arrive).start()
    early.join()
    late.join()
    assert log == ["early"] * 10 + ["late"] * 3 + ["early"] * 30


def test_a_turn_lasts_a_slice_and_ends_when_its_run_stays_out_of_its_units():
    """A run keeps the device for slice_s of units while another waits; a holder that does
    other work for longer than idle_s between units lets the waiting run in."""
    t, clock = _turns(slice_s=10 * UNIT_S, idle_s=5, first_slice_s=10 * UNIT_S)
    log = _queued_then_released(t, clock, 30, "ab")
    assert log == (["a"] * 10 + ["b"] * 10) * 3, log

    t, clock = _turns(slice_s=60, idle_s=5)
    log = []
    waiter = Worker(t, clock, "waiter", 1, log)

    def idle_holder() -> None:
        with t.run("idle"):
            with serving_hooks.unit():
                log.append("idle")
            waiter.start()
            _wait_for(waiter.wants)
            clock.advance(6)  # drawing a plot, say: the device is not in use for more than idle_s
            _wait_for(lambda: "waiter" in log)  # the waiter got in meanwhile
            with serving_hooks.unit():
                log.append("idle")

    holder = threading.Thread(target=idle_holder)
    holder.start()
    holder.join(10)
    waiter.join()
    assert log == ["idle", "waiter", "idle"]


def test_a_checkpoint_hands_the_device_to_a_waiting_run_and_a_lone_run_keeps_it():
    """A chunk's end (serving_hooks.checkpoint) ends the holder's turn when another run waits,
    though its slice and idle limit would let it keep the device; with nobody waiting it changes
    nothing."""
    t, clock = _turns(slice_s=60, idle_s=60)
    log: list[str] = []
    waiter = Worker(t, clock, "waiter", 1, log)

    def holder() -> None:
        with t.run("holder"):
            with serving_hooks.unit():
                log.append("holder")
                clock.advance(UNIT_S)
            serving_hooks.checkpoint()  # nobody waits yet: keeps the device
            assert t.status()["busy"] == 1
            waiter.start()
            _wait_for(waiter.wants)  # the waiter is at its first unit
            serving_hooks.checkpoint()
            with serving_hooks.unit():
                log.append("holder")

    thread = threading.Thread(target=holder)
    thread.start()
    thread.join(10)
    waiter.join()
    assert log == ["holder", "waiter", "holder"]


def test_a_newcomers_turn_lasts_until_its_first_checkpoint_then_turns_are_a_slice():
    """Before its first checkpoint (its first estimate) a run's units may use first_slice_s of
    the device while others wait; at the checkpoint the waiting run goes next."""
    t, clock = _turns(slice_s=UNIT_S, idle_s=60, first_slice_s=60)
    log: list[str] = []
    other = Worker(t, clock, "other", 3, log)

    def newcomer() -> None:
        with t.run("new"):
            for i in range(5):  # its first estimate: five units, five slices' worth
                with serving_hooks.unit():
                    log.append("new")
                    clock.advance(UNIT_S)
                    if i == 0:
                        other.start()
                        _wait_for(other.wants)
            serving_hooks.checkpoint()
            for _ in range(3):
                with serving_hooks.unit():
                    log.append("new")
                    clock.advance(UNIT_S)

    first = threading.Thread(target=newcomer)
    first.start()
    first.join(10)
    other.join()
    assert log == ["new"] * 5 + ["other"] * 3 + ["new"] * 3, log


def test_stop_takes_a_queued_run_out_at_once():
    """Stop is heard within a poll of the queue (real time: the poll is the implementation's)."""
    t, clock = _turns()
    log: list[str] = []
    stop = threading.Event()
    blocker, release = _hold(t, clock)
    queued = Worker(t, clock, "queued", 1, log, should_stop=stop.is_set).start()
    _wait_for(queued.wants)
    stopped = time.monotonic()
    stop.set()
    queued.join()
    assert time.monotonic() - stopped < 3 * POLL_S
    assert isinstance(queued.error, TurnCancelled) and log == []
    assert t.status() == {"admitted": 1, "queued": 0, "busy": 1}
    release.set()
    blocker.join()


def test_a_run_stopped_in_its_turn_starts_no_more_units():
    t, _ = _turns(slice_s=60)
    log: list[str] = []
    stop = threading.Event()
    with pytest.raises(TurnCancelled), t.run("r", should_stop=stop.is_set):
        for _ in range(5):
            with serving_hooks.unit():
                log.append("r")
            stop.set()
    assert log == ["r"]


def test_a_failing_unit_fails_only_its_own_run():
    t, clock = _turns()
    log: list[str] = []

    def fail(i: int) -> None:
        raise ValueError("boom")

    bad = Worker(t, clock, "bad", 1, [], during=fail)
    good = Worker(t, clock, "good", 5, log)
    bad.start()
    good.start()
    bad.join()
    good.join()
    assert isinstance(bad.error, ValueError) and good.error is None and log == ["good"] * 5
    assert t.status() == {"admitted": 0, "queued": 0, "busy": 0}


def test_runs_beyond_the_cap_wait_in_order_and_hear_where_they_stand():
    t, clock = _turns(max_runs=1)
    log: list[str] = []
    places: dict[str, list[Place | None]] = {"second": [], "third": []}
    blocker, release = _hold(t, clock)
    second = Worker(t, clock, "second", 1, log, waiting=places["second"].append).start()
    _wait_for(lambda: t.status()["queued"] == 1)
    third = Worker(t, clock, "third", 1, log, waiting=places["third"].append).start()
    _wait_for(lambda: t.status()["queued"] == 2)
    clock.advance(1.0)  # a waiting run is told where it stands once a poll's worth of its clock has passed
    _wait_for(lambda: places["third"] and places["second"])
    last_second, last_third = places["second"][-1], places["third"][-1]
    assert last_second is not None and not last_second.admitted and last_second.ahead == 1
    assert last_third is not None and last_third.ahead == 2 and "machine is full" in last_third.describe()
    release.set()
    for w in (blocker, second, third):
        w.join()
    assert log == ["second", "third"]
    assert places["second"][-1] is None and places["third"][-1] is None  # told when their turn came


def test_a_run_that_waits_aside_gives_its_admission_to_one_that_needs_the_machine():
    """A session following another's results (tasks/evaluator.py) needs no turn: with the cap
    at one, a run queued behind it is admitted and works while it waits aside; afterwards it
    queues again and gets the device once the other run has left."""
    t, clock = _turns(max_runs=1)
    log: list[str] = []
    aside, back = threading.Event(), threading.Event()

    def follower() -> None:
        with t.run("follower"):
            with serving_hooks.unit():
                log.append("follower")
            with serving_hooks.aside():
                aside.set()
                back.wait(10)
            with serving_hooks.unit():
                log.append("follower again")

    first = threading.Thread(target=follower)
    first.start()
    assert aside.wait(5)
    other = Worker(t, clock, "other", 2, log).start()
    other.join()  # admitted in the follower's place, so it finishes while the follower waits
    assert log == ["follower", "other", "other"] and t.status()["admitted"] == 0
    back.set()
    first.join(5)
    assert log[-1] == "follower again" and t.status() == {"admitted": 0, "queued": 0, "busy": 0}


def test_the_cap_must_admit_someone():
    with pytest.raises(MarginalError):
        Turns(max_runs=0)

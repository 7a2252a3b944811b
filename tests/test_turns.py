"""The device's turns (marginal_core.turns) with fake units, no model: order, fairness, the cap,
stopping while queued, and a failing unit failing only its own run."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from marginal_core import turns
from marginal_core.turns import Place, TurnCancelled, Turns

UNIT_S = 0.02


def _worker(t: Turns, owner: str, units: int, log: list[str], **hooks) -> threading.Thread:
    def work() -> None:
        with t.run(owner, **hooks):
            for _ in range(units):
                with turns.unit():
                    log.append(owner)
                    time.sleep(UNIT_S)

    return threading.Thread(target=work, name=owner)


def _hold_while(t: Turns, started: threading.Event, release: threading.Event) -> threading.Thread:
    """A run that holds the device until release is set (so that others queue up behind it)."""
    def hold() -> None:
        with t.run("blocker"), turns.unit():
            started.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    assert started.wait(5)
    return thread


def _hold_then_wait(t: Turns, hold, log: list[str], meanwhile=None) -> None:
    """Run hold in a thread until its first unit is logged, then a one-unit 'waiter' run beside
    it (and meanwhile, if given); both joined."""
    holder, waiter = threading.Thread(target=hold), _worker(t, "waiter", 1, log)
    holder.start()
    _wait_for(lambda: len(log) == 1)
    waiter.start()
    if meanwhile is not None:
        meanwhile()
    holder.join(5)
    waiter.join(5)


def _wait_for(predicate, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_outside_a_run_a_unit_is_free_and_nested_runs_join_the_outer_one():
    with turns.unit():
        assert turns.current() is None
    t = Turns()
    with t.run("a"):
        with t.run("a-again"), turns.unit(), turns.unit():  # a unit inside a unit is part of it
            assert turns.current() is t and t.status() == {"admitted": 1, "queued": 0, "busy": 1}
    assert t.status() == {"admitted": 0, "queued": 0, "busy": 0}


def test_waiting_runs_take_the_device_in_rounds():
    """Three runs queued behind a holder then share the device one turn each per round (with
    no slice, a turn is one unit)."""
    t, log = Turns(slice_s=0, first_slice_s=0), []
    started, release = threading.Event(), threading.Event()
    blocker = _hold_while(t, started, release)
    workers = [_worker(t, name, 6, log) for name in "abc"]
    for w in workers:
        w.start()
    _wait_for(lambda: t.status()["admitted"] == 4)
    release.set()
    for w in [blocker, *workers]:
        w.join(10)
    assert sorted(log) == sorted("abc" * 6)
    for round_start in range(0, 18, 3):
        assert sorted(log[round_start : round_start + 3]) == ["a", "b", "c"], log


def test_a_run_that_arrives_late_gets_its_first_unit_at_once():
    t, log = Turns(slice_s=0, first_slice_s=0), []
    first = _worker(t, "early", 40, log)
    first.start()
    _wait_for(lambda: len(log) >= 10)
    late = _worker(t, "late", 3, log)
    arrived = len(log)
    late.start()
    late.join(10)
    first.join(10)
    assert log.index("late") <= arrived + 2  # the unit running when it came, then its own
    assert log[log.index("late") : log.index("late") + 3] == ["late"] * 3  # least served goes first


def test_a_turn_lasts_a_slice_and_ends_when_its_run_stays_out_of_its_units():
    """A run keeps the device for about slice_s of units while another waits; a holder that
    does other work for longer than idle_s between units lets the waiting run in."""
    t, log = Turns(slice_s=10 * UNIT_S, idle_s=0.05, first_slice_s=10 * UNIT_S), []
    first = _worker(t, "a", 30, log)
    second = _worker(t, "b", 30, log)
    first.start()
    _wait_for(lambda: len(log) >= 1)
    second.start()
    first.join(10)
    second.join(10)
    runs = [len(list(g)) for _, g in itertools.groupby(log)]
    assert len(runs) >= 4 and sum(runs[:-1]) / len(runs[:-1]) >= 5, runs  # turns of several units each
    t, log = Turns(slice_s=60, idle_s=0.05), []

    def idle_holder() -> None:
        with t.run("idle"):
            with turns.unit():
                log.append("idle")
            time.sleep(0.5)  # drawing a plot, say: the device is not in use
            with turns.unit():
                log.append("idle")

    _hold_then_wait(t, idle_holder, log)
    assert log == ["idle", "waiter", "idle"]


def test_a_checkpoint_hands_the_device_to_a_waiting_run_and_a_lone_run_keeps_it():
    """A chunk's end (turns.checkpoint) ends the holder's turn when another run waits, though
    its slice and idle limit would let it keep the device; with nobody waiting it changes nothing."""
    t, log = Turns(slice_s=60, idle_s=60), []
    waiter_came = threading.Event()

    def holder() -> None:
        with t.run("holder"):
            with turns.unit():
                log.append("holder")
            turns.checkpoint()  # nobody waits yet: keeps the device
            assert t.status()["busy"] == 1
            waiter_came.wait(5)
            time.sleep(0.1)  # the waiter is at its first unit
            turns.checkpoint()
            with turns.unit():
                log.append("holder")

    def came() -> None:
        _wait_for(lambda: t.status()["admitted"] == 2)
        waiter_came.set()

    _hold_then_wait(t, holder, log, came)
    assert log == ["holder", "waiter", "holder"]


def test_a_newcomers_turn_lasts_until_its_first_checkpoint_then_turns_are_a_slice():
    """Before its first checkpoint (its first estimate) a run's units may use first_slice_s of
    the device while others wait; at the checkpoint the waiting run goes next."""
    t, log = Turns(slice_s=UNIT_S, idle_s=60, first_slice_s=60), []

    def newcomer() -> None:
        with t.run("new"):
            for _ in range(5):  # its first estimate: five units, five slices' worth
                with turns.unit():
                    log.append("new")
                    time.sleep(UNIT_S)
            turns.checkpoint()
            for _ in range(3):
                with turns.unit():
                    log.append("new")
                    time.sleep(UNIT_S)

    first, other = threading.Thread(target=newcomer), _worker(t, "other", 3, log)
    first.start()
    _wait_for(lambda: log.count("new") >= 1)
    other.start()
    first.join(5)
    other.join(5)
    assert log == ["new"] * 5 + ["other"] * 3 + ["new"] * 3, log


def test_stop_takes_a_queued_run_out_at_once():
    t, log, stop = Turns(), [], threading.Event()
    started, release = threading.Event(), threading.Event()
    blocker = _hold_while(t, started, release)
    errors: list[BaseException] = []

    def queued() -> None:
        try:
            with t.run("queued", should_stop=stop.is_set), turns.unit():
                log.append("queued")
        except TurnCancelled as err:
            errors.append(err)

    thread = threading.Thread(target=queued)
    thread.start()
    _wait_for(lambda: t.status()["admitted"] == 2)
    stopped = time.monotonic()
    stop.set()
    thread.join(5)
    assert time.monotonic() - stopped < 3 * turns.POLL_S
    assert len(errors) == 1 and not log
    assert t.status() == {"admitted": 1, "queued": 0, "busy": 1}
    release.set()
    blocker.join(5)


def test_a_run_stopped_in_its_turn_starts_no_more_units():
    t, log, stop = Turns(slice_s=60), [], threading.Event()
    with pytest.raises(TurnCancelled), t.run("r", should_stop=stop.is_set):
        for _ in range(5):
            with turns.unit():
                log.append("r")
            stop.set()
    assert log == ["r"]


def test_a_failing_unit_fails_only_its_own_run():
    t, log = Turns(), []
    failures: list[BaseException] = []

    def failing() -> None:
        try:
            with t.run("bad"), turns.unit():
                raise ValueError("boom")
        except ValueError as err:
            failures.append(err)

    bad, good = threading.Thread(target=failing), _worker(t, "good", 5, log)
    bad.start()
    good.start()
    bad.join(5)
    good.join(5)
    assert len(failures) == 1 and log == ["good"] * 5
    assert t.status() == {"admitted": 0, "queued": 0, "busy": 0}


def test_runs_beyond_the_cap_wait_in_order_and_hear_where_they_stand():
    t, log = Turns(max_runs=1), []
    places: dict[str, list[Place]] = {"second": [], "third": []}
    started, release = threading.Event(), threading.Event()
    blocker = _hold_while(t, started, release)
    second = _worker(t, "second", 1, log, waiting=places["second"].append)
    second.start()
    _wait_for(lambda: t.status()["queued"] == 1)
    third = _worker(t, "third", 1, log, waiting=places["third"].append)
    third.start()
    _wait_for(lambda: places["third"] and places["second"])
    assert not places["second"][-1].admitted and places["second"][-1].ahead == 1
    assert places["third"][-1].ahead == 2 and "machine is full" in places["third"][-1].describe()
    release.set()
    for w in (blocker, second, third):
        w.join(10)
    assert log == ["second", "third"]


def test_a_run_that_waits_aside_gives_its_admission_to_one_that_needs_the_machine():
    """A session following another's results (tasks/evaluator.py) needs no turn: with the cap
    at one, a run queued behind it is admitted and works while it waits aside; afterwards it
    queues again and gets the device once the other run has left."""
    t, log = Turns(max_runs=1), []
    aside, back = threading.Event(), threading.Event()

    def follower() -> None:
        with t.run("follower"):
            with turns.unit():
                log.append("follower")
            with turns.aside():
                aside.set()
                back.wait(10)
            with turns.unit():
                log.append("follower again")

    first = threading.Thread(target=follower)
    first.start()
    assert aside.wait(5)
    other = _worker(t, "other", 2, log)
    other.start()
    other.join(5)  # admitted in the follower's place, so it finishes while the follower waits
    assert log == ["follower", "other", "other"] and t.status()["admitted"] == 0
    back.set()
    first.join(5)
    assert log[-1] == "follower again" and t.status() == {"admitted": 0, "queued": 0, "busy": 0}


def test_the_cap_must_admit_someone():
    with pytest.raises(turns.MarginalError):
        Turns(max_runs=0)

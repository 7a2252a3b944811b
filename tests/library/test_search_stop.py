"""The search's clock (issue 59): values settled (the last round moved no value by more than the
tolerance, dated to the round before), regions certified, the explicit time budget and the
default stop's plan, a stalled round, and bad budgets as one clear error. The default stop on a
real search is in test_surprisal.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from marginal_core.estimators import search_stop
from marginal_core.estimators.search_stop import SearchClock, check_time_budget, parse_time_budget
from marginal_core.ground.errors import MarginalError


def test_values_settle_on_the_round_before_a_still_round_and_unsettle_when_one_moves():
    clock = SearchClock(0.01, "auto")
    assert clock.ends_at == search_stop.AUTO_CAP_S  # before the values settle: the cap alone
    clock.round(1.0, np.array([5.0, 3.0, math.inf]), np.array([0.001, 2.0, math.inf]))
    assert clock.settled_at is None and (clock.certified, clock.regions) == (1, 3)
    clock.round(2.0, np.array([5.0, 3.005, 7.0]), np.array([0.001, 0.5, 9.0]))  # a value came from inf: it moved
    assert clock.settled_at is None
    clock.round(3.0, np.array([5.0, 3.0, 7.009]), np.array([0.0, 0.005, 1.0]))
    assert clock.settled_at == 2.0 and clock.certified == 2
    share = max(search_stop.CERTIFY_FLOOR_S, search_stop.CERTIFY_SHARE * 3.0)
    assert clock.ends_at == min(search_stop.AUTO_CAP_S, 3.0 + share) and not clock.ended
    clock.round(4.0, np.array([5.0, 3.0, 7.2]), np.array([0.0, 0.005, 0.5]))  # moved again: not settled
    assert clock.settled_at is None and clock.ends_at == search_stop.AUTO_CAP_S


def test_every_region_certified_settles_the_values():
    clock = SearchClock(0.01)
    clock.round(0.5, np.array([1.0, 2.0]), np.array([0.001, 0.002]))
    assert clock.settled_at == 0.5 and clock.certified == clock.regions == 2 and clock.ends_at is None


def test_the_default_stop_ends_once_the_certificate_had_its_share():
    clock = SearchClock(0.01, "auto")
    clock.round(1.0, np.array([1.0, 2.0]), np.array([0.5, 0.5]))
    clock.round(2.0, np.array([1.0, 2.0]), np.array([0.4, 0.4]))
    end = clock.ends_at
    assert clock.settled_at == 1.0 and end is not None and not clock.over(end - 0.1) and clock.over(end)
    clock.round(end, np.array([1.0, 2.0]), np.array([0.3, 0.3]))
    assert clock.ended == "default stop"


def test_an_explicit_budget_replaces_the_default_stop():
    clock = SearchClock(0.01, 5.0)
    clock.round(1.0, np.array([1.0]), np.array([0.5]))
    clock.round(2.0, np.array([1.0]), np.array([0.4]))  # settled: the budget still holds
    assert clock.settled_at == 1.0 and clock.ends_at == 5.0 and not clock.ended
    clock.round(5.5, np.array([1.0]), np.array([0.3]))
    assert clock.ended == "time budget"


def test_a_round_stalls_only_if_no_open_interval_narrowed_by_the_tolerance_or_half_its_excess():
    clock = SearchClock(0.01)

    def ended(before: list[float], widths: list[float]) -> str:
        return search_stop.why_ended(False, True, True, np.array(widths), np.array(before), clock, lambda: False)

    # Gemma 3's last word of 'The orchestra rehearsed...': 0.0173 -> 0.0111 moved 0.0062 < 0.01, yet
    # more than half of the 0.0073 over the tolerance; the next round certified it (0.0074)
    assert ended([0.0, 0.0173], [0.0, 0.0111]) == ""
    assert ended([0.0, 0.0111], [0.0, 0.0105]) == ""  # 0.0006 of the 0.0011 over
    assert ended([0.0, 0.0111], [0.0, 0.0109]) == "stalled"  # 0.0002: less than half
    assert ended([5.0, 0.0], [4.98, 0.0]) == ""  # far over: the tolerance
    assert ended([5.0, 0.0], [4.995, 0.0]) == "stalled"
    assert ended([5.0, 0.02], [5.0, 0.0]) == ""  # certified this round
    assert ended([5.0, 0.009], [5.0, 0.0]) == "stalled"  # certified before: not a step
    assert ended([5.0, 0.0111], [5.0, 0.009]) == ""


@pytest.mark.parametrize("text, budget", [("auto", "auto"), ("none", None), (" 12.5 ", 12.5), ("0", 0.0)])
def test_the_command_lines_budget(text, budget):
    assert parse_time_budget(text) == budget


@pytest.mark.parametrize("text", ["-1", "soon", "nan", "inf", ""])
def test_a_bad_command_line_budget_is_one_clear_error(text):
    with pytest.raises(MarginalError, match="--time-budget takes a number of seconds"):
        parse_time_budget(text)


@pytest.mark.parametrize("value", [-0.5, math.nan, "later", True])
def test_a_bad_library_budget_is_one_clear_error(value):
    with pytest.raises(MarginalError, match="the time budget is a number of seconds"):
        check_time_budget(value)


def test_a_round_near_the_end_of_the_budget_takes_the_rows_the_time_left_holds():
    clock = SearchClock(0.01, 10.0)
    assert clock.rows(2.0, 512, None) == 512  # the rate not known yet
    assert clock.rows(2.0, 512, 0.1) == 80 and clock.rows(9.95, 512, 0.1) == 1 and clock.rows(2.0, 0, 0.1) == 0
    assert SearchClock(0.01).rows(2.0, 512, 0.1) == 512  # no budget: no limit

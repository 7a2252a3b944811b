"""The search's clock (issue 59): values settled (the last round moved no value by more than the
tolerance, dated to the round before), regions certified, the explicit time budget and the
default stop's plan, a stalled round, and bad budgets as one clear error. The default stop on a
real search is in test_surprisal.py."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest

from marginal_core.ground.errors import MarginalError
from marginal_core.search import clock as search_stop
from marginal_core.search.clock import Deadline, SearchClock
from marginal_core.search.ending import Ended
from marginal_core.search.settings import check_time_budget, parse_time_budget


def test_values_settle_on_the_round_before_a_still_round_and_unsettle_when_one_moves():
    clock = SearchClock(0.01, Deadline("auto"))
    assert clock.deadline.ends_at == search_stop.AUTO_CAP_S  # before the values settle: the cap alone
    clock.round(1.0, np.array([5.0, 3.0, math.inf]), np.array([0.001, 2.0, math.inf]))
    assert clock.settled_at is None and (clock.certified, clock.regions) == (1, 3)
    clock.round(2.0, np.array([5.0, 3.005, 7.0]), np.array([0.001, 0.5, 9.0]))  # a value came from inf: it moved
    assert clock.settled_at is None
    clock.round(3.0, np.array([5.0, 3.0, 7.009]), np.array([0.0, 0.005, 1.0]))
    assert clock.settled_at == 2.0 and clock.certified == 2
    share = max(search_stop.CERTIFY_FLOOR_S, search_stop.CERTIFY_SHARE * 3.0)
    assert clock.deadline.ends_at == min(search_stop.AUTO_CAP_S, 3.0 + share) and not clock.late
    clock.round(4.0, np.array([5.0, 3.0, 7.2]), np.array([0.0, 0.005, 0.5]))  # moved again: not settled
    assert clock.settled_at is None and clock.deadline.ends_at == search_stop.AUTO_CAP_S


def test_every_region_certified_settles_the_values():
    clock = SearchClock(0.01, Deadline(None))
    clock.round(0.5, np.array([1.0, 2.0]), np.array([0.001, 0.002]))
    assert clock.settled_at == 0.5 and clock.certified == clock.regions == 2 and clock.deadline.ends_at is None


def test_the_default_stop_ends_once_the_certificate_had_its_share():
    clock = SearchClock(0.01, Deadline("auto"))
    clock.round(1.0, np.array([1.0, 2.0]), np.array([0.5, 0.5]))
    clock.round(2.0, np.array([1.0, 2.0]), np.array([0.4, 0.4]))
    end = clock.deadline.ends_at
    assert clock.settled_at == 1.0 and end is not None and not clock.deadline.over(end - 0.1) and clock.deadline.over(end)
    clock.round(end, np.array([1.0, 2.0]), np.array([0.3, 0.3]))
    assert clock.late and clock.deadline.reason() == Ended.DEFAULT_STOP


def test_an_explicit_budget_replaces_the_default_stop():
    clock = SearchClock(0.01, Deadline(5.0))
    clock.round(1.0, np.array([1.0]), np.array([0.5]))
    clock.round(2.0, np.array([1.0]), np.array([0.4]))  # settled: the budget still holds
    assert clock.settled_at == 1.0 and clock.deadline.ends_at == 5.0 and not clock.late
    clock.round(5.5, np.array([1.0]), np.array([0.3]))
    assert clock.late and clock.deadline.reason() == Ended.TIME_BUDGET


def test_a_round_stalls_only_if_no_open_interval_narrowed_by_the_tolerance_or_half_its_excess():
    clock = SearchClock(0.01, Deadline(None))

    def ended(before: list[float], widths: list[float]) -> Ended | None:
        return search_stop.why_ended(False, True, True, np.array(widths), np.array(before), clock, lambda: False)

    # Gemma 3's last word of 'The orchestra rehearsed...': 0.0173 -> 0.0111 moved 0.0062 < 0.01, yet
    # more than half of the 0.0073 over the tolerance; the next round certified it (0.0074)
    assert ended([0.0, 0.0173], [0.0, 0.0111]) is None
    assert ended([0.0, 0.0111], [0.0, 0.0105]) is None  # 0.0006 of the 0.0011 over
    assert ended([0.0, 0.0111], [0.0, 0.0109]) == Ended.STALLED  # 0.0002: less than half
    assert ended([5.0, 0.0], [4.98, 0.0]) is None  # far over: the tolerance
    assert ended([5.0, 0.0], [4.995, 0.0]) == Ended.STALLED
    assert ended([5.0, 0.02], [5.0, 0.0]) is None  # certified this round
    assert ended([5.0, 0.009], [5.0, 0.0]) == Ended.STALLED  # certified before: not a step
    assert ended([5.0, 0.0111], [5.0, 0.009]) is None


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
    clock = SearchClock(0.01, Deadline(10.0))
    assert clock.rows(2.0, 512, None) == 512  # the rate not known yet
    assert clock.rows(2.0, 512, 0.1) == 80 and clock.rows(9.95, 512, 0.1) == 1 and clock.rows(2.0, 0, 0.1) == 0
    assert SearchClock(0.01, Deadline(None)).rows(2.0, 512, 0.1) == 512  # no budget: no limit


def test_no_end_reason_is_written_as_a_free_string():
    """Why a search ended is one of ``Ended``'s members everywhere: no module outside ending.py
    compares an ``ended`` with a string, passes one as ``ended=``, or keeps a table of the words."""
    root = Path(__file__).resolve().parents[2]
    words = {e.value for e in Ended}
    paths = [root / "app.py", *(root / "marginal_core").rglob("*.py"), *(root / "pages").rglob("*.py")]
    found = []
    for path in paths:
        if path.name == "ending.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            strings = []
            if isinstance(node, ast.Compare) and any("ended" in ast.unparse(o) for o in [node.left, *node.comparators]):
                strings = [o for o in [node.left, *node.comparators] if isinstance(o, ast.Constant)]
            elif isinstance(node, ast.keyword) and node.arg == "ended":
                strings = [node.value] if isinstance(node.value, ast.Constant) else []
            elif isinstance(node, ast.Dict) and all(isinstance(v, ast.Constant) for v in node.values):
                keys = [k for k in node.keys if isinstance(k, ast.Constant) and k.value in words]
                strings = keys if len(keys) > 1 else []  # a table of the words and what they say
            found += [f"{path.relative_to(root)}:{s.lineno}: {s.value!r}" for s in strings if s.value in words]
    assert not found, found

"""The app's helpers from pages._app that need no model: the rank table, friendly errors, defaults,
and how a stopped live run says how far it got."""

from __future__ import annotations

import dataclasses
import math

from marginal_core.estimators.run_state import BeamRun, Completion, RunState
from marginal_core.ground.errors import MarginalError
from pages._app.runtime import live
from pages._app.ui import defaults, error_messages
from pages.views import table1
from tests.viz_cases import fake_estimate

# --------------------------------------------------------------------------------------------
# App helpers that need no model


def test_rank_table_reports_mean_and_std_per_length():
    from marginal_core.tasks.rank import by_length

    rows = [{"length": n, "rho": rho, "distinct": 5} for n, rho in ((50, 0.5), (50, 0.7), (100, 0.9), (100, math.nan))]
    table = by_length(rows)
    assert [r["rho"] for r in table] == ["0.60 ± 0.10", "0.90"]  # one rho: its value, no spread
    assert [r["with_rho"] for r in table] == [2, 1] and [r["sentences"] for r in table] == [2, 2]
    for length, sentences in table1.RANK_SENTENCES.items():
        assert all(abs(len(s) - length) <= length * 0.15 for s in sentences), length


def test_describe_error_is_friendly():
    level, message = error_messages.describe_error(MarginalError("the text is empty"))
    assert (level, message) == ("error", "the text is empty")
    level, message = error_messages.describe_error(RuntimeError("CUDA out of memory. Tried to allocate"), "scoring")
    assert level == "error" and message.startswith("Out of memory while scoring")
    level, message = error_messages.describe_error(ValueError("bad value\nTraceback (most recent call last)"))
    assert "ValueError: bad value" in message and "Traceback" not in message
    assert defaults.exact_feasible(defaults.APP_EXACT_BUDGET + 1)
    assert not defaults.exact_feasible(defaults.APP_EXACT_BUDGET + 2)
    assert live.live_chunk(100) == 50 and live.live_chunk(100_000) == 500


def test_a_stopped_live_run_says_how_far_it_got_in_its_own_unit(qa):
    """Samples for the lattice; for the beam, steps and paths completed (it asks for no samples)."""
    est = fake_estimate(qa, k=10)
    est = dataclasses.replace(est, run=RunState(Completion(40, done=False, cancelled=True), ((10, 1.0),)))
    assert live.Unfinished(40, est).describe() == "after 10 of 40 samples"
    assert live.Unfinished(40, unit="steps").describe() == "before the beam's first step (nothing was kept)"
    beam = dataclasses.replace(est, method="beam", run=BeamRun(Completion(7, done=False, cancelled=True), ((10, 1.0),), steps=3))
    assert live.Unfinished(40, beam, unit="steps").describe() == "after 10 paths completed, step 3 of 7"

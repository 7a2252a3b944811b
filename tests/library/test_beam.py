"""The beam estimator against exact enumeration: it finds every path once its width covers the
lattice, its bound never exceeds exact and never falls as the width grows, its best path is the
most probable one, and a stopped beam keeps what it found."""

from __future__ import annotations

import numpy as np
import pytest

from marginal_core.cli.commands import main as cli_main
from marginal_core.estimators.estimate_options import EstimateOptions
from marginal_core.estimators.marginalizer import Marginalizer
from marginal_core.estimators.methods import Method
from marginal_core.ground.errors import MarginalError

QUESTION = "Question: What is the capital of France?\nAnswer:"


@pytest.mark.parametrize("context", [None, QUESTION])
def test_a_wide_beam_finds_every_path_with_its_exact_score(lm, context, exact_of):
    m = Marginalizer(lm, " Paris", context)
    beam, exact = m.beam(64), exact_of(lm, " Paris", context)
    assert beam.run.done and not beam.run.cancelled
    exact_scores = dict(zip(exact.paths.tolist(), exact.log_p))
    assert sorted(beam.paths.tolist()) == sorted(exact_scores)  # every non-canonical path, once
    for path, score in zip(beam.paths.tolist(), beam.log_p):
        assert score == pytest.approx(exact_scores[path], abs=2e-4)
    assert beam.log_noncanonical == pytest.approx(exact.log_noncanonical, abs=2e-4)
    assert beam.paths.tolist()[int(np.argmax(beam.log_p))] == exact.paths.tolist()[int(np.argmax(exact.log_p))]


def test_the_bound_grows_with_the_width_and_stays_below_exact(smollm_model, exact_of):
    m = Marginalizer(smollm_model, " eight legs")
    exact = exact_of(smollm_model, " eight legs")
    beams = [m.beam(width) for width in (1, 2, 4, 16)]
    bounds = [b.log_noncanonical for b in beams]
    assert all(a <= b + 1e-9 for a, b in zip(bounds, bounds[1:]))
    assert bounds[-1] <= exact.log_noncanonical + 2e-4
    assert bounds[0] > -np.inf
    best = beams[0]
    assert best.paths.tolist()[int(np.argmax(best.log_p))] == exact.paths.tolist()[int(np.argmax(exact.log_p))]


def test_a_stopped_beam_keeps_the_paths_it_completed(smollm_model):
    m = Marginalizer(smollm_model, " eight legs")
    whole = m.beam(4)
    seen = []
    stream = m.stream(Method.BEAM, beam_width=4, should_stop=lambda: bool(seen),
                      progress=lambda done, total: seen.append(done))
    last = list(stream)[-1]
    assert last.run.cancelled and not last.run.done
    assert last.num_samples < whole.num_samples
    assert last.paths.tolist() == whole.paths.tolist()[: last.num_samples]  # found in the same order


def test_a_text_with_one_tokenization_needs_no_beam(smollm_model):
    beam = Marginalizer(smollm_model, "a").beam(16)
    assert beam.num_samples == 0 and beam.forward_passes == 0
    assert beam.log_noncanonical == -np.inf and beam.run.done


@pytest.mark.models
@pytest.mark.parametrize("width", [0, -3, 1025])
def test_widths_out_of_range_are_refused_before_any_work(width, capsys):
    with pytest.raises(MarginalError, match="between 1 and 1024"):
        EstimateOptions(beam_width=width)
    assert cli_main(["estimate", "hi", "--methods", "beam", "--beam-width", str(width)]) == 2
    assert "beam width must be between 1 and 1024" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# The anytime beam (no width): widths 16, 64, 256, 1024 until a round prunes nothing or a
# widening adds less than the tolerance


@pytest.mark.parametrize("context", [None, QUESTION])
def test_the_anytime_beam_is_a_bound_that_rises_by_round_and_is_exact_when_nothing_was_pruned(lm, context, exact_of):
    m = Marginalizer(lm, " eight legs", context)
    exact = exact_of(lm, " eight legs", context)
    stream = list(m.stream(Method.BEAM, beam_width=None))
    bounds = [e.log_noncanonical for e in stream]
    assert all(a <= b + 1e-12 for a, b in zip(bounds, bounds[1:]))  # never falls, within or across rounds
    auto = stream[-1]
    assert auto.run.done and not auto.run.cancelled and auto.run.rounds
    masses = [r.log_mass for r in auto.run.rounds]
    assert [r.seconds for r in auto.run.rounds] == sorted(r.seconds for r in auto.run.rounds)
    assert auto.run.rounds[-1].paths == auto.num_samples  # the union over the rounds
    assert all(a <= b + 1e-12 for a, b in zip(masses, masses[1:]))
    assert auto.log_noncanonical <= exact.log_noncanonical + 2e-4  # a bound
    width = auto.run.rounds[-1].width
    fixed = m.beam(width)
    assert set(fixed.paths.tolist()) <= set(auto.paths.tolist())  # the rounds' union holds the fixed width's paths
    assert auto.log_noncanonical >= fixed.log_noncanonical - 1e-5  # (a path scored in another batch moves by ~1e-6)
    before = auto.run.rounds[-2].log_mass if len(auto.run.rounds) > 1 else -np.inf
    last = auto.run.rounds[-1]
    assert last.pruned == 0 or last.log_mass - before < 0.01 or last.certified_gap < 0.01  # exact, or converged
    assert exact.log_noncanonical <= np.logaddexp(last.log_mass, last.log_missed) + 2e-4  # the certificate holds
    if last.pruned == 0:
        assert auto.log_noncanonical == pytest.approx(exact.log_noncanonical, abs=2e-4)


@pytest.mark.parametrize(("fixture", "text", "context"), [
    *(("smollm_model", text, context) for text in (" eight legs", " a barometer", "Straßenbahn")
      for context in (None, QUESTION)),
    *(("gemma_model", " eight legs", context) for context in (None, QUESTION)),  # Gemma's enumerations cost more
])
def test_what_a_beam_pruned_bounds_what_it_missed(fixture, text, context, request, exact_of):
    """Every path a walk did not find extends a pruned prefix, so the exact non-canonical mass is
    at most the mass found plus the pruned prefixes' probability (log_missed), at every width."""
    from marginal_core.estimators.beam import beam_stream

    lm = request.getfixturevalue(fixture)
    m = Marginalizer(lm, text, context)
    exact = exact_of(lm, text, context).log_noncanonical
    for width in (1, 2, 4, 16):
        walk = list(beam_stream(lm, m.lattice, width, m.context_state()))[-1]
        assert walk.log_mass <= exact + 2e-4
        assert exact <= np.logaddexp(walk.log_mass, walk.log_missed) + 2e-4, width
        assert (walk.log_missed == -np.inf) == (walk.pruned == 0)


def test_an_anytime_beam_whose_pruned_prefixes_cannot_hold_more_stops_after_one_round(smollm_model, exact_of):
    """On an answer, what W = 16 pruned is too improbable to add 0.01 nats: no second round, and
    the sentence says how little more the exact marginal can hold."""
    from marginal_core.estimators.beam_width import describe_rounds

    m = Marginalizer(smollm_model, " a barometer", QUESTION)
    auto = m.beam()
    (first,) = auto.run.rounds
    assert first.width == 16 and first.pruned > 0 and first.certified_gap < 0.01
    assert auto.log_noncanonical == pytest.approx(exact_of(smollm_model, " a barometer", QUESTION).log_noncanonical, abs=0.01)
    assert "could hold at most less than 0.01% more mass" in describe_rounds(auto.run.rounds)


def test_an_anytime_beam_that_prunes_nothing_is_exact_after_one_round(smollm_model, exact_of):
    m = Marginalizer(smollm_model, " Paris", QUESTION)
    auto, exact = m.beam(), exact_of(smollm_model, " Paris", QUESTION)
    assert [(r.width, r.pruned) for r in auto.run.rounds] == [(16, 0)]
    assert sorted(auto.paths.tolist()) == sorted(exact.paths.tolist())
    assert auto.log_noncanonical == pytest.approx(exact.log_noncanonical, abs=2e-4)


def test_stop_and_the_time_budget_keep_the_best_bound_so_far(smollm_model):
    m = Marginalizer(smollm_model, "Entschuldigung")
    whole = m.beam()
    seen = []
    stopped = list(m.stream(Method.BEAM, beam_width=None, should_stop=lambda: len(seen) > 2,
                            progress=lambda done, total: seen.append(done)))[-1]
    assert stopped.run.cancelled and not stopped.run.done and stopped.num_samples <= whole.num_samples
    assert set(stopped.paths.tolist()) <= set(whole.paths.tolist())
    timed = m.estimate(Method.BEAM, beam_width=None, time_budget=1e-3)
    assert timed.run.done and not timed.run.cancelled and len(timed.run.rounds) <= 1
    assert timed.log_noncanonical <= whole.log_noncanonical + 1e-12


@pytest.mark.models
def test_auto_width_on_the_command_line(capsys):
    assert cli_main(["estimate", " Paris", "--model", "smollm2-135m", "--methods", "beam", "--device", "cpu",
                     "--dtype", "float32", "--json"]) == 0
    import json

    auto = json.loads(capsys.readouterr().out)["methods"]["beam"]
    assert auto["log_marginal"] is not None
    assert cli_main(["estimate", "hi", "--methods", "beam", "--beam-width", "wide"]) == 2
    assert "a number from 1 to 1024 or 'auto'" in capsys.readouterr().err


def test_a_widening_pays_the_head_only_for_new_prefixes(smollm_model):
    """The rounds share one memo of prefixes' next-token scores: the anytime beam's head rows are
    the union of its rounds' prefixes, not their sum."""
    from marginal_core.estimators.beam import anytime_beam, beam_stream

    m = Marginalizer(smollm_model, "Entschuldigung")
    auto = list(anytime_beam(smollm_model, m.lattice, m.context_state(), widths=(16, 64), tolerance=0.0))[-1]
    widths = [r.width for r in auto.rounds]
    assert widths == [16, 64]
    fixed = [list(beam_stream(smollm_model, m.lattice, w, m.context_state()))[-1] for w in widths]
    assert fixed[-1].scored <= auto.scored < sum(f.scored for f in fixed)
    assert auto.log_mass == pytest.approx(fixed[-1].log_mass, abs=1e-5)  # scores from other batches: ~1e-6


def test_a_capped_anytime_beam_stops_at_the_cap_and_says_how_converged_it_is(smollm_model):
    """A class server caps the widest round; the rounds' sentence says what the last widening added."""
    from marginal_core.estimators.beam_width import Round, auto_widths, describe_rounds

    assert auto_widths() == (16, 64, 256, 1024) and auto_widths(64) == (16, 64) and auto_widths(100) == (16, 64, 100)
    assert auto_widths(8) == (8,)
    capped = Marginalizer(smollm_model, "Entschuldigung").estimate(Method.BEAM, beam_width=None, max_beam_width=16)
    assert [r.width for r in capped.run.rounds] == [16]
    assert "the bound is exact" in describe_rounds([Round(16, -3.0, 0, 0.1, 5)])
    assert describe_rounds([Round(16, -3.0, 4, 0.1, 5), Round(64, -2.9, 2, 0.3, 9)]) == (
        "widths 16 → 64; the last widening added 9.52% of the non-canonical mass found")
    assert "before a widening" in describe_rounds([Round(16, -3.0, 4, 0.1, 5)])
    assert "added less than 0.01% of" in describe_rounds([Round(16, -3.0, 4, 0.1, 5), Round(64, -3.0 + 1e-7, 2, 0.3, 9)])


def test_a_later_longer_prefix_takes_its_rank_at_a_state():
    """The per-state rule (issue 21's cause): a state extends a prefix that ranks within the W most
    probable it has extended so far, whatever its length, so a longer, more probable prefix that
    arrives after the state's first W is still extended; a less probable one is not."""
    import math

    import torch

    from marginal_core.estimators.beam import _Beam, _choose, _log_sum
    from marginal_core.scoring.tables import Tables

    # states 0 (start), 1, 2, 3 (final); token 10: 0 -> 1, token 11: 0 -> 2, token 12: 1 -> 2, token 13: 2 -> 3
    tables = Tables(tokens=torch.tensor([[10, 11], [12, 0], [13, 0], [0, 0]]),
                    next_state=torch.tensor([[1, 2], [2, -1], [3, -1], [-1, -1]]),
                    width=torch.tensor([2, 1, 1, 0]), final=torch.tensor([False, False, False, True]))
    best = torch.full((4, 1), -math.inf, dtype=torch.float64)
    best[0, 0] = 0.0
    start = _Beam(torch.tensor([0]), torch.zeros(1, dtype=torch.float64), torch.zeros((1, 0), dtype=torch.long))
    _, (_, _, states, values), dropped = _choose(start, torch.tensor([[-1.0, -5.0]], dtype=torch.float64), tables, best, 1)
    assert states.tolist() == [1, 2] and values.tolist() == [-1.0, -5.0] and len(dropped[1]) == 0
    step = _Beam(states, values, torch.tensor([[10], [11]]))
    inf = -math.inf
    for lp, kept in ((-0.5, [2]), (-4.5, [])):  # reaching state 2 at -1.5 beats its -5; at -5.5 it does not
        trial = best.clone()
        _, (_, _, states, _), dropped = _choose(step, torch.tensor([[lp, inf], [inf, inf]], dtype=torch.float64),
                                                tables, trial, 1)
        left = (len(dropped[1]), _log_sum(dropped[1]))
        assert states.tolist() == kept and left == ((0, -math.inf) if kept else (1, -5.5))  # left out, its log p
        assert trial[2, 0] == (-1.5 if kept else -5.0)  # the state's best now holds what it extended

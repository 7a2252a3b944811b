"""The beam estimator against exact enumeration: it finds every path once its width covers the
lattice, its bound never exceeds exact and never falls as the width grows, its best path is the
most probable one, and a stopped beam keeps what it found."""

from __future__ import annotations

import numpy as np
import pytest

from marginal_core.cli import main as cli_main
from marginal_core.errors import MarginalError
from marginal_core.estimators import EstimateOptions, Marginalizer
from marginal_core.methods import Method

QUESTION = "Question: What is the capital of France?\nAnswer:"


@pytest.mark.parametrize("context", [None, QUESTION])
def test_a_wide_beam_finds_every_path_with_its_exact_score(lm, context):
    m = Marginalizer(lm, " Paris", context)
    beam, exact = m.beam(64), m.exact()
    assert beam.run.done and not beam.run.cancelled
    exact_scores = dict(zip(exact.paths.tolist(), exact.log_p))
    assert sorted(beam.paths.tolist()) == sorted(exact_scores)  # every non-canonical path, once
    for path, score in zip(beam.paths.tolist(), beam.log_p):
        assert score == pytest.approx(exact_scores[path], abs=2e-4)
    assert beam.log_noncanonical == pytest.approx(exact.log_noncanonical, abs=2e-4)
    assert beam.paths.tolist()[int(np.argmax(beam.log_p))] == exact.paths.tolist()[int(np.argmax(exact.log_p))]


def test_the_bound_grows_with_the_width_and_stays_below_exact(smollm_model):
    m = Marginalizer(smollm_model, " eight legs")
    exact = m.exact()
    bounds = [m.beam(width).log_noncanonical for width in (1, 2, 4, 16)]
    assert all(a <= b + 1e-9 for a, b in zip(bounds, bounds[1:]))
    assert bounds[-1] <= exact.log_noncanonical + 2e-4
    assert bounds[0] > -np.inf
    best = m.beam(1)
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


@pytest.mark.parametrize("width", [0, -3, 1025])
def test_widths_out_of_range_are_refused_before_any_work(width, capsys):
    with pytest.raises(MarginalError, match="between 1 and 1024"):
        EstimateOptions(beam_width=width)
    assert cli_main(["estimate", "hi", "--methods", "beam", "--beam-width", str(width)]) == 2
    assert "beam width must be between 1 and 1024" in capsys.readouterr().err

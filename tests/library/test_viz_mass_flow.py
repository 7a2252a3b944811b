"""Where the mass flows: flow_of's arc shares and best paths against a brute force, and their DOT
drawing, on the exact scores of " Paris" under SmolLM2 (a few seconds)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from marginal_core import viz
from marginal_core.viz.mass_flow import flow_of, mass_flow
from tests.viz_cases import edges

# --------------------------------------------------------------------------------------------
# Where the mass flows (with a real model: the exact scores of " Paris" under SmolLM2)


@pytest.fixture(scope="module")
def paris(smollm_model):
    """The exact estimate of " Paris" after the capital-of-France question, and a beam's."""
    from marginal_core.estimators.marginalizer import Marginalizer

    m = Marginalizer(smollm_model, " Paris", "Question: What is the capital of France?\nAnswer:")
    return m.lattice, m.exact(), m.beam(2)


def cut_sums(lat, flow) -> list[float]:
    """The shares of the arcs crossing each node's byte offset (every path takes one of them)."""
    return [float(flow.share[(lat.arc_start <= b) & (lat.arc_end > b)].sum()) for b in lat.nodes[:-1].tolist()]


def test_mass_flow_shares_sum_to_one_over_every_cut_and_name_the_best_path(paris):
    lat, exact, beam = paris
    flow = flow_of(lat, exact)
    assert flow.num_paths == lat.count() and not flow.lower_bound
    assert flow.log_total == pytest.approx(exact.log_marginal, abs=1e-9)
    assert np.allclose(cut_sums(lat, flow), 1.0, rtol=0, atol=1e-9)
    scores = {lat.canonical: exact.log_p_canonical, **dict(zip(exact.paths.tolist(), exact.log_p.tolist()))}
    for arc, (start, _, token) in enumerate(lat.arcs):  # brute force: every path through each arc
        through = {p: lp for p, lp in scores.items() if _uses(lat, p, start, token)}
        assert flow.share[arc] == pytest.approx(np.exp(np.logaddexp.reduce(list(through.values())) - flow.log_total))
        assert flow.best[arc] == max(through, key=through.get)
    # A method's samples: shares of the mass it found (a lower bound), still 1 over every cut.
    found = flow_of(lat, beam)
    assert found.lower_bound and found.source == "beam" and found.num_paths == beam.num_distinct + 1
    assert np.allclose(cut_sums(lat, found), 1.0, rtol=0, atol=1e-9)
    assert found.log_total <= flow.log_total + 1e-9


def _uses(lat, path, start: int, token: int) -> bool:
    at = 0
    for t in path:
        if at == start and t == token:
            return True
        at += len(lat.vocab.surface(t))
    return False


def test_mass_flow_drawing_sizes_colours_and_names_each_arc(paris):
    lat, exact, beam = paris
    flow = flow_of(lat, exact)
    drawn = edges(viz.lattice_dot(lat, flow=flow))
    assert len(drawn) == lat.num_arcs
    canonical = [attrs for a, b, attrs in drawn if (a, b) == (0, lat.end)]
    (attrs,) = canonical
    assert f'color="{viz.flow_color(1.0)}"' in attrs and "best path: ␣Paris (log p" in attrs
    assert "of the marginal" in attrs
    widths = [float(re.search(r"penwidth=([\d.]+)", attrs).group(1)) for _, _, attrs in drawn]
    assert max(widths) == pytest.approx(0.8 + 7 * flow.share.max(), abs=0.01)
    found = viz.lattice_dot(lat, flow=flow_of(lat, beam))
    assert "of the mass the beam found (a lower bound)" in found
    assert ("on no scored path" in found) == (flow_of(lat, beam).num_paths < lat.count())
    with pytest.raises(ValueError):
        mass_flow(lat, [lat.canonical + lat.canonical], [0.0])  # " Paris Paris": not this text
